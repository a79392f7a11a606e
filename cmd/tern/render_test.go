package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// toolConversation is a session with a tool loop, then a second session.
const toolConversation = `{"type":"message","session":"s1","turn":"t1","body":{"role":"user","content":[{"type":"text","text":"Weather in Paris?"}]}}
{"type":"tool_call","session":"s1","turn":"t1","body":{"call_id":"call_1","name":"get_weather","arguments":{"city":"Paris"}}}
{"type":"tool_result","session":"s1","turn":"t1","body":{"call_id":"call_1","content":[{"type":"text","text":"{\"temp_c\":18}"}],"is_error":false}}
{"type":"message","session":"s1","turn":"t1","body":{"role":"assistant","content":[{"type":"text","text":"18°C in Paris."}]}}
{"type":"message","session":"s2","turn":"t2","body":{"role":"user","content":[{"type":"text","text":"A second conversation."}]}}
`

// renderCapsule is a capsule folder holding toolConversation.
func renderCapsule(t *testing.T, home string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	mustTern(t, home, "", "capsule", "new", dir, "--name", "helper")
	mustTern(t, home, toolConversation, "journal", "append", dir)
	return dir
}

// setAgent hand-edits agent.json's provider and model and accepts the edit.
func setAgent(t *testing.T, home, dir, provider, model string) {
	t.Helper()
	p := filepath.Join(dir, "agent.json")
	var a map[string]any
	b, _ := os.ReadFile(p)
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	a["provider"], a["model"] = provider, model
	b, _ = json.MarshalIndent(a, "", "  ")
	os.WriteFile(p, append(b, '\n'), 0o644)
	mustTern(t, home, "", "capsule", "accept", dir)
}

func TestRenderPrintsAJSONBodyForEveryProvider(t *testing.T) {
	home := t.TempDir()
	dir := renderCapsule(t, home)
	for _, tc := range []struct{ provider, want string }{
		{"openai-chat", `"role":"tool","tool_call_id":"call_1"`},
		{"openai-responses", `"type":"function_call_output","call_id":"call_1"`},
		{"anthropic", `"type":"tool_result","tool_use_id":"call_1"`},
		{"gemini", `"functionResponse":{"id":"call_1","name":"get_weather"`},
		{"ollama", `"role":"tool","content":"{\"temp_c\":18}","tool_name":"get_weather"`},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			out := mustTern(t, home, "", "render", dir, "--provider", tc.provider, "--model", "m1", "--session", "s1")
			if !json.Valid([]byte(out)) || !strings.HasSuffix(out, "}\n") {
				t.Fatalf("not one JSON document and a newline:\n%s", out)
			}
			if !strings.Contains(out, tc.want) || !strings.Contains(out, "Weather in Paris?") {
				t.Fatalf("body lacks %s or the user's question:\n%s", tc.want, out)
			}
		})
	}
}

func TestRenderDefaultsComeFromAgentJSONAndTheLatestSession(t *testing.T) {
	home := t.TempDir()
	dir := renderCapsule(t, home)
	setAgent(t, home, dir, "anthropic", "claude-sonnet-4-5")
	out := mustTern(t, home, "", "render", dir)
	for _, want := range []string{`"model":"claude-sonnet-4-5"`, `"max_tokens":`, "A second conversation."} {
		if !strings.Contains(out, want) {
			t.Errorf("default render lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Paris") {
		t.Errorf("default render shows session s1, not the latest session s2:\n%s", out)
	}
	if out := mustTern(t, home, "", "render", dir, "--session", "s1"); !strings.Contains(out, "Paris") {
		t.Errorf("--session s1 does not show s1:\n%s", out)
	}
}

func TestRenderRefusesBadUsageWithExitTwo(t *testing.T) {
	home := t.TempDir()
	dir := renderCapsule(t, home)
	valid := "openai-chat, openai-responses, anthropic, gemini, ollama"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an unknown provider is refused with the valid ones", []string{"--provider", "openia"}, valid},
		{"agent.json's offline provider is refused with the valid ones", nil, valid},
		{"a window smaller than the instructions and last user message is refused", []string{"--provider", "anthropic", "--window", "50"}, "window"},
		{"a negative window is refused", []string{"--provider", "anthropic", "--window", "-1"}, "--window"},
		{"a session with no events is refused", []string{"--provider", "anthropic", "--session", "nope"}, `session "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := tern(t, home, "", append([]string{"render", dir}, tc.args...)...)
			if code != 2 || out != "" || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errs, tc.want)
			}
		})
	}
}

func TestRenderReadsTarsAndSendsBlobsAsBase64(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home) // its workspace snapshot holds main.go
	var snap struct {
		Entries map[string]struct{ CID string } `json:"entries"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "artifacts", "snapshot.json"))
	if err := json.Unmarshal(b, &snap); err != nil || snap.Entries["main.go"].CID == "" {
		t.Fatalf("snapshot.json: %v\n%s", err, b)
	}
	msg := `{"type":"message","session":"s1","body":{"role":"user","content":[{"type":"text","text":"look"},` +
		`{"type":"file","cid":"` + snap.Entries["main.go"].CID + `","media_type":"application/pdf","name":"main.pdf"}]}}` + "\n"
	mustTern(t, home, msg, "journal", "append", dir)
	tarPath := filepath.Join(t.TempDir(), "a.tar")
	mustTern(t, home, "", "capsule", "pack", dir, "-o", tarPath)

	folder := mustTern(t, home, "", "render", dir, "--provider", "anthropic", "--model", "m")
	tar := mustTern(t, home, "", "render", tarPath, "--provider", "anthropic", "--model", "m")
	if folder != tar {
		t.Fatalf("the folder and its tar render differently:\n%s\n%s", folder, tar)
	}
	want := base64.StdEncoding.EncodeToString([]byte("package main\n"))
	if !strings.Contains(folder, `"data":"`+want+`"`) {
		t.Fatalf("the blob is not in the body as base64 %s:\n%s", want, folder)
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	home := t.TempDir()
	dir := renderCapsule(t, home)
	a := mustTern(t, home, "", "render", dir, "--provider", "gemini", "--session", "s1")
	b := mustTern(t, home, "", "render", dir, "--provider", "gemini", "--session", "s1")
	if !bytes.Equal([]byte(a), []byte(b)) {
		t.Fatalf("two renders differ:\n%s\n%s", a, b)
	}
}
