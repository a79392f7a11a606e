package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
	"github.com/tern-dev/tern/tool"
)

// importAgent makes a capsule with tern capsule new (the built-in tools
// with their defaults), lets edit change its agent.json, and imports it
// into the node of home, returning the agent id once the node runs it.
func importAgent(t *testing.T, home string, edit func(agent map[string]any)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	id := strings.TrimSpace(mustTern(t, home, "", "capsule", "new", dir, "--name", "helper"))
	if edit != nil {
		p := filepath.Join(dir, "agent.json")
		b, _ := os.ReadFile(p)
		var a map[string]any
		json.Unmarshal(b, &a)
		edit(a)
		b, _ = json.MarshalIndent(a, "", "  ")
		os.WriteFile(p, append(b, '\n'), 0o644)
		mustTern(t, home, "", "capsule", "accept", dir)
	}
	mustTern(t, home, "", "capsule", "import", dir)
	eventually(t, 20*time.Second, func() error {
		if out := mustTern(t, home, "", "holder", id); !strings.Contains(out, "active") {
			return fmt.Errorf("the node does not run the agent: %s", out)
		}
		return nil
	})
	return id
}

func pendingIDs(t *testing.T, home string) []string {
	t.Helper()
	var pending []api.PendingAction
	if err := json.Unmarshal([]byte(mustTern(t, home, "", "actions", "--json")), &pending); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range pending {
		ids = append(ids, a.ID)
	}
	return ids
}

