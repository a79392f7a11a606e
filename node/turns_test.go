package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/sse"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/tool"
)

// withTools gives the capsule in dir the built-in tools, with their
// defaults, as a new capsule from tern capsule new has them.
func withTools(t testing.TB, n *Node) func(dir string) {
	return func(dir string) {
		a := capsule.DefaultAgent("mover")
		a.Tools = tool.Defaults()
		b, err := a.Encode()
		if err != nil {
			t.Fatal(err)
		}
		acceptEdit(t, n, dir, capsule.AgentFile, string(b))
	}
}

// callAPI sends a JSON request to n's API and decodes the answer into out
// (unless nil), returning the status.
func callAPI(t *testing.T, n *Node, method, path string, in, out any) int {
	t.Helper()
	var body *strings.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = strings.NewReader(string(b))
	} else {
		body = strings.NewReader("")
	}
	code, data := call(t, n, method, path, body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, code, data, err)
		}
	}
	return code
}

// sseItem is one server-sent event.
type sseItem struct {
	id, event, data string
}

// follow reads the turn's events from after (a Last-Event-ID; -1 for
// none) until the stream ends or stop says to cut it.
func follow(t *testing.T, n *Node, sessionID, turnID string, after int, stop func([]sseItem) bool) []sseItem {
	t.Helper()
	return followQuery(t, n, sessionID, turnID, "", after, stop)
}

// followQuery is follow with a query string ("?relay=0").
func followQuery(t *testing.T, n *Node, sessionID, turnID, query string, after int, stop func([]sseItem) bool) []sseItem {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.info.API+"/v1/sessions/"+sessionID+"/turns/"+turnID+"/events"+query, nil)
	req.Header.Set("Authorization", "Bearer "+n.info.Token)
	if after >= 0 {
		req.Header.Set("Last-Event-ID", strconv.Itoa(after))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var items []sseItem
	frames := sse.NewReader(resp.Body, api.MaxFrame)
	for {
		f, err := frames.Next()
		if err != nil {
			return items
		}
		if f.Event == "" {
			continue
		}
		items = append(items, sseItem{id: f.ID, event: f.Event, data: f.Data})
		if stop != nil && stop(items) {
			return items
		}
	}
}

// durable returns the items with an id: the turn's events.
func durable(items []sseItem) []sseItem {
	var out []sseItem
	for _, it := range items {
		if it.id != "" {
			out = append(out, it)
		}
	}
	return out
}

func newSession(t *testing.T, n *Node, agent string) string {
	t.Helper()
	var s struct{ ID string }
	if code := callAPI(t, n, "POST", "/v1/agents/"+agent+"/sessions", nil, &s); code != 201 || s.ID == "" {
		t.Fatalf("new session: %d %+v", code, s)
	}
	return s.ID
}

func startTurn(t *testing.T, n *Node, sessionID string, req map[string]any) (int, map[string]any) {
	t.Helper()
	var out map[string]any
	code := callAPI(t, n, "POST", "/v1/sessions/"+sessionID+"/turns", req, &out)
	return code, out
}

func getTurn(t *testing.T, n *Node, sessionID, turnID string) api.TurnInfo {
	t.Helper()
	var ti api.TurnInfo
	if code := callAPI(t, n, "GET", "/v1/sessions/"+sessionID+"/turns/"+turnID, nil, &ti); code != 200 {
		t.Fatalf("get turn: %d", code)
	}
	return ti
}

func TestATurnStreamsTheModelsAnswerAndEndsCompleted(t *testing.T) {
	n := startNode(t, t.TempDir())
	agent := heldBy(t, n, withTools(t, n))
	sessionID := newSession(t, n, agent)
	code, turn := startTurn(t, n, sessionID, map[string]any{"text": "hello there"})
	if code != 201 || turn["status"] != "running" {
		t.Fatalf("new turn: %d %v", code, turn)
	}
	turnID := turn["id"].(string)
	items := follow(t, n, sessionID, turnID, -1, nil)
	var kinds []string
	for i, it := range durable(items) {
		if it.id != strconv.Itoa(i+1) {
			t.Fatalf("item %d has id %s", i+1, it.id)
		}
		kinds = append(kinds, it.event)
	}
	want := "turn.started message message turn.usage turn.ended"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("items %v, want %s", kinds, want)
	}
	deltas := 0
	for _, it := range items {
		if it.event == "delta" {
			deltas++
		}
	}
	if ti := getTurn(t, n, sessionID, turnID); ti.Status != "completed" || ti.Events != 5 {
		t.Fatalf("turn %+v (%d deltas)", ti, deltas)
	}
	// A finished turn replays from the journal: the same items.
	again := durable(follow(t, n, sessionID, turnID, -1, nil))
	if len(again) != 5 || again[4].event != "turn.ended" || again[2].data != durable(items)[2].data {
		t.Fatalf("replay %v", again)
	}
}

