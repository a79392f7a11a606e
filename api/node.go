package api

import (
	"context"
	"fmt"
	"io"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/filecopy"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/session"
	"github.com/tern-dev/tern/tool"
)

// Node is what the API serves: the node's operations, which the handlers
// only translate from and to HTTP. package node implements it. Errors are
// answered with the status errorStatuses gives them.
type Node interface {
	Capsules
	Peers
	Moves
}

// Capsules are the capsules the node holds and what it does to them.
type Capsules interface {
	Status() (Status, error)
	Agents() ([]string, error)
	Holds(agent string) bool
	// Events are the agent's events.
	Events(agent string) ([]*journal.Event, error)
	ImportFrom(r io.Reader) (agent string, merged bool, err error)
	// ImportFolder imports the capsule folder at an absolute path on the
	// node's machine without a tar, and says how its blobs were copied.
	ImportFolder(dir string) (agent string, merged bool, copied filecopy.Method, err error)
	// ExportFile writes the agent's capsule as a tar to file.
	ExportFile(agent, file string) error
	Append(ctx context.Context, agent string, drafts []journal.Draft) ([]*journal.Event, error)
	Accept(ctx context.Context, agent string) ([]string, error)
	Snapshot(ctx context.Context, agent, workspace string, opt capsule.SnapshotOptions) (capsule.SnapshotEventBody, []string, error)
	Heal(ctx context.Context, agent string) ([]*journal.Event, error)
	Members(agent string) (journal.Members, error)
	AddMember(ctx context.Context, agent, peer string) (*journal.Event, error)
	RemoveMember(ctx context.Context, agent, peer string) (*journal.Event, error)
	// Runnable is nil when the agent's agent.json may run here: accepted,
	// and what it runs or sends accepted by a machine of this person's.
	Runnable(agent string) error
}

// Peers are the node's paired peers and its sync with them.
type Peers interface {
	SyncState(ctx context.Context, p peer.ID, agent string) (SyncState, error)
	ReloadPeers() ([]Peer, error)
	ReloadShares() error
	PendingPeers() []PendingPeer
}

// Moves are where agents run and how they move.
type Moves interface {
	Runs(agent string) bool
	// RunsHere is nil when the agent runs on this node, else a *NotHere.
	RunsHere(agent string) error
	// MovedTo is the peer that runs the agent, when this node knows
	// another does.
	MovedTo(agent string) string
	// HolderElsewhere waits, while a migration has the agent frozen here,
	// for it to end; it returns the peer that runs the agent, or "" if it
	// runs here again.
	HolderElsewhere(ctx context.Context, agent string) string
	HolderState(agent string) (protocol.HolderState, error)
	Holder(ctx context.Context, agent string) (HolderReport, error)
	// Reach connects to a paired peer that is not connected.
	Reach(ctx context.Context, p peer.ID) error
	Migrate(ctx context.Context, agent string, target peer.ID) (Outcome, error)
	Resolve(ctx context.Context, agent, action string) (string, error)
	// OpenRelay opens a turn relay stream to the peer to (relay.go);
	// done(ok) ends it, cleanly or not.
	OpenRelay(ctx context.Context, to peer.ID) (stream io.ReadWriter, done func(ok bool), err error)
}

// Memory is the agents' memory.
type Memory interface {
	Notes(agent string) (memory.Notes, error)
	Note(ctx context.Context, agent, text string, tags []string, revise string) (string, error)
	Forget(ctx context.Context, agent, note string) error
	SearchMemory(ctx context.Context, agent string, q memory.Query) ([]memory.Result, error)
	ReindexMemory(ctx context.Context, agent string) (int, error)
}

// Runtime runs the turns of the agents that run on the node, with their
// memory, models and MCP servers.
type Runtime interface {
	Memory
	ModelSettings(agent string) (provider.Settings, error)
	MCPServers(ctx context.Context, agent string) ([]tool.MCPServerState, error)

	// State is the agent's sessions and turns.
	State(agent string) (*session.State, error)
	// AgentOf is the agent a session belongs to.
	AgentOf(session string) (string, error)
	NewSession(ctx context.Context, agent string) (string, error)
	// NewTurn plans a turn of the request and starts it; a session whose
	// turn runs refuses it (session.ErrTurnRunning) naming that turn.
	NewTurn(ctx context.Context, agent, session string, req session.Request) (turn, active string, err error)
	// CancelTurn stops a running turn and writes its end, cancelled.
	CancelTurn(ctx context.Context, agent string, t *session.Turn) (*session.Turn, error)
	// TurnEvents are the turn's events, in order.
	TurnEvents(agent string, t *session.Turn) []*journal.Event
	// Live is the turn's live stream.
	Live(agent, session, turn string) Live
	// ActionByState finds the pending mcp_auth action whose authorization
	// URL carries state, among the agents that run here.
	ActionByState(state string) (agent, session string, act session.Action, ok bool)
	// AuthorizeMCP finishes an MCP server's authorization with the URL
	// the authorization server sent the browser back to.
	AuthorizeMCP(ctx context.Context, agent, server, redirect string) error
	// ContinueAuthorized continues the session's paused turn when every
	// action it waits for is an authorized mcp_auth: the new turn's id,
	// or "" when other answers are needed.
	ContinueAuthorized(ctx context.Context, agent, session string) (string, error)
}

// Live is a turn running on this node, as its streams follow it.
type Live interface {
	// Since is what is new after item number after and delta number
	// deltaAfter of step step.
	Since(after, step, deltaAfter int) LiveSnapshot
}

// LiveSnapshot is what a stream reads of a live turn at once: its events
// and deltas encoded as server-sent events (Frames).
type LiveSnapshot struct {
	Items    [][]byte // after the subscriber's last
	Deltas   [][]byte // of the step in flight, after the subscriber's last
	Step     int
	Ended    bool
	MovedTo  string
	Detached bool // no runner feeds the stream any more: find the turn again
	Changed  <-chan struct{}
}

// NotHere says why an agent does not run on this node: Later, it is this
// node's to run, not yet or not now (503, try again); else it runs on
// Peer (409).
type NotHere struct {
	Agent string
	Why   string
	Later bool
	Peer  string
}

func (e *NotHere) Error() string {
	if e.Later {
		return fmt.Sprintf("agent %s does not run on this node right now: %s; try again shortly (tern holder %s)", e.Agent, e.Why, e.Agent)
	}
	return e.Why
}