func TestATurnThroughTheCLIStreamsPausesAndIsAnswered(t *testing.T) {
	home := t.TempDir()
	runNode(t, home)
	id := importAgent(t, home, func(a map[string]any) {
		a["tools"] = append(a["tools"].([]any), map[string]any{"name": "lookup", "description": "Looks a word up; the client runs it.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}})
	})

	code, out, errs := tern(t, home, "", "turn", id, "hello")
	if code != 0 || out != "OK. You said: \"hello\"\n" || !strings.HasPrefix(errs, "session ses_") {
		t.Fatalf("turn: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// Two calls: one needs approval, one is the client's; the turn pauses
	// with both, and is continued only by answering both.
	code, _, errs = tern(t, home, "", "turn", id, "!call write_file {\"path\": \"notes.md\", \"content\": \"hi\"}\n!call lookup {\"q\": \"tern\"}")
	if code != 0 || !strings.Contains(errs, "paused: it waits for 2 actions") {
		t.Fatalf("a pausing turn: exit %d, stderr %q", code, errs)
	}
	ids := pendingIDs(t, home)
	if len(ids) != 2 {
		t.Fatalf("pending %v", ids)
	}
	var approval, output string
	for _, a := range ids {
		if strings.HasPrefix(a, "act_approval_") {
			approval = a
		} else {
			output = a
		}
	}
	if code, _, errs := tern(t, home, "", "approve", approval); code != 2 || !strings.Contains(errs, "the answers are incomplete") || !strings.Contains(errs, output) {
		t.Fatalf("a partial answer: exit %d, stderr %q; want exit 2 naming the action left out", code, errs)
	}
	if code, _, errs := tern(t, home, "", "respond", output, "--output", "not json"); code != 2 || !strings.Contains(errs, "is not JSON") {
		t.Fatalf("respond with bad JSON: exit %d %q", code, errs)
	}
	code, out, errs = tern(t, home, "", "turn", id, "never sent", "--session", "ses_nope")
	if code != 2 || !strings.Contains(errs, "ses_nope") {
		t.Fatalf("an unknown session: exit %d %q %q", code, out, errs)
	}
	code, _, errs = tern(t, home, "", "approve", approval, "--deny", "act_approval_nope")
	if code != 2 || !strings.Contains(errs, "no turn waits for action act_approval_nope") {
		t.Fatalf("an unknown action: exit %d %q", code, errs)
	}
	if got := pendingIDs(t, home); len(got) != 2 {
		t.Fatalf("refused answers changed the pending set: %v", got)
	}
	code, out, errs = tern(t, home, "", "respond", output, "--output", `{"meaning": 42}`, "--approve", approval)
	if code != 0 || !strings.Contains(out, "write_file returned created notes.md") || !strings.Contains(out, `lookup returned {"meaning":42}`) {
		t.Fatalf("the complete answer: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if len(pendingIDs(t, home)) != 0 {
		t.Fatal("actions still pending")
	}

	// Two client calls are answered in one respond, in order; a client
	// call nobody can run is declined with deny.
	code, _, errs = tern(t, home, "", "turn", id, "!call lookup {\"q\": \"a\"}\n!call lookup {\"q\": \"b\"}")
	two := pendingIDs(t, home)
	if code != 0 || len(two) != 2 {
		t.Fatalf("two client calls: exit %d %q, pending %v", code, errs, two)
	}
	if code, _, errs := tern(t, home, "", "respond", two[0], two[1], "--output", `"A"`); code != 2 || !strings.Contains(errs, "one --output per action") {
		t.Fatalf("respond with too few outputs: exit %d %q", code, errs)
	}
	code, out, errs = tern(t, home, "", "respond", two[0], two[1], "--output", `"A"`, "--output", `"B"`)
	if code != 0 || !strings.Contains(out, `lookup returned "A"; lookup returned "B"`) {
		t.Fatalf("respond to two: exit %d %q %q", code, out, errs)
	}
	tern(t, home, "", "turn", id, "!call lookup {\"q\": \"c\"}")
	code, out, errs = tern(t, home, "", "deny", pendingIDs(t, home)[0])
	if code != 0 || !strings.Contains(out, "The client declined to run this call") {
		t.Fatalf("deny a client call: exit %d %q %q", code, out, errs)
	}
	var status api.Status
	json.Unmarshal([]byte(mustTern(t, home, "", "status", "--json")), &status)
	ws := filepath.Join(home, node.WorkspacesDir, id, "notes.md")
	if b, err := os.ReadFile(ws); err != nil || string(b) != "hi" {
		t.Fatalf("the approved write: %q %v", b, err)
	}
}

// A kill -9 of the node between the intent and the outcome of an
// at-most-once http_request ends in a reconcile action after the restart,
// never a second call; answering it finishes the turn, still with one call.
func TestAKillBetweenIntentAndOutcomeEndsInAReconcileActionNotASecondCall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills a daemon")
	}
	var mu sync.Mutex
	calls := 0
	keys := map[string]bool{}
	arrived := make(chan struct{}, 10)
	release := make(chan struct{})
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		calls++
		keys[r.Header.Get("Idempotency-Key")] = true
		mu.Unlock()
		arrived <- struct{}{}
		<-release // the payment takes its time; the node dies meanwhile
		fmt.Fprintln(w, `{"paid": true}`)
	}))
	defer svc.Close()
	defer close(release)

	d := &daemon{t: t, home: t.TempDir(), port: freePort(t)}
	d.start()
	defer d.kill()
	id := importAgent(t, d.home, nil)
	code, _, errs := ternQuiet(d.home, "turn", id, fmt.Sprintf("!call http_request {\"method\": \"POST\", \"url\": %q, \"body\": \"pay 10\"}", svc.URL))
	if code != 0 || !strings.Contains(errs, "paused") {
		t.Fatalf("turn: exit %d %q", code, errs)
	}
	ids := pendingIDs(t, d.home)
	if len(ids) != 1 {
		t.Fatalf("pending %v", ids)
	}
	approve := ternProcess(d.home, "", "approve", ids[0])
	var approveOut strings.Builder
	approve.Stderr = &approveOut
	approve.Start()
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the approved call never reached the service")
	}
	d.kill() // between the intent and the outcome
	d.start()
	// tern approve, following the continuing turn, finds the restarted
	// node (node.json again) and sees the turn pause to reconcile.
	if err := approve.Wait(); err != nil || !strings.Contains(approveOut.String(), "act_reconcile_") {
		t.Fatalf("tern approve across the restart: %v, stderr %q; want it to follow the turn to its reconcile action", err, approveOut.String())
	}

	var pending []api.PendingAction
	eventually(t, 20*time.Second, func() error {
		json.Unmarshal([]byte(mustTern(t, d.home, "", "actions", "--json")), &pending)
		if len(pending) == 1 && pending[0].Kind == "reconcile" {
			return nil
		}
		return fmt.Errorf("no reconcile action after the restart: %+v", pending)
	})
	if pending[0].Tool != "http_request" || pending[0].Operation == "" {
		t.Fatalf("reconcile action %+v", pending[0])
	}
	code, out, errs := ternQuiet(d.home, "approve", pending[0].ID) // yes, the payment went through
	if code != 0 || !strings.Contains(out, "took effect") {
		t.Fatalf("answering the reconcile action: exit %d %q %q", code, out, errs)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 || len(keys) != 1 || keys[""] {
		t.Fatalf("the service got %d calls with idempotency keys %v; want exactly one, with a key", calls, keys)
	}
}