// A stream cut after N items and resumed with Last-Event-ID gives each
// item exactly once, for every N, live and replayed.
func TestAStreamResumedAfterAnyItemGivesEachItemOnce(t *testing.T) {
	n := startNode(t, t.TempDir())
	agent := heldBy(t, n, withTools(t, n))
	gate := gatedModels(n)
	sessionID := newSession(t, n, agent)
	_, turn := startTurn(t, n, sessionID, map[string]any{"text": "!call read_file {\"path\": \"missing.txt\"}"})
	turnID := turn["id"].(string)
	// Live: cut after two items while the model is held, resume.
	first := durable(follow(t, n, sessionID, turnID, -1, func(items []sseItem) bool { return len(durable(items)) == 2 }))
	gate.release()
	rest := durable(follow(t, n, sessionID, turnID, 2, nil))
	all := append(first, rest...)
	for i, it := range all {
		if it.id != strconv.Itoa(i+1) {
			t.Fatalf("live resume: item %d has id %s (%v)", i+1, it.id, all)
		}
	}
	if all[len(all)-1].event != "turn.ended" {
		t.Fatalf("the stream did not end with the turn: %v", all)
	}
	for cut := 0; cut <= len(all); cut++ {
		got := durable(follow(t, n, sessionID, turnID, cut, nil))
		if len(got) != len(all)-cut {
			t.Fatalf("resumed after %d: %d items, want %d", cut, len(got), len(all)-cut)
		}
		for i, it := range got {
			if it.id != all[cut+i].id || it.data != all[cut+i].data {
				t.Fatalf("resumed after %d: item %d differs", cut, i)
			}
		}
	}
}

// gatedModel holds each model step until released, then answers as the
// offline model does.
type gatedModel struct {
	mu      sync.Mutex
	open    chan struct{}
	started chan struct{}
}

func gatedModels(n *Node) *gatedModel {
	g := &gatedModel{open: make(chan struct{}), started: make(chan struct{}, 100)}
	n.rt.SetModels(func(s provider.Settings) (provider.Model, error) {
		m, err := provider.New(s)
		if err != nil {
			return nil, err
		}
		return stepFunc(func(ctx context.Context, body []byte, deltas func(provider.Delta)) (*provider.Result, error) {
			g.started <- struct{}{}
			g.mu.Lock()
			open := g.open
			g.mu.Unlock()
			select {
			case <-open:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return m.Step(ctx, body, deltas)
		}), nil
	})
	return g
}

func (g *gatedModel) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}

type stepFunc func(ctx context.Context, body []byte, deltas func(provider.Delta)) (*provider.Result, error)

func (f stepFunc) Step(ctx context.Context, body []byte, deltas func(provider.Delta)) (*provider.Result, error) {
	return f(ctx, body, deltas)
}

func TestASecondTurnWhileOneRunsIsRefusedUnlessItCancelsIt(t *testing.T) {
	n := startNode(t, t.TempDir())
	agent := heldBy(t, n, withTools(t, n))
	gatedModels(n)
	sessionID := newSession(t, n, agent)
	_, first := startTurn(t, n, sessionID, map[string]any{"text": "one"})
	code, refused := startTurn(t, n, sessionID, map[string]any{"text": "two"})
	if code != 409 || refused["active_turn"] != first["id"] || !strings.Contains(refused["error"].(string), first["id"].(string)) {
		t.Fatalf("a second turn: %d %v", code, refused)
	}
	code, second := startTurn(t, n, sessionID, map[string]any{"text": "two", "cancel_active": true})
	if code != 201 {
		t.Fatalf("cancel_active: %d %v", code, second)
	}
	if ti := getTurn(t, n, sessionID, first["id"].(string)); ti.Status != "cancelled" || ti.CancelledBy != second["id"] {
		t.Fatalf("the first turn: %+v", ti)
	}
	var ti api.TurnInfo
	if code := callAPI(t, n, "POST", "/v1/sessions/"+sessionID+"/turns/"+second["id"].(string)+"/cancel", nil, &ti); code != 200 || ti.Status != "cancelled" {
		t.Fatalf("cancel: %d %+v", code, ti)
	}
}

