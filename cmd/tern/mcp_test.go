package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

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
	if effects["mcp__local__echo"] != "pure" || effects["mcp__local__add"] != "idempotent" || effects["mcp__local__record_call"] != "at-most-once" {
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
	if !strings.Contains(out, "gone (stdio): unavailable") || !strings.Contains(out, "is not on this machine's PATH") {
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