// agent.json of an agent the node holds is edited in the node's copy and
// accepted through the node; until then the node runs no turn with it.
func TestTheNodeRunsTurnsOnlyWithAcceptedEdits(t *testing.T) {
	home := t.TempDir()
	runNode(t, home)
	id := importAgent(t, home, nil)
	p := filepath.Join(home, store.CapsulesDir, id, "agent.json")
	b, _ := os.ReadFile(p)
	var a map[string]any
	json.Unmarshal(b, &a)
	for _, tl := range a["tools"].([]any) {
		if m := tl.(map[string]any); m["name"] == "shell" {
			m["approval"] = false
		}
	}
	b, _ = json.MarshalIndent(a, "", "  ")
	os.WriteFile(p, append(b, '\n'), 0o644)

	code, _, errs := tern(t, home, "", "turn", id, `!call shell {"command": "echo unapproved > pwned.txt"}`)
	if code != 2 || !strings.Contains(errs, "edited by hand and not accepted") || !strings.Contains(errs, "tern capsule accept "+id) {
		t.Fatalf("a turn with an unaccepted edit: exit %d %q", code, errs)
	}
	// The refused turn left nothing behind, not even an empty session.
	if out := mustTern(t, home, "", "session", "list", id, "--json"); strings.Contains(out, "ses_") {
		t.Fatalf("a refused turn left a session: %s", out)
	}
	if out := mustTern(t, home, "", "capsule", "accept", id); !strings.Contains(out, "accepted agent.json (through the node)") {
		t.Fatalf("accept through the node: %q", out)
	}
	if out := mustTern(t, home, "", "capsule", "accept", filepath.Join(home, store.CapsulesDir, id)); !strings.Contains(out, "nothing to accept") {
		t.Fatalf("accept of the node's folder: %q", out)
	}
	code, out, errs := tern(t, home, "", "turn", id, `!call shell {"command": "echo approved by agent.json"}`)
	if code != 0 || !strings.Contains(out, "approved by agent.json") {
		t.Fatalf("a turn after the accept: exit %d %q %q", code, out, errs)
	}
	// A bad edit is refused, naming the problem, and changes nothing.
	os.WriteFile(p, []byte(`{"name": 5}`), 0o644)
	if code, _, errs := tern(t, home, "", "capsule", "accept", id); code != 2 || !strings.Contains(errs, `"name" must be a string`) {
		t.Fatalf("a bad edit: exit %d %q", code, errs)
	}
}