// Three parallel calls that need approval pause the turn with three
// actions; only the complete, matching set of answers continues it.
func TestAPausedTurnIsContinuedOnlyByTheCompleteMatchingAnswers(t *testing.T) {
	n := startNode(t, t.TempDir())
	agent := heldBy(t, n, withTools(t, n))
	sessionID := newSession(t, n, agent)
	script := "!call write_file {\"path\": \"a.txt\", \"content\": \"A\"}\n" +
		"!call write_file {\"path\": \"b.txt\", \"content\": \"B\"}\n" +
		"!call write_file {\"path\": \"c.txt\", \"content\": \"C\"}"
	_, turn := startTurn(t, n, sessionID, map[string]any{"text": script})
	turnID := turn["id"].(string)
	follow(t, n, sessionID, turnID, -1, nil)
	ti := getTurn(t, n, sessionID, turnID)
	if ti.Status != "paused" || len(ti.RequiredActions) != 3 {
		t.Fatalf("turn %+v", ti)
	}
	var ids []string
	for _, a := range ti.RequiredActions {
		if a.Kind != "approval" || a.Tool != "write_file" || len(a.Arguments) == 0 || a.Message == "" {
			t.Fatalf("action %+v", a)
		}
		ids = append(ids, a.ID)
	}
	var pending []api.PendingAction
	if callAPI(t, n, "GET", "/v1/actions", nil, &pending); len(pending) != 3 || pending[0].Session != sessionID || pending[0].Agent != agent {
		t.Fatalf("pending %+v", pending)
	}
	yes := func(id string) map[string]any { return map[string]any{"action_id": id, "approve": true} }
	for _, c := range []struct {
		name      string
		responses []any
		code      int
		says      string
	}{
		{"partial", []any{yes(ids[0]), yes(ids[1])}, 422, ids[2]},
		{"unknown", []any{yes(ids[0]), yes(ids[1]), yes("act_approval_nope")}, 422, "unknown action"},
		{"duplicate", []any{yes(ids[0]), yes(ids[0]), yes(ids[1]), yes(ids[2])}, 400, "answered twice"},
		{"mismatched", []any{yes(ids[0]), yes(ids[1]), map[string]any{"action_id": ids[2], "output": "x"}}, 422, "takes \"approve\""},
	} {
		code, out := startTurn(t, n, sessionID, map[string]any{"responses": c.responses})
		if code != c.code || !strings.Contains(fmt.Sprint(out["error"]), c.says) {
			t.Errorf("%s: %d %v, want %d saying %q", c.name, code, out, c.code, c.says)
		}
	}
	if ti := getTurn(t, n, sessionID, turnID); ti.Status != "paused" {
		t.Fatalf("a refused answer changed the turn: %+v", ti)
	}
	code, next := startTurn(t, n, sessionID, map[string]any{"responses": []any{yes(ids[0]), map[string]any{"action_id": ids[1], "approve": false}, yes(ids[2])}})
	if code != 201 {
		t.Fatalf("the complete set: %d %v", code, next)
	}
	follow(t, n, sessionID, next["id"].(string), -1, nil)
	if ti := getTurn(t, n, sessionID, next["id"].(string)); ti.Status != "completed" || ti.Continues != turnID {
		t.Fatalf("the continuing turn: %+v", ti)
	}
	if ti := getTurn(t, n, sessionID, turnID); ti.Status != "paused" || ti.ContinuedBy != next["id"] {
		t.Fatalf("the paused turn does not name what continued it: %+v", ti)
	}
	ws := filepath.Join(n.home, WorkspacesDir, agent)
	for name, want := range map[string]bool{"a.txt": true, "b.txt": false, "c.txt": true} {
		_, err := os.Stat(filepath.Join(ws, name))
		if (err == nil) != want {
			t.Errorf("%s written: %v, want %v", name, err == nil, want)
		}
	}
	code, stale := startTurn(t, n, sessionID, map[string]any{"responses": []any{yes(ids[0])}})
	if code != 409 || !strings.Contains(fmt.Sprint(stale["error"]), "answered already") {
		t.Fatalf("a stale answer: %d %v", code, stale)
	}
}

