package main

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/internal/linelog"
	"github.com/tern-dev/tern/internal/secrets"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/tool"
	"github.com/tern-dev/tern/tool/mcptest"
)

// An agent's MCP servers, one over stdio (this test binary serving the
// test server) and one over streamable HTTP: tern mcp list shows their
// tools with effect classes, and a turn calls them: a pure tool at once,
// an at-most-once one after its approval.
func TestATurnCallsTheToolsOfTheAgentsMCPServers(t *testing.T) {
	web := httptest.NewServer(mcptest.Handler())
	t.Cleanup(web.Close) // after the node's stop, which ends its listening stream
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	runNode(t, home)
	id := importAgent(t, home, func(a map[string]any) {
		a["mcp_servers"] = map[string]any{
			"local": map[string]any{"command": exe, "env": map[string]string{mcptest.EnvStdio: "1"}},
			"web":   map[string]any{"url": web.URL},
		}
		// agent.json may override what a server's annotations say.
		a["tools"] = append(a["tools"].([]any), map[string]any{"name": "mcp__local__add", "effect": "at-most-once"},
			map[string]any{"name": "mcp__web__add", "approval": false}) // idempotent asks by default
	})

	var states []tool.MCPServerState
	if err := json.Unmarshal([]byte(mustTern(t, home, "", "mcp", "list", id, "--json")), &states); err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 || states[0].State != "connected" || states[1].State != "connected" {
		t.Fatalf("mcp list: %+v", states)
	}
	effects := map[string]string{}
	for _, tl := range states[0].Tools {
		effects[tl.Name] = tl.Effect
	}
	if effects["mcp__local__echo"] != "pure" || effects["mcp__local__add"] != "at-most-once" || effects["mcp__local__record_call"] != "at-most-once" {
		t.Fatalf("effects %v", effects)
	}

	code, out, errs := tern(t, home, "", "turn", id, `!call mcp__local__echo {"text": "over stdio"}`)
	if code != 0 || !strings.Contains(out, "echo: over stdio") {
		t.Fatalf("a pure MCP tool: exit %d, %q, %q", code, out, errs)
	}
	code, out, errs = tern(t, home, "", "turn", id, `!call mcp__web__add {"a": 2, "b": 3}`)
	if code != 0 || !strings.Contains(out, `"sum":5`) {
		t.Fatalf("an MCP tool over HTTP: exit %d, %q, %q", code, out, errs)
	}
	// An image comes back as a blob of the capsule, named by the result.
	if out := mustTern(t, home, "", "turn", id, `!call mcp__web__picture {}`); !strings.Contains(out, "Done: mcp__web__picture returned a picture:") || !strings.Contains(out, "I also got 1 image(s)") {
		t.Fatalf("the picture's turn: %q", out)
	}
	log := mustTern(t, home, "", "journal", "log", id, "--json")
	if !strings.Contains(log, `{"cid":"bafk`) || !strings.Contains(log, `"media_type":"image/png","type":"image"}`) || strings.Contains(log, "not available") {
		t.Fatalf("the picture's result: %s", log)
	}
	exported := filepath.Join(t.TempDir(), "a.tar")
	mustTern(t, home, "", "capsule", "export", id, "-o", exported)
	if code, out, errs := tern(t, home, "", "capsule", "verify", exported); code != 0 {
		t.Fatalf("verify: %q %q", out, errs)
	}

	code, _, errs = tern(t, home, "", "turn", id, `!call mcp__local__record_call {}`)
	if code != 0 || !strings.Contains(errs, "paused") {
		t.Fatalf("an at-most-once MCP tool: exit %d, %q", code, errs)
	}
	ids := pendingIDs(t, home)
	if len(ids) != 1 {
		t.Fatalf("pending %v", ids)
	}
	if out := mustTern(t, home, "", "approve", ids[0]); !strings.Contains(out, "recorded 1") {
		t.Fatalf("after the approval: %q", out)
	}
}

