package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestModelTestOfTheOfflineModel(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	out := mustTern(t, home, "", "model", "test", dir, "--json")
	var p struct {
		Reply        string  `json:"reply"`
		FirstDeltaMS float64 `json:"first_delta_ms"`
		Usage        struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if p.Reply != `OK. You said: "Say OK."` || p.FirstDeltaMS <= 0 || p.Usage.OutputTokens == 0 {
		t.Fatalf("%+v", p)
	}
	if code, _, errs := tern(t, home, "", "model", "test", "not-a-folder-nor-an-id"); code != 2 || !strings.Contains(errs, "neither a capsule folder nor an agent id") {
		t.Fatalf("a bad argument: exit %d %q", code, errs)
	}
}

// A capsule whose agent talks to an OpenAI-compatible server, with its key
// in TERN_SECRET_<NAME>: the server gets the key in its header, the reply
// is printed, and a refused key is exit 1 naming the secret, never the key.
func TestModelTestOfAnOpenAICompatibleServer(t *testing.T) {
	const key = "sk-local-0123456789abcdef0123"
	var mu sync.Mutex
	var auth []string
	refuse := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		no := refuse
		mu.Unlock()
		if no {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+key+`","type":"invalid_request_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"OK\"},\"finish_reason\":null}]}\n\n"+
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"+
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	home := t.TempDir()
	dir := newAgent(t, home)
	p := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(p)
	var a map[string]any
	json.Unmarshal(b, &a)
	a["provider"], a["model"], a["base_url"], a["key_secret"] = "openai-chat", "qwen2.5-7b", srv.URL+"/v1", "LOCAL_KEY"
	b, _ = json.MarshalIndent(a, "", "  ")
	os.WriteFile(p, append(b, '\n'), 0o644)
	mustTern(t, home, "", "capsule", "accept", dir)
	t.Setenv("TERN_SECRETS_BACKEND", "file")
	t.Setenv("TERN_SECRET_LOCAL_KEY", key)

	out := mustTern(t, home, "", "model", "test", dir)
	if !strings.Contains(out, "reply        OK") || !strings.Contains(out, "9 tokens in, 1 out") {
		t.Fatalf("model test printed %q", out)
	}
	mu.Lock()
	refuse = true
	got := auth[0]
	mu.Unlock()
	if got != "Bearer "+key {
		t.Fatalf("Authorization %q", got)
	}
	code, out, errs := tern(t, home, "", "model", "test", dir)
	if code != 1 || !strings.Contains(errs, "LOCAL_KEY") || strings.Contains(errs+out, key) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("a refused key: exit %d, stderr %q, stdout %q: want exit 1, one line naming the secret and not the key", code, errs, out)
	}
	if code, _, errs := tern(t, home, "", "model", "test", dir); code != 1 || !strings.Contains(errs, "tern secret set LOCAL_KEY") {
		t.Fatalf("exit %d %q", code, errs)
	}
}
