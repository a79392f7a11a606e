package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/linelog"
)

// tern runs the CLI in-process with $TERN_HOME set to home and returns its
// exit code, standard output and standard error.
func tern(t *testing.T, home, stdin string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("TERN_HOME", home)
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func mustTern(t *testing.T, home, stdin string, args ...string) string {
	t.Helper()
	code, out, errs := tern(t, home, stdin, args...)
	if code != 0 {
		t.Fatalf("tern %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

const conversation = `{"type":"message","session":"s1","turn":"t1","body":{"role":"user","content":[{"type":"text","text":"hi"}]}}
{"type":"message","session":"s1","turn":"t1","body":{"role":"assistant","content":[{"type":"text","text":"hello"}]}}
`

func newAgent(t *testing.T, home string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	id := strings.TrimSpace(mustTern(t, home, "", "capsule", "new", dir, "--name", "helper"))
	if len(id) != 36 {
		t.Fatalf("capsule new printed %q, want an agent id", id)
	}
	mustTern(t, home, conversation, "journal", "append", dir)
	ws := filepath.Join(t.TempDir(), "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n"), 0o644)
	mustTern(t, home, "", "capsule", "snapshot", dir, ws)
	return dir
}

func TestExitCodes(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"verify of a good capsule succeeds", []string{"capsule", "verify", dir}, 0},
		{"a missing argument is bad usage", []string{"capsule", "verify"}, 2},
		{"an unknown flag is bad usage", []string{"capsule", "verify", dir, "--frobnicate"}, 2},
		{"an unknown command is bad usage", []string{"capsule", "fly"}, 2},
		{"verify of a path that does not exist is bad usage", []string{"capsule", "verify", filepath.Join(dir, "nope")}, 2},
		{"new without a name is bad usage", []string{"capsule", "new", filepath.Join(t.TempDir(), "x")}, 2},
		{"pack without -o is bad usage", []string{"capsule", "pack", dir}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := tern(t, home, "", tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (%s)", code, tc.code, errs)
			}
			if code != 0 && !strings.HasPrefix(errs, "tern: ") {
				t.Errorf("stderr %q does not explain the error", errs)
			}
		})
	}
}

func TestVerifyExitsOneAndNamesTheDamagedFile(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	p := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(p)
	b[10] ^= 1
	os.WriteFile(p, b, 0o644)
	code, out, _ := tern(t, home, "", "capsule", "verify", dir)
	if code != 1 || !strings.Contains(out, "agent.json: ") {
		t.Fatalf("exit %d, output %q", code, out)
	}
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("garbage"), 0o644)
	code, out, _ = tern(t, home, "", "capsule", "verify", dir)
	if code != 1 || !strings.Contains(out, "manifest.json: ") {
		t.Fatalf("unreadable manifest: exit %d, output %q", code, out)
	}
}