// A snapshot by agent id goes through the node, which records it and
// refreshes the agent's working folder: the next tool call sees the new
// files, not what the last one left.
func TestASnapshotByAgentIDGoesThroughTheNodeAndTheToolsGoOnFromIt(t *testing.T) {
	home := t.TempDir()
	runNode(t, home)
	id := importAgent(t, home, func(a map[string]any) {
		for _, tl := range a["tools"].([]any) {
			if m := tl.(map[string]any); m["name"] == "shell" {
				m["approval"] = false
			}
		}
	})
	mustTern(t, home, "", "turn", id, `!call shell {"command": "echo from a tool > a.txt"}`)

	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "b.txt"), []byte("from the person\n"), 0o644)
	os.MkdirAll(filepath.Join(project, "node_modules", "x"), 0o755)
	os.WriteFile(filepath.Join(project, "node_modules", "x", "index.js"), []byte("//"), 0o644)
	code, out, errs := tern(t, home, "", "capsule", "snapshot", id, project, "--exclude", "node_modules/")
	if code != 0 || !strings.Contains(out, "1 file,") || !strings.Contains(out, "(through the node)") || !strings.Contains(errs, "left out node_modules/") {
		t.Fatalf("snapshot by agent id: exit %d, %q, %q", code, out, errs)
	}
	code, out, errs = tern(t, home, "", "turn", id, `!call shell {"command": "ls; cat b.txt"}`)
	if code != 0 || !strings.Contains(out, "from the person") || strings.Contains(out, "a.txt") {
		t.Fatalf("the tool after the snapshot: exit %d, %q, %q", code, out, errs)
	}

	// The node's own folder of the agent goes through the node too, and a
	// folder that is not there is refused, naming it, with exit 2.
	held := filepath.Join(home, store.CapsulesDir, id)
	if out := mustTern(t, home, "", "capsule", "snapshot", held, project, "--exclude", "node_modules/"); !strings.Contains(out, "(through the node)") {
		t.Fatalf("snapshot of the node's folder: %q", out)
	}
	missing := filepath.Join(project, "nowhere")
	if code, _, errs := tern(t, home, "", "capsule", "snapshot", id, missing); code != 2 || !strings.Contains(errs, missing+" does not exist") {
		t.Fatalf("snapshot of a missing folder: exit %d, %q", code, errs)
	}
	ws := filepath.Join(t.TempDir(), "ws")
	mustTern(t, home, "", "capsule", "materialize", id, ws)
	if b, err := os.ReadFile(filepath.Join(ws, "b.txt")); err != nil || string(b) != "from the person\n" {
		t.Fatalf("the materialized snapshot: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "node_modules")); err == nil {
		t.Fatal("the excluded folder was stored")
	}
}