// A turn may ask for another provider and model: it talks to them for
// that turn only, and the session goes on with agent.json's model after.
func TestATurnCanSwitchTheModelForItselfOnly(t *testing.T) {
	stub := newChatStub(t, 3)
	n, agent := stubAgent(t, stub)
	sessionID := newSession(t, n, agent)
	turnOf := func(req map[string]any) api.TurnInfo {
		t.Helper()
		code, turn := startTurn(t, n, sessionID, req)
		if code != 201 {
			t.Fatalf("turn %v: %d %v", req, code, turn)
		}
		follow(t, n, sessionID, turn["id"].(string), -1, nil)
		return getTurn(t, n, sessionID, turn["id"].(string))
	}
	if ti := turnOf(map[string]any{"text": "one"}); ti.Status != "completed" || stub.requests() != 1 {
		t.Fatalf("agent.json's model: %+v, %d requests to the stub", ti, stub.requests())
	}
	offline := map[string]any{"provider": "offline", "name": "tern-offline"}
	if ti := turnOf(map[string]any{"text": "two", "model": offline}); ti.Status != "completed" || stub.requests() != 1 {
		t.Fatalf("the offline model for one turn: %+v, %d requests to the stub", ti, stub.requests())
	}
	if ti := turnOf(map[string]any{"text": "three"}); ti.Status != "completed" || stub.requests() != 2 {
		t.Fatalf("back to agent.json's model: %+v, %d requests to the stub", ti, stub.requests())
	}
	// A hosted provider without its key fails the turn saying which secret.
	if ti := turnOf(map[string]any{"text": "four", "model": map[string]any{"provider": "anthropic", "name": "claude-sonnet-4-5"}}); ti.Status != "failed" || !strings.Contains(ti.Error, "ANTHROPIC_KEY") {
		t.Fatalf("anthropic without a key: %+v", ti)
	}
	for _, bad := range []map[string]any{{"provider": "openai", "name": "gpt-5"}, {"provider": "offline", "name": "gpt-5"}, {"provider": "ollama", "name": ""}} {
		if code, out := startTurn(t, n, sessionID, map[string]any{"text": "x", "model": bad}); code != 422 {
			t.Errorf("model %v: %d %v, want 422", bad, code, out)
		}
	}
}