func TestABadDraftLineIsRefusedByLineAndTheJournalIsUnchanged(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	jpath := filepath.Join(dir, "memory", "timeline_events.jsonl")
	before, _ := os.ReadFile(jpath)
	manifestBefore, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	good := `{"type":"message","body":{"role":"user","content":[{"type":"text","text":"fine"}]}}` + "\n"
	for _, tc := range []struct {
		name, bad, says string
	}{
		{"a line that is not JSON", `{"type": oops}`, "not JSON"},
		{"a line without a type", `{"session":"s"}`, `missing "type"`},
		{"a type with a line break, which would forge a server-sent event", `{"type":"message\nid: 999999\nevent: turn.ended"}`,
			`type "message\nid: 999999\nevent: turn.ended": byte 8 is '\n'; a type is 1 to 64 bytes: a lower-case letter (a-z), then lower-case letters, digits, '_', '.' or '-'`},
		{"an upper-case type", `{"type":"Note"}`, `type "Note": byte 1 is 'N'`},
		{"an unknown key", `{"type":"note","sig":"forged"}`, `unknown key "sig"`},
		{"a session that is not text", `{"type":"note","session":7}`, `"session" must be a string`},
		{"a message without a body", `{"type":"message"}`, `type "message": body.role: missing`},
		{"a message whose role is not system, user or assistant", `{"type":"message","body":{"role":"wizard","content":[{"type":"text","text":"hi"}]}}`, `body.role: expected "system", "user" or "assistant", got "wizard"`},
		{"a message without content", `{"type":"message","body":{"role":"user","content":[]}}`, "body.content: expected a non-empty list of parts"},
		{"an image whose cid is not a blob CID", `{"type":"message","body":{"role":"user","content":[{"type":"image","cid":"cat.png","media_type":"image/png"}]}}`, "body.content[0].cid: expected the CID of a blob"},
		{"a tool call with an empty body", `{"type":"tool_call","body":{}}`, `type "tool_call": body.call_id: missing`},
		{"a tool result without is_error", `{"type":"tool_result","body":{"call_id":"c1","content":[]}}`, "body.is_error: missing; expected true or false"},
		{"reasoning whose data is not an object", `{"type":"reasoning","body":{"provider":"p","model":"m","host":"h","data":[]}}`, "body.data: expected an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := tern(t, home, good+"\n"+tc.bad+"\n", "journal", "append", dir)
			if code != 2 || !strings.Contains(errs, "line 3: ") || !strings.Contains(errs, tc.says) {
				t.Fatalf("exit %d, stderr %q; want 2 naming line 3 and saying %q", code, errs, tc.says)
			}
			if out != "" {
				t.Fatalf("a refused append printed %q", out)
			}
			after, _ := os.ReadFile(jpath)
			if !bytes.Equal(before, after) {
				t.Fatal("a refused append changed the journal")
			}
			if m, _ := os.ReadFile(filepath.Join(dir, "manifest.json")); !bytes.Equal(m, manifestBefore) {
				t.Fatal("a refused append changed the manifest")
			}
		})
	}
}

