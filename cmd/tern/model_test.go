package main

import (
	"encoding/json"
	"io"
	"net"
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
	if code, _, errs := tern(t, home, "", "model", "test", "not-a-folder-nor-an-id"); code != 2 || !strings.Contains(errs, "neither a capsule folder or tar nor an agent id") {
		t.Fatalf("a bad argument: exit %d %q", code, errs)
	}

	// Like every command that reads a capsule, it takes a tar.
	tarPath := filepath.Join(t.TempDir(), "agent.tar")
	mustTern(t, home, "", "capsule", "pack", dir, "-o", tarPath)
	if out := mustTern(t, home, "", "model", "test", tarPath); !strings.Contains(out, `reply        OK. You said: "Say OK."`) {
		t.Fatalf("model test of a tar printed %q", out)
	}
}

// What a user meets when the server speaks another API: one line, exit 1,
// saying what to check.
func TestModelTestOfAServerThatSpeaksAnotherAPI(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[]}`)
	}))
	defer other.Close()
	home := t.TempDir()
	dir := newAgent(t, home)
	// (A server that is not there: TestAModelThatCannotBeReachedExits3SayingWhatToCheck.)
	for _, c := range []struct{ base, want string }{
		{other.URL + "/v1", "fix provider or base_url in agent.json"},
	} {
		setModel(t, home, dir, map[string]any{"provider": "openai-chat", "model": "m", "base_url": c.base})
		code, _, errs := tern(t, home, "", "model", "test", dir)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and one line saying %q", c.base, code, errs, c.want)
		}
	}
}

// setModel edits agent.json's fields and accepts the edit.
func setModel(t *testing.T, home, dir string, fields map[string]any) {
	t.Helper()
	p := filepath.Join(dir, "agent.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var a map[string]any
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		a[k] = v
	}
	b, _ = json.MarshalIndent(a, "", "  ")
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	mustTern(t, home, "", "capsule", "accept", dir)
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
	setModel(t, home, dir, map[string]any{"provider": "openai-chat", "model": "qwen2.5-7b", "base_url": srv.URL + "/v1", "key_secret": "LOCAL_KEY"})
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

// A model API that cannot be reached: model test says which host and what
// to check, says so as each retry waits, and exits 3 (trying again may
// work); a turn that fails so exits 3 too.
func TestAModelThatCannotBeReachedExits3SayingWhatToCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	home := t.TempDir()
	dir := newAgent(t, home)
	setModel(t, home, dir, map[string]any{"provider": "openai-chat", "model": "m", "base_url": "http://" + addr + "/v1"})

	code, _, errs := tern(t, home, "", "model", "test", dir)
	if code != exitFailed || !strings.Contains(errs, "nothing answers at "+addr) || !strings.Contains(errs, "trying again in") || strings.Contains(errs, "dial tcp") {
		t.Fatalf("model test of an unreachable server: exit %d:\n%s", code, errs)
	}

	runNode(t, home)
	id := strings.TrimSpace(mustTern(t, home, "", "capsule", "import", dir))
	code, _, errs = tern(t, home, "", "turn", id, "hello")
	if code != exitFailed || !strings.Contains(errs, "nothing answers at "+addr) {
		t.Fatalf("a turn whose model cannot be reached: exit %d:\n%s", code, errs)
	}
}
