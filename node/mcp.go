package node

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/tool"
)

// MCPServers connects to each MCP server the agent's accepted agent.json
// declares, with this node's secrets, and says what it found: each
// server's state and tools with their effect classes. The sessions of an
// agent that runs here are the runtime's own; others are opened for the
// question and closed.
func (n *Node) MCPServers(ctx context.Context, agent string) ([]tool.MCPServerState, error) {
	var a capsule.Agent
	err := n.store.With(agent, func(d *capsule.Dir) error {
		var err error
		a, err = d.AcceptedAgent()
		return err
	})
	if err != nil {
		return nil, err
	}
	ws := filepath.Join(n.home, WorkspacesDir, agent)
	if _, err := os.Stat(ws); err != nil {
		ws = n.home
	}
	m := tool.NewMCP(a.MCPServers, n.cfg.Secrets, ws)
	defer m.Close()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	_, states := m.Tools(ctx)
	if states == nil {
		states = []tool.MCPServerState{}
	}
	return states, nil
}

// handleMCP is GET /v1/agents/{agent}/mcp.
func (n *Node) handleMCP(w http.ResponseWriter, r *http.Request) {
	agent, ok := n.pathAgent(w, r)
	if !ok {
		return
	}
	states, err := n.MCPServers(r.Context(), agent)
	if err != nil {
		n.httpError(w, statusOf(err), err)
		return
	}
	writeJSON(w, map[string]any{"servers": states})
}