func TestJournalLogJSONPrintsOneEventPerLine(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	out := mustTern(t, home, "", "journal", "log", dir, "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 { // the agent's creation, two messages and the snapshot
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	var prev uint64
	for _, l := range lines {
		var ev struct {
			ID    string `json:"id"`
			Clock uint64 `json:"clock"`
			Type  string `json:"type"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.ID == "" {
			t.Fatalf("line %q: %v", l, err)
		}
		if ev.Clock <= prev {
			t.Fatalf("not in total order: %s", out)
		}
		prev = ev.Clock
	}
	human := mustTern(t, home, "", "journal", "log", dir)
	if !strings.Contains(human, "user: hi") || !strings.Contains(human, "workspace.snapshot") {
		t.Fatalf("human log:\n%s", human)
	}
}

func TestTwoMachinesDivergeAndMergeToIdenticalExports(t *testing.T) {
	laptop, desktop := t.TempDir(), t.TempDir()
	dir := newAgent(t, laptop)
	// The desktop writes its copy once the laptop made it a member.
	desktopID := strings.TrimSpace(mustTern(t, desktop, "", "id"))
	if out := mustTern(t, laptop, "", "member", "add", dir, desktopID); out != "added "+desktopID+"\n" {
		t.Fatalf("member add: %q", out)
	}
	root := t.TempDir()
	tarPath := filepath.Join(root, "a.tar")
	mustTern(t, laptop, "", "capsule", "pack", dir, "-o", tarPath)
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	mustTern(t, laptop, "", "capsule", "unpack", tarPath, a)
	mustTern(t, desktop, "", "capsule", "unpack", tarPath, b)
	mustTern(t, laptop, conversation, "journal", "append", a)
	mustTern(t, desktop, conversation, "journal", "append", b)

	mustTern(t, laptop, "", "capsule", "merge", a, b, "-o", filepath.Join(root, "ab"))
	mustTern(t, desktop, "", "capsule", "merge", b, a, "-o", filepath.Join(root, "ba"))
	mustTern(t, laptop, "", "capsule", "pack", filepath.Join(root, "ab"), "-o", filepath.Join(root, "ab.tar"))
	mustTern(t, desktop, "", "capsule", "pack", filepath.Join(root, "ba"), "-o", filepath.Join(root, "ba.tar"))
	x, _ := os.ReadFile(filepath.Join(root, "ab.tar"))
	y, _ := os.ReadFile(filepath.Join(root, "ba.tar"))
	if !bytes.Equal(x, y) {
		t.Fatal("exports of the two merges differ")
	}
	out := mustTern(t, laptop, "", "capsule", "inspect", filepath.Join(root, "ab.tar"), "--json")
	var in struct {
		Events int               `json:"events"`
		Vector map[string]any    `json:"vector"`
		Forks  []json.RawMessage `json:"forks"`
	}
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatal(err)
	}
	// The creation, the desktop's membership, the snapshot, and each
	// side's conversation twice over.
	if in.Events != 9 || len(in.Vector) != 2 || len(in.Forks) != 0 {
		t.Fatalf("inspect: %s", out)
	}
}

func TestASignedPackVerifiesWithItsSigner(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	tarPath := filepath.Join(t.TempDir(), "a.tar")
	mustTern(t, home, "", "capsule", "pack", dir, "-o", tarPath, "--sign")
	var in struct {
		Holder struct{ Peer string } `json:"holder"`
	}
	json.Unmarshal([]byte(mustTern(t, home, "", "capsule", "inspect", dir, "--json")), &in)
	out := mustTern(t, home, "", "capsule", "verify", tarPath, "--signer", in.Holder.Peer)
	if !strings.Contains(out, "signed by "+in.Holder.Peer) {
		t.Fatalf("verify: %s", out)
	}
	code, _, _ := tern(t, t.TempDir(), "", "capsule", "verify", tarPath, "--signer", "12D3KooWRBy97UB99e3J6hiPesre1MZeuNQvfan4gBziswrRJsNK")
	if code != 1 {
		t.Fatalf("another signer: exit %d, want 1", code)
	}
}

func TestUnpackOfABadTarExitsTwoAndCreatesNothing(t *testing.T) {
	home := t.TempDir()
	root := t.TempDir()
	bad := filepath.Join(root, "bad.tar")
	os.WriteFile(bad, []byte("definitely not a tar archive, but long enough to look at"), 0o644)
	code, _, errs := tern(t, home, "", "capsule", "unpack", bad, filepath.Join(root, "out"))
	if code != 2 || !strings.Contains(errs, "bad.tar") {
		t.Fatalf("exit %d, %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(root, "out")); err == nil {
		t.Fatal("a failed unpack created the folder")
	}
}

func TestSnapshotAndMaterializeRoundTrip(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	out := filepath.Join(t.TempDir(), "ws")
	mustTern(t, home, "", "capsule", "materialize", dir, out)
	if b, err := os.ReadFile(filepath.Join(out, "main.go")); err != nil || string(b) != "package main\n" {
		t.Fatalf("materialized main.go: %q %v", b, err)
	}
}

func TestTheDemoRuns(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	out := mustTern(t, t.TempDir(), "", "demo")
	for _, want := range []string{"the step appended whole: reasoning, tool_call, tool_call, turn.usage", "verify caught it", "byte-identical",
		`the notes written apart both survive: "Maya prefers tabs to spaces." + "The reply to Ana is due Friday."`,
		"a second agent, planner (agent id ", "so the turn paused: act_approval_", `then completed: "Done: write_file returned created plan.md`, "each once, the turn never restarted",
		"the desktop holds all", "the agent was frozen for", "the laptop node refuses to run it now (409",
		`on the desktop with the workspace it brought: "Done: read_file returned 1. sync 2. move 3. continue`,
		"the offline model's 2 reasoning events are left out", "its backup says it holds the agent at epoch 1; its peer knows epoch ", ": refused (409",
		"17  fencing        refused", "Done."} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "why it matters: "); n != 17 {
		t.Errorf("%d steps say why they matter, want 17", n)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the demo left %d entries in $TMPDIR", len(left))
	}
}

func TestTheDemoKeepsItsHomesWhereAsked(t *testing.T) {
	keep := filepath.Join(t.TempDir(), "demo")
	mustTern(t, t.TempDir(), "", "demo", "--keep", keep)
	for _, home := range []string{"laptop-home", "desktop-home", "laptop-home-backup"} {
		if _, err := os.Stat(filepath.Join(keep, home, "capsules")); err != nil {
			t.Errorf("%s: %v", home, err)
		}
	}
	if code, _, errs := tern(t, t.TempDir(), "", "demo", "--keep", keep); code != exitBadInput || !strings.Contains(errs, "not empty") {
		t.Fatalf("--keep a full folder: exit %d, %q", code, errs)
	}
}

func TestAHandEditIsDamageUntilAccepted(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	p := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(p)
	b = bytes.Replace(b, []byte(`"offline"`), []byte(`"openai-responses"`), 1)
	os.WriteFile(p, bytes.Replace(b, []byte("tern-offline"), []byte("gpt-5"), 1), 0o644)
	if code, _, _ := tern(t, home, "", "capsule", "verify", dir); code != 1 {
		t.Fatalf("verify of an unaccepted edit: exit %d", code)
	}
	out := mustTern(t, home, "", "capsule", "accept", dir)
	if !strings.Contains(out, "accepted agent.json") {
		t.Fatalf("accept printed %q", out)
	}
	mustTern(t, home, "", "capsule", "verify", dir)
	if code, _, errs := tern(t, home, "", "capsule", "accept", filepath.Join(dir, "nope")); code != 2 || errs == "" {
		t.Fatalf("accept of a missing folder: exit %d %q", code, errs)
	}
}

// tern demo --web keeps the nodes running after the story, with a login
// address for each page that works, until interrupted.
func TestTheDemoKeepsItsNodesForTheWebPage(t *testing.T) {
	out := &linelog.Log{}
	e := &env{stdin: strings.NewReader(""), stdout: out, stderr: out}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runDemo(ctx, e, t.TempDir(), false, true) }()
	_, line, err := awaitLine(out, 0, time.Minute, func(line string) bool {
		f := strings.Fields(line)
		return len(f) == 2 && f[0] == "desktop" && strings.Contains(f[1], "/ui/login?code=")
	})
	if err != nil {
		t.Fatalf("no page address: %v:\n%s", err, out.String())
	}
	login := strings.Fields(line)[1]
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(login)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Set-Cookie"), "tern_ui_") {
		t.Fatalf("the desktop's page login: %d %v", resp.StatusCode, resp.Header)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// inspect counts the journal as it is, events after the manifest's seal
// included (a writer seals them up to a second later, a crashed one not
// until the next writer).
func TestInspectCountsEventsAfterTheSeal(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	before := filepath.Join(t.TempDir(), "before")
	if err := os.CopyFS(before, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	mustTern(t, home, draftLine("one more"), "journal", "append", dir)
	journal, err := os.ReadFile(filepath.Join(dir, capsule.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	// The old manifest with the new journal: one event past the seal.
	if err := os.WriteFile(filepath.Join(before, capsule.JournalFile), journal, 0o644); err != nil {
		t.Fatal(err)
	}
	var want int64
	filepath.WalkDir(before, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && d.Name() != capsule.ManifestFile {
			info, _ := d.Info()
			want += info.Size()
		}
		return err
	})
	var in struct {
		Bytes int64 `json:"bytes"`
	}
	json.Unmarshal([]byte(mustTern(t, home, "", "capsule", "inspect", before, "--json")), &in)
	if in.Bytes != want {
		t.Fatalf("inspect counts %d bytes, the files hold %d", in.Bytes, want)
	}
}
