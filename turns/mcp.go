package turns

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/session"
	"github.com/tern-dev/tern/tool"
)

// MCPServers connects to each MCP server the agent's accepted agent.json
// declares, with this node's secrets, and says what it found: each
// server's state and tools with their effect classes. The sessions of an
// agent that runs here are the runtime's own (a server waiting for
// authorization says so, with its URL); others are opened for the
// question and closed.
func (rt *Runtime) MCPServers(ctx context.Context, agent string) ([]tool.MCPServerState, error) {
	var a capsule.Agent
	err := rt.node.With(agent, func(d *capsule.Dir) error {
		var err error
		a, err = d.RunnableAgent(agent, rt.node.Ours)
		return err
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var m *tool.MCP
	if rt.node.Runs(agent) {
		ws, err := rt.workspace(agent)
		if err != nil {
			return nil, err
		}
		m = rt.mcpOf(agent, a.MCPServers, ws)
	} else {
		ws := filepath.Join(rt.cfg.Home, WorkspacesDir, agent)
		if _, err := os.Stat(ws); err != nil {
			ws = rt.cfg.Home
		}
		m = tool.NewMCP(a.MCPServers, rt.mcpEnv(ws))
		defer m.Close()
	}
	states := tool.WithOverrides(m.Status(ctx), a.Tools)
	if states == nil {
		states = []tool.MCPServerState{}
	}
	return states, nil
}

// authorizeAnswers gives the MCP servers of the agent the authorizations
// the responses answer mcp_auth actions with, before the continuing turn
// is written: a code that does not work refuses the turn (422), and no
// code or token reaches the journal.
func (rt *Runtime) authorizeAnswers(ctx context.Context, agent string, pending []session.Action, rs []session.Response) error {
	byID := map[string]session.Action{}
	for _, a := range pending {
		byID[a.ID] = a
	}
	for _, r := range rs {
		a, ok := byID[r.ActionID]
		if !ok || a.Kind != session.KindMCPAuth || r.Authorization == "" {
			continue
		}
		if err := rt.AuthorizeMCP(ctx, agent, a.Server, r.Authorization); err != nil {
			return fmt.Errorf("action %s: %w", a.ID, err)
		}
	}
	return nil
}

// ActionByState finds the pending mcp_auth action whose authorization URL
// carries state, among the agents that run here.
func (rt *Runtime) ActionByState(state string) (agent, sessionID string, act session.Action, ok bool) {
	agents, err := rt.node.Agents()
	if err != nil {
		return "", "", act, false
	}
	for _, a := range agents {
		if !rt.node.Runs(a) {
			continue
		}
		st, err := rt.state(a)
		if err != nil {
			continue
		}
		for id, s := range st.Sessions {
			for _, p := range s.Pending() {
				if p.Kind != session.KindMCPAuth {
					continue
				}
				if u, err := url.Parse(p.URL); err == nil && u.Query().Get("state") == state {
					return a, id, p, true
				}
			}
		}
	}
	return "", "", act, false
}

// ContinueAuthorized continues the session's paused turn when every
// action it waits for is an mcp_auth whose server is connected now: it
// returns the new turn's id, or "" when other answers are needed.
func (rt *Runtime) ContinueAuthorized(ctx context.Context, agent, sessionID string) (string, error) {
	unlock, _ := rt.sessionLocks.lock(context.Background(), sessionID) // as a turn request takes it
	defer unlock()
	st, err := rt.state(agent)
	if err != nil {
		return "", err
	}
	s := st.Session(sessionID)
	var rs []session.Response
	for _, p := range s.Pending() {
		if p.Kind != session.KindMCPAuth {
			return "", nil
		}
		rs = append(rs, session.Response{ActionID: p.ID, Authorization: tool.AuthorizedAlready})
	}
	if len(rs) == 0 {
		return "", errors.New("the turn waits for nothing now")
	}
	turnID := newID("turn_")
	drafts, err := st.Plan(sessionID, session.Request{Turn: turnID, Responses: rs})
	if err != nil {
		return "", err
	}
	err = rt.begin(ctx, agent, sessionID, turnID, st, drafts, rs)
	if errors.Is(err, tool.ErrNotAuthorized) {
		return "", nil // another server still waits for its person
	}
	if err != nil {
		return "", err
	}
	return turnID, nil
}