// A turn cancelled while a shell command runs leaves an intent without an
// outcome; the next turn does not run the command again but asks whether
// it took effect.
func TestACancelledCallIsReconciledNotRunAgain(t *testing.T) {
	n := startNode(t, t.TempDir())
	agent := heldBy(t, n, func(dir string) {
		a := capsule.DefaultAgent("mover")
		a.Tools = tool.Defaults()
		for i := range a.Tools {
			if a.Tools[i].Name == "shell" {
				no := false
				a.Tools[i].Approval = &no // this agent's shell runs without asking
			}
		}
		b, _ := a.Encode()
		acceptEdit(t, n, dir, capsule.AgentFile, string(b))
	})
	sessionID := newSession(t, n, agent)
	_, turn := startTurn(t, n, sessionID, map[string]any{"text": "!call shell {\"command\": \"echo ran >> ran.txt; sleep 30\"}"})
	turnID := turn["id"].(string)
	ran := filepath.Join(n.home, WorkspacesDir, agent, "ran.txt")
	eventually(t, "the command starts", func() bool { _, err := os.Stat(ran); return err == nil })
	followed, connected := make(chan []sseItem), make(chan struct{})
	go func() {
		var once sync.Once
		followed <- follow(t, n, sessionID, turnID, -1, func([]sseItem) bool {
			once.Do(func() { close(connected) }) // its first item: the stream is open
			return false
		})
	}()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("a follower of the running turn got none of its items")
	}
	var ti api.TurnInfo
	if code := callAPI(t, n, "POST", "/v1/sessions/"+sessionID+"/turns/"+turnID+"/cancel", nil, &ti); code != 200 || ti.Status != "cancelled" {
		t.Fatalf("cancel: %d %+v", code, ti)
	}
	select {
	case items := <-followed:
		if last := items[len(items)-1]; last.event != "turn.ended" || !strings.Contains(last.data, `"cancelled"`) {
			t.Fatalf("a follower of the cancelled turn ended with %+v", last)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a follower of the cancelled turn never got its end")
	}
	_, next := startTurn(t, n, sessionID, map[string]any{"text": "go on"})
	follow(t, n, sessionID, next["id"].(string), -1, nil)
	ti = getTurn(t, n, sessionID, next["id"].(string))
	if ti.Status != "paused" || len(ti.RequiredActions) != 1 || ti.RequiredActions[0].Kind != "reconcile" || ti.RequiredActions[0].Tool != "shell" {
		t.Fatalf("the next turn: %+v", ti)
	}
	if data, _ := os.ReadFile(ran); string(data) != "ran\n" {
		t.Fatalf("the command ran again: %q", data)
	}
	_, last := startTurn(t, n, sessionID, map[string]any{"responses": []any{map[string]any{"action_id": ti.RequiredActions[0].ID, "approve": false}}})
	follow(t, n, sessionID, last["id"].(string), -1, nil)
	if ti := getTurn(t, n, sessionID, last["id"].(string)); ti.Status != "completed" {
		t.Fatalf("after the reconcile answer: %+v", ti)
	}
	if data, _ := os.ReadFile(ran); string(data) != "ran\n" {
		t.Fatalf("a denied reconcile ran the command again: %q", data)
	}
}