// A tool that writes, which its server marks idempotent (as the reference
// filesystem server marks write_file), pauses its turn for approval as
// the built-in write_file does: the file is written only once a person
// approves. Idempotent says a second call is harmless, not the first.
func TestAnIdempotentMCPToolThatWritesWaitsForApproval(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	runNode(t, home)
	id := importAgent(t, home, func(a map[string]any) {
		a["mcp_servers"] = map[string]any{"files": map[string]any{"command": exe, "env": map[string]string{mcptest.EnvStdio: "1"}}}
	})
	target := filepath.Join(home, node.WorkspacesDir, id, "notes.md")

	code, out, errs := tern(t, home, "", "turn", id, `!call mcp__files__write_file {"path": "notes.md", "content": "written"}`)
	ids := pendingIDs(t, home)
	if code != 0 || !strings.Contains(errs, "paused") || len(ids) != 1 || !strings.HasPrefix(ids[0], "act_approval_") {
		t.Fatalf("an idempotent MCP tool that writes: exit %d, %q, %q, pending %v", code, out, errs, ids)
	}
	// The turn paused before the call, so it has not run: nothing to wait for.
	if b, err := os.ReadFile(target); err == nil {
		t.Fatalf("the file was written before any approval: %q", b)
	}
	if out := mustTern(t, home, "", "approve", ids[0]); !strings.Contains(out, "wrote notes.md") {
		t.Fatalf("after the approval: %q", out)
	}
	if b, _ := os.ReadFile(target); string(b) != "written" {
		t.Fatalf("the approved call: %q", b)
	}
}

// A folder's agent.json with a server whose command is not here: mcp list
// says so, and the others still list.
func TestMCPListOfAFolderSaysWhatCannotBeReached(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	p := dir + "/agent.json"
	b, _ := os.ReadFile(p)
	var a map[string]any
	json.Unmarshal(b, &a)
	a["mcp_servers"] = map[string]any{"gone": map[string]any{"command": "tern-no-such-mcp-server"}}
	b, _ = json.MarshalIndent(a, "", "  ")
	os.WriteFile(p, append(b, '\n'), 0o644)
	mustTern(t, home, "", "capsule", "accept", dir)
	out := mustTern(t, home, "", "mcp", "list", dir)
	if !strings.Contains(out, "gone (stdio): unavailable") || !strings.Contains(out, "is not on this machine's PATH") ||
		!strings.HasSuffix(out, "shell commands here: "+tool.Confinement()+"\n") {
		t.Fatalf("mcp list: %q", out)
	}
	// A token written into agent.json is refused at accept.
	a["mcp_servers"] = map[string]any{"gh": map[string]any{"url": "https://api.example.com/mcp", "headers": map[string]string{"Authorization": "Bearer ghp_AbCdEf0123456789XyZaBcDeF0123"}}}
	b, _ = json.MarshalIndent(a, "", "  ")
	os.WriteFile(p, append(b, '\n'), 0o644)
	if code, _, errs := tern(t, home, "", "capsule", "accept", dir); code != exitBadInput || !strings.Contains(errs, "looks like a key or token") {
		t.Fatalf("a token in agent.json: exit %d, %q", code, errs)
	}
}

// An agent's MCP server behind OAuth: the turn pauses with an mcp_auth
// action carrying the URL and scopes; the person opens it and answers with
// the address the browser came back to; the continuing turn goes on with
// the server's tools. No code or token is in the home folder (the keyring
// there is sealed), the capsule, the logs or an API answer.
func TestAnMCPServerBehindOAuthPausesTheTurnUntilItIsAuthorized(t *testing.T) {
	o := mcptest.NewOAuthServer()
	t.Cleanup(o.Close)
	home := secretHome(t)
	logs := &linelog.Log{}
	n, store := runNodeWithSecrets(t, home, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	id := importAgent(t, home, func(a map[string]any) {
		a["mcp_servers"] = map[string]any{"web": map[string]any{"url": o.URL + "/mcp"}}
	})

	var answers []string // every API answer and output, for the grep
	code, out, errs := tern(t, home, "", "turn", id, "hello")
	answers = append(answers, out, errs)
	if code != 0 || !strings.Contains(errs, "paused") || !strings.Contains(errs, "mcp_auth web: open "+o.URL+"/authorize?") {
		t.Fatalf("the turn: exit %d, %q, %q", code, out, errs)
	}
	out = mustTern(t, home, "", "actions", "--json")
	answers = append(answers, out)
	var pending []api.PendingAction
	json.Unmarshal([]byte(out), &pending)
	if len(pending) != 1 || pending[0].Kind != "mcp_auth" || pending[0].Server != "web" || strings.Join(slices.Sorted(slices.Values(pending[0].Scopes)), " ") != "offline_access tools:call tools:read" {
		t.Fatalf("pending %+v", pending)
	}
	back, err := mcptest.Consent(pending[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(back, n.Info().API+"/v1/mcp/callback?") {
		t.Fatalf("the browser is sent back to %s, not to the node", back)
	}
	code, out, errs = tern(t, home, "", "respond", pending[0].ID, "--authorization", "http://127.0.0.1:9/elsewhere?code=forged&state=wrong")
	if code == 0 || !strings.Contains(errs, "state differs") {
		t.Fatalf("an answer to another authorization: exit %d, %q", code, errs)
	}
	out = mustTern(t, home, "", "respond", pending[0].ID, "--authorization", back)
	answers = append(answers, out)
	out = mustTern(t, home, "", "turn", id, `!call mcp__web__echo {"text": "authorized"}`)
	answers = append(answers, out)
	if !strings.Contains(out, "echo: authorized") {
		t.Fatalf("a call after the authorization: %q", out)
	}
	out = mustTern(t, home, "", "mcp", "list", id, "--json")
	answers = append(answers, out, mustTern(t, home, "", "journal", "log", id, "--json"))
	var states []tool.MCPServerState
	if json.Unmarshal([]byte(out), &states); len(states) != 1 || states[0].State != tool.MCPConnected {
		t.Fatalf("mcp list: %s", out)
	}
	n.Close()

	secretsIn := append(o.Tokens(), codeOf(t, back))
	for _, s := range secretsIn {
		for i, a := range append(answers, logs.String()) {
			if strings.Contains(a, s) {
				t.Fatalf("answer %d shows %s: %q", i, s, a)
			}
		}
	}
	filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, s := range secretsIn {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds %s", p, s)
			}
		}
		return nil
	})
	if v, err := store.Get(tool.MCPTokenSecret("web")); err != nil || !strings.Contains(v, o.Tokens()[0]) {
		t.Fatalf("the keyring: %v", err)
	}
}

