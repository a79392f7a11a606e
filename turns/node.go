package turns

import (
	"context"
	"log/slog"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/provider"
)

// Node is what the runtime needs of the node that runs it: the capsules
// it holds, and the custody of each agent's epoch. package node
// implements it.
type Node interface {
	// With runs f on the agent's open capsule.
	With(agent string, f func(*capsule.Dir) error) error
	// Agents are the agents whose capsules the node holds.
	Agents() ([]string, error)
	// Runs reports whether the agent runs on this node now.
	Runs(agent string) bool
	// HolderState is what the node knows of the agent's holder.
	HolderState(agent string) (protocol.HolderState, error)
	// Self is the node's peer ID.
	Self() string
	// Ours reports whether machine is this machine or a paired peer.
	Ours(machine string) bool
	// Hold holds the agent's appends in until release: a freeze for a
	// migration waits for it. epoch is the epoch to append at, 0 when the
	// agent does not run here.
	Hold(agent string) (epoch uint64, release func(), err error)
	// AppendAt signs drafts as this machine at epoch (inside Hold),
	// appends them durably and gossips them.
	AppendAt(ctx context.Context, agent string, epoch uint64, drafts []journal.Draft) ([]*journal.Event, error)
	// Append is AppendAt at the epoch of its own Hold.
	Append(ctx context.Context, agent string, drafts []journal.Draft) ([]*journal.Event, error)
	// SnapshotAt records the folder ws as the agent's workspace snapshot,
	// signed at epoch (inside Hold).
	SnapshotAt(ctx context.Context, agent string, epoch uint64, ws string) error
}

// Config is how the runtime runs.
type Config struct {
	// Home is $TERN_HOME: workspaces and the record of process groups
	// are under it, and a confined shell command may not read it.
	Home string
	// Secrets gives the API keys agents' key_secret names.
	Secrets provider.Secrets
	// API is the node's API address, where MCP authorization servers send
	// the browser back to; known once the API listens.
	API func() string
	// Spawn runs f in the background unless the node is closing.
	Spawn func(f func()) bool
	// Disabled: the runtime runs no turns, tools or processes (a
	// harness's node, whose work is the protocols).
	Disabled bool
	Log      *slog.Logger
}