// A stream with nothing to say sends a comment now and then, so proxies
// and clients keep it open.
func TestAQuietStreamSendsHeartbeats(t *testing.T) {
	n := startNode(t, t.TempDir())
	n.apiSrv.SetHeartbeat(20 * time.Millisecond)
	agent := heldBy(t, n, withTools(t, n))
	gate := gatedModels(n)
	defer gate.release()
	sessionID := newSession(t, n, agent)
	_, turn := startTurn(t, n, sessionID, map[string]any{"text": "hi"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", n.info.API+"/v1/sessions/"+sessionID+"/turns/"+turn["id"].(string)+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+n.info.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var comments []string
	frames := sse.NewReader(resp.Body, api.MaxFrame)
	frames.Comment = func(text string) {
		comments = append(comments, text)
		cancel() // one is enough: the next read ends the stream
	}
	for {
		if _, err := frames.Next(); err != nil {
			break
		}
	}
	if len(comments) == 0 || comments[0] != "heartbeat" {
		t.Fatalf("comments %q before the stream ended or 30 s passed, want a heartbeat", comments)
	}
}

// shellRunsUnasked is an agent whose shell runs without asking, with env
// as its environment (environment/spec.json).
func shellRunsUnasked(t *testing.T, n *Node, env capsule.EnvSpec) func(dir string) {
	return func(dir string) {
		a := capsule.DefaultAgent("mover")
		a.Tools = tool.Defaults()
		no := false
		for i := range a.Tools {
			if a.Tools[i].Name == "shell" {
				a.Tools[i].Approval = &no
			}
		}
		b, _ := a.Encode()
		acceptEdit(t, n, dir, capsule.AgentFile, string(b))
		b, _ = env.Encode()
		acceptEdit(t, n, dir, capsule.EnvironmentFile, string(b))
	}
}

// toolResultOf runs a turn of text in a new session and returns the text
// and is_error of its first tool_result.
func toolResultOf(t *testing.T, n *Node, agent, text string) (string, bool) {
	t.Helper()
	sessionID := newSession(t, n, agent)
	_, turn := startTurn(t, n, sessionID, map[string]any{"text": text})
	for _, it := range follow(t, n, sessionID, turn["id"].(string), -1, nil) {
		if it.event != "tool_result" {
			continue
		}
		var e struct {
			Body struct {
				Content []struct{ Text string } `json:"content"`
				IsError bool                    `json:"is_error"`
			} `json:"body"`
		}
		if err := json.Unmarshal([]byte(it.data), &e); err != nil || len(e.Body.Content) == 0 {
			t.Fatalf("tool_result %q: %v", it.data, err)
		}
		return e.Body.Content[0].Text, e.Body.IsError
	}
	t.Fatalf("the turn %q has no tool_result", text)
	return "", false
}

// A shell command gets the variables the agent's environment declares,
// its secrets from this node's store, and nothing of the node's own
// environment; where Landlock confines it, the node's home (its key, its
// API token) is out of its reach. A declared secret this node cannot
// resolve runs nothing and says how to set it.
func TestAShellCallGetsTheAgentsDeclaredEnvironmentAndNotTheNodesHome(t *testing.T) {
	t.Setenv("TERN_SECRETS_PASSWORD", "node-password")
	home := t.TempDir()
	n := tcp.startWith(t, home, Config{SyncInterval: 100 * time.Millisecond, Secrets: mapSecrets{"GITHUB_TOKEN": "ghp-declared"}})
	env := capsule.DefaultEnvSpec()
	env.Env["GREETING"] = "hello"
	env.Secrets = []string{"GITHUB_TOKEN"}
	agent := heldBy(t, n, shellRunsUnasked(t, n, env))
	ws := filepath.Join(home, WorkspacesDir, agent)

	out, isErr := toolResultOf(t, n, agent, `!call shell {"command": "echo \"$GREETING $GITHUB_TOKEN $HOME\"; env"}`)
	if isErr || !strings.HasPrefix(out, "hello ghp-declared "+ws+"\n") || strings.Contains(out, "node-password") {
		t.Fatalf("the command's environment: %q", out)
	}
	key, err := os.ReadFile(filepath.Join(home, "node.key"))
	if err != nil || len(key) == 0 {
		t.Fatalf("node.key: %v", err)
	}
	out, isErr = toolResultOf(t, n, agent, `!call shell {"command": "od -An -tx1 `+filepath.Join(home, "node.key")+`"}`)
	hex := strings.NewReplacer(" ", "", "\n", "").Replace(out)
	switch confined := strings.HasPrefix(tool.Confinement(), "confined"); {
	case confined && (!isErr || strings.Contains(hex, fmt.Sprintf("%x", key[:8]))):
		t.Fatalf("a confined command read the node's key: %q", out)
	case !confined:
		t.Logf("shell commands run unconfined here (%s), so the node's key is not hidden: %q", tool.Confinement(), out)
	}

	other := heldBy(t, n, shellRunsUnasked(t, n, capsule.EnvSpec{Workdir: "workspace", Packages: []string{}, Env: map[string]string{}, Secrets: []string{"MISSING_TOKEN"}}))
	out, isErr = toolResultOf(t, n, other, `!call shell {"command": "touch ran"}`)
	if !isErr || !strings.Contains(out, "needs the secret MISSING_TOKEN") || !strings.Contains(out, "tern secret set MISSING_TOKEN") {
		t.Fatalf("a secret that does not resolve: %q", out)
	}
	if _, err := os.Stat(filepath.Join(home, WorkspacesDir, other, "ran")); err == nil {
		t.Fatal("the command ran without its declared secret")
	}
}

// The sessions list puts the session with the newest event first and
// shows the first words of each one's first message.
func TestSessionsAreListedNewestFirstWithTheirFirstWords(t *testing.T) {
	n := startNode(t, t.TempDir())
	agent := heldBy(t, n, nil)
	first, second := newSession(t, n, agent), newSession(t, n, agent)
	for _, s := range []struct{ id, text string }{{second, "the second session's question"}, {first, "the first session's question, asked last, and long enough to be cut short somewhere"}} {
		code, turn := startTurn(t, n, s.id, map[string]any{"text": s.text})
		if code != 201 {
			t.Fatalf("turn: %d %v", code, turn)
		}
		follow(t, n, s.id, turn["id"].(string), -1, nil)
	}
	var list []struct{ ID, Preview string }
	callAPI(t, n, "GET", "/v1/agents/"+agent+"/sessions", nil, &list)
	if len(list) != 2 || list[0].ID != first || list[1].Preview != "the second session's question" ||
		!strings.HasSuffix(list[0].Preview, "…") || len([]rune(list[0].Preview)) != 60 {
		t.Fatalf("sessions %+v: want %s first, each with its first words", list, first)
	}
}
