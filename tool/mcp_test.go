package tool

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
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
	}, nil, t.TempDir())
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
			if tl.Effect != effect || tl.Approval != (effect == AtMostOnce) {
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
		if r := run("picture", `{}`); !strings.Contains(r.Output, "[an image, image/png, 8 bytes, not shown]") {
			t.Errorf("%s picture: %+v", server, r)
		}
	}

	// tools/list_changed: a tool the server adds is offered next time.
	grow := toolNamed(t, tools, "mcp__local__grow")
	if _, err := grow.Run(ctx, Call{Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	var found bool
	for i := 0; i < 100 && !found; i++ {
		time.Sleep(20 * time.Millisecond) // the notification comes on its own
		tools, _ = m.Tools(ctx)
		for _, tl := range tools {
			found = found || tl.Name == "mcp__local__grown"
		}
	}
	if !found {
		t.Fatal("a tool the server added is not offered")
	}
}

func TestAnMCPServerThatCannotBeReachedSaysWhy(t *testing.T) {
	m := NewMCP(map[string]capsule.MCPServer{
		"gone":   {Command: "tern-no-such-mcp-server"},
		"secret": {Command: "sh", Secrets: []string{"GITHUB_TOKEN"}},
	}, mapSecrets{}, t.TempDir())
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
