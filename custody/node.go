package custody

import (
	"context"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/clock"
	"github.com/tern-dev/tern/internal/flaws"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/provider"
)

// Node is what the holders need of the node whose agents they fence:
// its capsules, its paired peers, and the sync that brings a capsule up
// to date before a migration. package node implements it.
type Node interface {
	// With runs f on the agent's open capsule.
	With(agent string, f func(*capsule.Dir) error) error
	// Agents are the agents whose capsules the node holds.
	Agents() ([]string, error)
	Holds(agent string) bool
	// HoldsBlob reports whether the agent's capsule holds the blob.
	HoldsBlob(agent, sha256Hex string) bool
	Vector(agent string) (journal.Vector, error)
	// Wanted are the blobs the agent's journal refers to that are not here.
	Wanted(agent string) ([]string, error)
	Members(agent string) (journal.Members, error)
	// AppendAt signs drafts as this machine at epoch, appends them durably
	// and gossips them.
	AppendAt(ctx context.Context, agent string, epoch uint64, drafts []journal.Draft) ([]*journal.Event, error)
	// Foreign reports whether the node's copy of the agent belongs to
	// someone else (api.ErrForeign).
	Foreign(agent string) bool
	// TendMembers makes each of peers a member of the agent if it may be
	// one (a paired peer the agent is shared with).
	TendMembers(ctx context.Context, agent string, peers ...peer.ID)
	// PairedPeers are the paired peers, with their names.
	PairedPeers() []api.Peer
	// Paired reports whether p is a paired peer.
	Paired(p peer.ID) bool
	// SyncFrom brings the agent's capsule here up to date with p's
	// (taking the capsule first if the node does not hold it; events both
	// ways, then the blobs it wants that p holds) and returns the bytes it
	// received.
	SyncFrom(ctx context.Context, p peer.ID, agent string) (int64, error)
}

// Runtime is the runtime of turns, as the holders start and stop it.
type Runtime interface {
	// StopAgent stops the runners of the agent's turns at a safe point.
	StopAgent(agent string)
	// Resume starts a runner for every running turn of the agent.
	Resume(agent string)
}

// Config is how the holders run.
type Config struct {
	// Home is $TERN_HOME: the registry, the staging area, the handovers
	// and the workspaces are in it.
	Home string
	// Self is this machine's peer ID.
	Self string
	// Host is the node's libp2p host: fencing messages and pulls go over
	// /tern/migrate/1.0.0 on it.
	Host host.Host
	// Signer signs the handovers this node gives: the machine's key.
	Signer journal.Signer
	// Secrets are the node's secrets: a migration here checks that the
	// agent's resolve (nil checks nothing).
	Secrets provider.Secrets
	// Strict: run an agent held at startup only after reaching a peer.
	Strict bool
	// Tick is how often the machines tick (DefaultTick).
	Tick time.Duration
	// Spawn runs f in the background unless the node is closing; Context
	// is done once it closes.
	Spawn func(f func()) bool
	// Wake runs f, which wakes a goroutine that waits (a channel it reads
	// is sent to, a condition it waits on is signalled); a harness's gate
	// runs it in its turn. Nil runs f at once.
	Wake func(f func())
	// Clock is what delays and timeouts run on (nil: the real clock).
	Clock   clock.Clock
	Context context.Context
	Log     *slog.Logger

	// What a harness (the simulator) sets; production leaves them zero.
	// Incarnation is the machines' incarnation (0 draws one); Flaw a
	// deliberately broken protocol; Saving, Event and Runs show the
	// checker each record saved, each event and each start of running;
	// MigrateFate says when a message goes out (after each delay; none:
	// lost); Off runs no turns (the runtime is not told).
	Incarnation uint64
	Flaw        flaws.Flaw
	Saving      func(agent string, old, rec *fencing.Record)
	Event       func(agent string, ev fencing.Event)
	Runs        func(agent string, saved fencing.Record)
	MigrateFate func(fencing.Message) []time.Duration
	Off         bool
	// LoseMigrate, in tests, loses a fencing message this node would send
	// when it returns true: a lost request or a lost reply.
	LoseMigrate func(fencing.Message) bool
}
