package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tern-dev/tern/tool"
)

// EnvEverything names the reference MCP server's executable
// (@modelcontextprotocol/server-everything's mcp-server-everything) when
// it is not where .ci/run installs it.
const EnvEverything = "TERN_MCP_EVERYTHING"

// everythingServer is the path of the reference MCP server, or the test is
// skipped saying how to install it.
func everythingServer(t *testing.T) string {
	t.Helper()
	p := os.Getenv(EnvEverything)
	if p == "" {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, ".cache", "tern-ci", "npm", "node_modules", ".bin", "mcp-server-everything")
		}
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("the reference MCP server is not installed (%v): .ci/run installs it with npm install --prefix ~/.cache/tern-ci/npm @modelcontextprotocol/server-everything, or set %s", err, EnvEverything)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("the reference MCP server needs Node.js, which is not on PATH")
	}
	return p
}

// startEverythingHTTP runs the reference server over streamable HTTP on
// port until the test ends or stop is called.
func startEverythingHTTP(t *testing.T, bin string, port int) (stop func()) {
	t.Helper()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	eventually(t, 20*time.Second, func() error {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return fmt.Errorf("the reference server does not listen on %d: %v", port, err)
		}
		c.Close()
		return nil
	})
	return stop
}

// The official reference server, over stdio and over streamable HTTP:
// its tools listed with their effect classes and called through turns of
// the built-in model, an at-most-once tool only after its approval, and
// the HTTP server restarted mid-session.
func TestTheReferenceMCPServerOverStdioAndHTTP(t *testing.T) {
	bin := everythingServer(t)
	port := freePort(t)
	stop := startEverythingHTTP(t, bin, port)
	home := t.TempDir()
	runNode(t, home)
	id := importAgent(t, home, func(a map[string]any) {
		a["mcp_servers"] = map[string]any{
			"local": map[string]any{"command": bin, "args": []string{"stdio"}},
			"web":   map[string]any{"url": fmt.Sprintf("http://127.0.0.1:%d/mcp", port)},
		}
	})

	var states []tool.MCPServerState
	if err := json.Unmarshal([]byte(mustTern(t, home, "", "mcp", "list", id, "--json")), &states); err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 || states[0].State != tool.MCPConnected || states[1].State != tool.MCPConnected {
		t.Fatalf("mcp list: %+v", states)
	}
	effects := map[string]tool.MCPTools{}
	for _, s := range states {
		for _, tl := range s.Tools {
			effects[tl.Name] = tl
		}
	}
	if e := effects["mcp__local__echo"]; e.Effect != tool.Pure || e.Approval {
		t.Fatalf("echo: %+v", e)
	}
	if e := effects["mcp__web__toggle-simulated-logging"]; e.Effect != tool.AtMostOnce || !e.Approval {
		t.Fatalf("toggle-simulated-logging: %+v", e)
	}

	call := func(name, args, want string) {
		t.Helper()
		out := mustTern(t, home, "", "turn", id, "!call "+name+" "+args)
		if !strings.Contains(out, want) {
			t.Fatalf("%s: %q, want %q in it", name, out, want)
		}
	}
	call("mcp__local__echo", `{"message": "over stdio"}`, "Echo: over stdio")
	call("mcp__web__echo", `{"message": "over HTTP"}`, "Echo: over HTTP")
	call("mcp__web__get-sum", `{"a": 2, "b": 3}`, "5")
	call("mcp__local__get-structured-content", `{"location": "New York"}`, "temperature")

	code, _, errs := tern(t, home, "", "turn", id, `!call mcp__web__toggle-simulated-logging {}`)
	if code != 0 || !strings.Contains(errs, "paused") {
		t.Fatalf("an at-most-once tool: exit %d, %q", code, errs)
	}
	ids := pendingIDs(t, home)
	if len(ids) != 1 {
		t.Fatalf("pending %v", ids)
	}
	if out := mustTern(t, home, "", "approve", ids[0]); !strings.Contains(strings.ToLower(out), "logging") {
		t.Fatalf("after the approval: %q", out)
	}

	stop()
	states = nil
	json.Unmarshal([]byte(mustTern(t, home, "", "mcp", "list", id, "--json")), &states)
	if len(states) != 2 || states[1].State != tool.MCPUnavailable {
		t.Fatalf("mcp list with the HTTP server stopped: %+v", states)
	}
	startEverythingHTTP(t, bin, port)
	call("mcp__web__echo", `{"message": "after a restart"}`, "Echo: after a restart")
}
