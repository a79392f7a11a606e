package tool

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/tool/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.ServeIfAsked()
	os.Exit(m.Run())
}

type mapSecrets map[string]string

func (m mapSecrets) Get(name string) (string, error) {
	if v, ok := m[name]; ok {
		return v, nil
	}
	return "", os.ErrNotExist
}

// stdioServer is this test binary serving the test server over stdio.
func stdioServer(t *testing.T) capsule.MCPServer {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return capsule.MCPServer{Command: exe, Env: map[string]string{mcptest.EnvStdio: "1"}}
}

func toolNamed(t *testing.T, tools []Tool, name string) Tool {
	t.Helper()
	for _, tl := range tools {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return Tool{}
}

func TestMCPToolsOverStdioAndHTTPWithTheirEffectsAndResults(t *testing.T) {
	srv := httptest.NewServer(mcptest.Handler())
	defer srv.Close()
	m := NewMCP(map[string]capsule.MCPServer{
		"local": stdioServer(t),
		"web":   {URL: srv.URL},
	}, MCPEnv{Workspace: t.TempDir()})
	defer m.Close()
	ctx := context.Background()
	tools, states := m.Tools(ctx)
	if len(states) != 2 || states[0].State != "connected" || states[1].State != "connected" {
		t.Fatalf("states %+v", states)
	}
	for _, server := range []string{"local", "web"} {
		effects := map[string]string{"echo": Pure, "add": Idempotent, "record_call": AtMostOnce}
		for name, effect := range effects {
			tl := toolNamed(t, tools, "mcp__"+server+"__"+name)
			if tl.Effect != effect || tl.Approval != (effect != Pure) {
				t.Errorf("%s: effect %s approval %v", tl.Name, tl.Effect, tl.Approval)
			}
		}
		run := func(name, args string) Result {
			res, err := toolNamed(t, tools, "mcp__"+server+"__"+name).Run(ctx, Call{Arguments: json.RawMessage(args)})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return res
		}
		if r := run("echo", `{"text":"hi"}`); r.Output != "echo: hi" || r.IsError {
			t.Errorf("%s echo: %+v", server, r)
		}
		if r := run("add", `{"a":2,"b":3}`); !strings.Contains(r.Output, `"sum":5`) {
			t.Errorf("%s add: %+v", server, r)
		}
		if r := run("fail", `{}`); !r.IsError || !strings.Contains(r.Output, "it failed, as asked") {
			t.Errorf("%s fail: %+v", server, r)
		}
		if r := run("picture", `{}`); r.Output != "a picture:" || len(r.Parts) != 2 || r.Parts[0].Text != "a picture:" || r.Parts[1].Media == nil ||
			r.Parts[1].Media.Kind != "image" || r.Parts[1].Media.MediaType != "image/png" || string(r.Parts[1].Media.Data) != "\x89PNG...." {
			t.Errorf("%s picture: %+v", server, r)
		}
	}

	// tools/list_changed: a tool the server adds is offered next time.
	grow := toolNamed(t, tools, "mcp__local__grow")
	if _, err := grow.Run(ctx, Call{Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// The notification comes on its own.
	waitFor(t, "a tool the server added is offered", func() bool {
		tools, _ = m.Tools(ctx)
		return slices.ContainsFunc(tools, func(tl Tool) bool { return tl.Name == "mcp__local__grown" })
	})
}

func TestAnMCPServerThatCannotBeReachedSaysWhy(t *testing.T) {
	m := NewMCP(map[string]capsule.MCPServer{
		"gone":   {Command: "tern-no-such-mcp-server"},
		"secret": {Command: "sh", Secrets: []string{"GITHUB_TOKEN"}},
	}, MCPEnv{Secrets: mapSecrets{}, Workspace: t.TempDir()})
	defer m.Close()
	tools, states := m.Tools(context.Background())
	if len(tools) != 0 {
		t.Fatalf("tools %v", tools)
	}
	if !strings.Contains(states[0].Error, `its command "tern-no-such-mcp-server" is not on this machine's PATH`) {
		t.Errorf("gone: %+v", states[0])
	}
	if !strings.Contains(states[1].Error, "needs the secret GITHUB_TOKEN") {
		t.Errorf("secret: %+v", states[1])
	}
}

func TestMCPToolNamesAreOnesEveryProviderAccepts(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"gh", "create.issue"}:          "mcp__gh__create_issue",
		{"gh", strings.Repeat("x", 80)}: "mcp__gh__" + strings.Repeat("x", 55),
	} {
		if got := MCPToolName(in[0], in[1]); got != want {
			t.Errorf("%v: %s, want %s", in, got, want)
		}
	}
}

func (m mapSecrets) Set(name, value string) error { m[name] = value; return nil }

// A server behind OAuth: the connection waits for a person, who opens the
// URL and gives back the address the browser came back to; the token is
// kept in the keyring only, refreshed there, and a later connection uses
// it without asking.
func TestAnMCPServerBehindOAuthIsAuthorizedOnceAndItsTokenRefreshedInTheKeyring(t *testing.T) {
	o := mcptest.NewOAuthServer()
	defer o.Close()
	o.TokenLife = 5 * time.Second // under oauth2's 10 s margin: every use refreshes
	keyring := mapSecrets{}
	servers := map[string]capsule.MCPServer{"web": {URL: o.URL + "/mcp"}}
	m := NewMCP(servers, MCPEnv{Secrets: keyring, RedirectURL: "http://127.0.0.1:9/callback"})
	defer m.Close()
	ctx := context.Background()

	_, states := m.Tools(ctx)
	st := states[0]
	if st.State != MCPNeedsAuthorization || !strings.HasPrefix(st.AuthorizationURL, o.URL+"/authorize?") || strings.Join(slices.Sorted(slices.Values(st.Scopes)), " ") != "offline_access tools:call tools:read" {
		t.Fatalf("before authorization: %+v", st)
	}
	if _, err := m.conn(ctx, "web"); !errors.As(err, new(*AuthorizationNeeded)) {
		t.Fatalf("asked again: %v", err)
	}
	if err := m.Authorize(ctx, "web", "http://127.0.0.1:9/callback?code=forged&state=other"); err == nil || !strings.Contains(err.Error(), "state differs") {
		t.Fatalf("an answer to another authorization: %v", err)
	}
	back, err := mcptest.Consent(st.AuthorizationURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Authorize(ctx, "web", back); err != nil {
		t.Fatal(err)
	}
	tools, states := m.Tools(ctx)
	if states[0].State != MCPConnected {
		t.Fatalf("after authorization: %+v", states[0])
	}
	res, err := toolNamed(t, tools, "mcp__web__echo").Run(ctx, Call{Arguments: json.RawMessage(`{"text":"authorized"}`)})
	if err != nil || res.Output != "echo: authorized" {
		t.Fatalf("a call: %+v %v", res, err)
	}
	if o.RefreshCount() == 0 {
		t.Fatal("a token about to expire was not refreshed")
	}
	var kept storedToken
	json.Unmarshal([]byte(keyring[MCPTokenSecret("web")]), &kept)
	issued := o.Tokens()
	if kept.AccessToken == "" || kept.RefreshToken == "" || kept.TokenURL != o.URL+"/token" ||
		!slices.Contains(issued, kept.AccessToken) || kept.AccessToken == issued[0] {
		t.Fatalf("the keyring keeps %+v; issued %v", kept, issued)
	}

	// Another connection (a restart, or tern mcp list in another process)
	// uses the kept token, refreshing it: the refresh token the first
	// holds is spent, and it goes on from the token the other kept.
	again := NewMCP(servers, MCPEnv{Secrets: keyring})
	defer again.Close()
	if _, states := again.Tools(ctx); states[0].State != MCPConnected {
		t.Fatalf("with the kept token: %+v", states[0])
	}
	res, err = toolNamed(t, tools, "mcp__web__echo").Run(ctx, Call{Arguments: json.RawMessage(`{"text":"still"}`)})
	if err != nil || res.Output != "echo: still" {
		t.Fatalf("the first connection after the other refreshed: %+v %v", res, err)
	}

	// Tokens revoked mid-session: an at-most-once call is refused unserved
	// (certain, not to reconcile), and the server asks for authorization.
	o.Revoke()
	_, err = toolNamed(t, tools, "mcp__web__record_call").Run(ctx, Call{Arguments: json.RawMessage(`{}`)})
	if err == nil || errors.Is(err, ErrUncertain) || !strings.Contains(err.Error(), "asks for authorization again") {
		t.Fatalf("a call after the revocation: %v", err)
	}
	if _, states := m.Tools(ctx); states[0].State != MCPNeedsAuthorization {
		t.Fatalf("after the revocation: %+v", states[0])
	}
}

// An access token pasted by the person is kept and used.
func TestAnMCPServerTakesAPastedToken(t *testing.T) {
	o := mcptest.NewOAuthServer()
	defer o.Close()
	keyring := mapSecrets{}
	m := NewMCP(map[string]capsule.MCPServer{"web": {URL: o.URL + "/mcp"}}, MCPEnv{Secrets: keyring})
	defer m.Close()
	ctx := context.Background()
	_, states := m.Tools(ctx)
	if states[0].State != MCPNeedsAuthorization {
		t.Fatalf("%+v", states[0])
	}
	if err := m.Authorize(ctx, "web", "not-a-token-it-issued"); err == nil || !strings.Contains(err.Error(), "refused the token") {
		t.Fatalf("a wrong token: %v", err)
	}
	// A token got elsewhere (here: from a flow of another client).
	other := NewMCP(map[string]capsule.MCPServer{"web": {URL: o.URL + "/mcp"}}, MCPEnv{Secrets: mapSecrets{}})
	defer other.Close()
	_, st := other.Tools(ctx)
	back, _ := mcptest.Consent(st[0].AuthorizationURL)
	if err := other.Authorize(ctx, "web", back); err != nil {
		t.Fatal(err)
	}
	if err := m.Authorize(ctx, "web", o.Tokens()[0]); err != nil {
		t.Fatal(err)
	}
	if _, states := m.Tools(ctx); states[0].State != MCPConnected {
		t.Fatalf("with the pasted token: %+v", states[0])
	}
}

// A stdio server gets what shell's command gets of the node's
// environment, HOME the workspace, and its own env and secrets: not the
// password of the node's secrets, nor a secret it did not list.
func TestAStdioMCPServerGetsNoneOfTheNodesEnvironment(t *testing.T) {
	t.Setenv("TERN_SECRETS_PASSWORD", "hunter2")
	t.Setenv("TERN_SECRET_OTHER", "sk-other")
	t.Setenv("TERN_TEST_PLAIN", "plain")
	ws := t.TempDir()
	s := stdioServer(t)
	s.Env["LOG_LEVEL"] = "warn"
	s.Secrets = []string{"GITHUB_TOKEN"}
	m := NewMCP(map[string]capsule.MCPServer{"local": s}, MCPEnv{Workspace: ws, Secrets: mapSecrets{"GITHUB_TOKEN": "ghp-2"}})
	defer m.Close()
	tools, states := m.Tools(context.Background())
	if states[0].State != MCPConnected {
		t.Fatalf("%+v", states[0])
	}
	res, err := toolNamed(t, tools, "mcp__local__environment").Run(context.Background(), Call{Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(res.Output, "\n")
	for _, want := range []string{"HOME=" + ws, "LOG_LEVEL=warn", "GITHUB_TOKEN=ghp-2", mcptest.EnvStdio + "=1", "PATH=" + os.Getenv("PATH")} {
		if !slices.Contains(env, want) {
			t.Errorf("the server's environment lacks %s: %q", want, env)
		}
	}
	for _, leak := range []string{"hunter2", "sk-other", "TERN_TEST_PLAIN"} {
		if strings.Contains(res.Output, leak) {
			t.Errorf("the server saw %q of the node's environment: %q", leak, env)
		}
	}
}

// A tool the server calls idempotent still asks a person by default, as
// any tool that is not read-only does: idempotent is not harmless.
// agent.json's entry for it decides otherwise.
func TestAnMCPToolThatIsNotReadOnlyAsksForApproval(t *testing.T) {
	m := NewMCP(map[string]capsule.MCPServer{"local": stdioServer(t)}, MCPEnv{Workspace: t.TempDir()})
	defer m.Close()
	tools, states := m.Tools(context.Background())
	if states[0].State != MCPConnected {
		t.Fatalf("%+v", states[0])
	}
	no, yes := false, true
	tests := []struct {
		name, tool   string
		decl         *capsule.Tool
		effect       string
		wantApproval bool
	}{
		{"a read-only tool runs without asking", "echo", nil, Pure, false},
		{"an idempotent tool asks", "add", nil, Idempotent, true},
		{"a tool without hints asks", "record_call", nil, AtMostOnce, true},
		{"agent.json lets an idempotent tool run without asking", "add", &capsule.Tool{Approval: &no}, Idempotent, false},
		{"agent.json's effect idempotent asks", "echo", &capsule.Tool{Effect: Idempotent}, Idempotent, true},
		{"agent.json's effect pure runs without asking", "record_call", &capsule.Tool{Effect: Pure}, Pure, false},
		{"agent.json gates a read-only tool", "echo", &capsule.Tool{Approval: &yes}, Pure, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := toolNamed(t, tools, "mcp__local__"+tt.tool)
			if effect, approval := MCPPolicy(tl, tt.decl); effect != tt.effect || approval != tt.wantApproval {
				t.Fatalf("%s: effect %s, approval %v; want %s, %v", tl.Name, effect, approval, tt.effect, tt.wantApproval)
			}
		})
	}
	states = WithOverrides(states, []capsule.Tool{{Name: "mcp__local__add", Approval: &no}})
	for _, tl := range states[0].Tools {
		if want := tl.Effect != Pure && tl.Name != "mcp__local__add"; tl.Approval != want {
			t.Errorf("mcp list shows %s (%s) with approval %v, want %v", tl.Name, tl.Effect, tl.Approval, want)
		}
	}
}