// An approved shell command of a node running as its own process, with
// the password of its secrets in its environment, prints its environment,
// the node's (/proc/PID/environ), node.key and node.json: none of the
// password, the key or the API token reaches the journal. Without
// Landlock only the command's own environment is kept clean (tern mcp
// list says the command is unconfined), so only that is checked there.
func TestAnApprovedShellSeesNeitherTheNodesSecretsPasswordNorItsKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a daemon")
	}
	const password = "tern-test-secrets-password"
	t.Setenv("TERN_SECRETS_PASSWORD", password)
	d := &daemon{t: t, home: t.TempDir(), port: freePort(t)}
	d.start()
	defer d.kill()
	id := importAgent(t, d.home, nil) // shell needs approval
	key, err := os.ReadFile(filepath.Join(d.home, node.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	var info node.Info
	if b, err := os.ReadFile(filepath.Join(d.home, node.InfoFile)); err != nil || json.Unmarshal(b, &info) != nil || info.Token == "" {
		t.Fatalf("node.json: %s %v", b, err)
	}

	command := fmt.Sprintf("env; echo END-OF-ENV; tr '\\0' '\\n' < /proc/%d/environ; od -An -tx1 %s; cat %s",
		d.cmd.Process.Pid, filepath.Join(d.home, node.KeyFile), filepath.Join(d.home, node.InfoFile))
	code, _, errs := tern(t, d.home, "", "turn", id, fmt.Sprintf("!call shell {\"command\": %q}", command))
	ids := pendingIDs(t, d.home)
	if code != 0 || !strings.Contains(errs, "paused") || len(ids) != 1 {
		t.Fatalf("turn: exit %d %q, pending %v", code, errs, ids)
	}
	mustTern(t, d.home, "", "approve", ids[0])
	out := toolOutputs(t, mustTern(t, d.home, "", "journal", "log", id, "--json"))
	own, _, ok := strings.Cut(out, "END-OF-ENV\n")
	if !ok || !strings.Contains(own, "TERN_OPERATION_ID=op_") {
		t.Fatalf("the command's output is not in the journal: %q", out)
	}
	if strings.Contains(own, password) {
		t.Fatalf("the command's own environment holds the node's secrets password: %q", own)
	}
	if c := tool.Confinement(); !strings.HasPrefix(c, "confined") {
		t.Skipf("shell commands run unconfined here (%s): the node's key and its /proc/PID/environ are not hidden from them", c)
	}
	flat := strings.NewReplacer(" ", "", "\n", "").Replace(out) // od's hex, joined
	for what, secret := range map[string]string{
		"the node's secrets password": password,
		"the node's key":              hex.EncodeToString(key),
		"the node's API token":        info.Token,
	} {
		if strings.Contains(out, secret) || strings.Contains(flat, secret) {
			t.Errorf("an approved shell command printed %s into the journal: %q", what, out)
		}
	}
}

// toolOutputs is the text of every tool_result of a journal log --json,
// one after the other.
func toolOutputs(t *testing.T, log string) string {
	t.Helper()
	var out strings.Builder
	for line := range strings.Lines(log) {
		var e struct {
			Type string `json:"type"`
			Body struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"body"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("journal log line %q: %v", line, err)
		}
		if e.Type == "tool_result" {
			for _, c := range e.Body.Content {
				out.WriteString(c.Text)
			}
		}
	}
	return out.String()
}

// tern turn follow streams a turn again by its id alone; tern turn cancel
// cancels one by its id (one that ended stays as it ended); Ctrl-C during
// tern turn stops following, not the turn, and says both commands.
func TestATurnIsFollowedAndCancelledByItsID(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	asked := make(chan struct{}) // closed when the turn asks the model
	askedOnce := sync.OnceFunc(func() { close(asked) })
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		askedOnce()
		select { // the model thinks until the test lets it answer
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"slow answer\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer slow.Close()
	defer once.Do(func() { close(release) })
	home := t.TempDir()
	runNode(t, home)
	id := importAgent(t, home, func(a map[string]any) {
		a["provider"], a["model"], a["base_url"] = "openai-chat", "m", slow.URL+"/v1"
	})

	cmd := ternProcess(home, "", "turn", id, "hello")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The turn runs (the model thinks): Ctrl-C.
	line, _ := bufio.NewReader(stderr).ReadString('\n')
	if !strings.HasPrefix(line, "session ") {
		t.Fatalf("tern turn said %q first", line)
	}
	select {
	case <-asked:
	case <-time.After(20 * time.Second):
		t.Fatal("the turn never asked the model")
	}
	var ss []struct {
		LastTurn string `json:"last_turn"`
	}
	json.Unmarshal([]byte(mustTern(t, home, "", "session", "list", id, "--json")), &ss)
	if len(ss) != 1 || ss[0].LastTurn == "" {
		t.Fatalf("sessions while the turn asks the model: %+v, want one with its turn", ss)
	}
	turnID := ss[0].LastTurn
	cmd.Process.Signal(os.Interrupt)
	rest, _ := io.ReadAll(stderr)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(string(rest), "tern turn follow "+turnID) || !strings.Contains(string(rest), "tern turn cancel "+turnID) {
		t.Fatalf("Ctrl-C during tern turn: %v\n%s", err, rest)
	}

	// The turn went on: it ends once the model answers, and follow shows it.
	once.Do(func() { close(release) })
	if out := mustTern(t, home, "", "turn", "follow", turnID); !strings.Contains(out, "slow answer") {
		t.Fatalf("turn follow: %q", out)
	}
	if out := mustTern(t, home, "", "turn", "follow", turnID, "--after", "1000"); strings.Contains(out, "slow answer") {
		t.Fatalf("turn follow --after past the end: %q", out)
	}
	if code, _, errs := tern(t, home, "", "turn", "cancel", turnID); code != 0 || !strings.Contains(errs, "had ended already: completed") {
		t.Fatalf("cancel of a completed turn: exit %d %q", code, errs)
	}
	if code, _, errs := tern(t, home, "", "turn", "follow", "turn_nope"); code != exitBadInput || !strings.Contains(errs, "no turn turn_nope") {
		t.Fatalf("follow of an unknown turn: exit %d %q", code, errs)
	}
}