// When the browser runs on the node's machine it follows the redirect to
// the node's callback, which finishes the authorization and continues the
// turn: nothing to paste.
func TestTheNodesCallbackFinishesAnMCPAuthorization(t *testing.T) {
	o := mcptest.NewOAuthServer()
	t.Cleanup(o.Close)
	home := secretHome(t)
	runNodeWithSecrets(t, home, nil)
	id := importAgent(t, home, func(a map[string]any) {
		a["mcp_servers"] = map[string]any{"web": map[string]any{"url": o.URL + "/mcp"}}
	})
	tern(t, home, "", "turn", id, "hello")
	pending := pendingIDs(t, home)
	if len(pending) != 1 {
		t.Fatalf("pending %v", pending)
	}
	var acts []api.PendingAction
	json.Unmarshal([]byte(mustTern(t, home, "", "actions", "--json")), &acts)
	resp, err := http.Get(acts[0].URL) // the browser, following the redirect
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "web is authorized; turn turn_") {
		t.Fatalf("the callback page: %d %s", resp.StatusCode, page)
	}
	if left := pendingIDs(t, home); len(left) != 0 {
		t.Fatalf("still pending: %v", left)
	}
	// The same address again finds nothing waiting.
	resp, err = http.Get(acts[0].URL)
	if err == nil {
		page, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a second visit: %v %s", err, page)
	}
}

// codeOf is the authorization code in the address the browser came back to.
func codeOf(t *testing.T, back string) string {
	u, err := url.Parse(back)
	if err != nil || u.Query().Get("code") == "" {
		t.Fatalf("no code in %s", back)
	}
	return u.Query().Get("code")
}

// runNodeWithSecrets runs a node on home (a secretHome) with the home's
// secret store, as tern node does, logging to log.
func runNodeWithSecrets(t *testing.T, home string, log *slog.Logger) (*node.Node, *secrets.Store) {
	t.Helper()
	store, err := secrets.Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Start(home, node.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, SyncInterval: 100 * time.Millisecond, Secrets: store}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, store
}

// A stdio MCP server that takes more than a second to start gets one line
// saying what tern waits for, rather than silence.
func TestAnMCPServerSlowToStartIsWaitedForOutLoud(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	editAgentJSON(t, home, dir, func(a map[string]any) {
		a["mcp_servers"] = map[string]any{"slow": map[string]any{"command": "sh", "args": []string{"-c", "sleep 2"}}}
	})
	code, out, errs := tern(t, home, "", "mcp", "list", dir)
	if code != 0 || !strings.Contains(errs, "waiting for the MCP servers to start") || !strings.Contains(out, "slow (stdio)") {
		t.Fatalf("mcp list of a slow server: exit %d\n%s\n%s", code, out, errs)
	}
}
