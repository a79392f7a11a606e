package node

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/host"

	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/clock"
	"github.com/tern-dev/tern/internal/flaws"
	"github.com/tern-dev/tern/protocol"
)

// Harness runs a node on a harness's network and clock instead of the
// real ones, and tells the harness what its checker needs: the
// simulator's node and libp2p layers (simnet/nodesim) pass one. Every
// field may be zero. A node with a Harness serves no HTTP API, runs no
// tools and no turns: its work is the protocols.
type Harness struct {
	// Host is the transport: the node's libp2p host, on the harness's
	// network, instead of TCP and QUIC sockets.
	Host func() (host.Host, error)
	// Gate is the spawner: every goroutine the node starts waits for the
	// channel Hold returns before it runs, and so does one that another
	// wakes from a wait (a lock handed on, an outcome told). Nil starts
	// and wakes them at once.
	Gate interface{ Hold() <-chan struct{} }
	// Driven: the node runs no tickers of its own; the harness calls
	// TickFencing and TickSync, and connects the nodes.
	Driven bool
	// Clock is the clock the node's timeouts and delays run on, instead
	// of the real one (nil). The protocols time their exchanges on their
	// host's clock, if it has one (memnet's does).
	Clock clock.Clock
	// Incarnation is the fencing machines' incarnation; 0 draws one.
	Incarnation uint64
	// Flaw runs a deliberately broken variant of the protocols.
	Flaw flaws.Flaw

	// Saving is called before the registry saves rec; Event for every
	// fencing event; Runs when the agent starts running (saved is the
	// registry's record).
	Saving func(agent string, old, rec *fencing.Record)
	Event  func(agent string, ev fencing.Event)
	Runs   func(agent string, saved fencing.Record)
	// MigrateFate says when a fencing message goes out: after each of the
	// delays it returns (none: lost; two: sent again, late).
	MigrateFate func(fencing.Message) []time.Duration
}

// harnessed reports whether a harness runs the node.
func (n *Node) harnessed() bool { return n.cfg.Harness != nil }

// driven reports whether a harness ticks the node.
func (n *Node) driven() bool { return n.cfg.Harness != nil && n.cfg.Harness.Driven }

// clock is the clock the node waits on: the harness's, or the real one.
func (n *Node) clock() clock.Clock {
	if hn := n.cfg.Harness; hn != nil && hn.Clock != nil {
		return hn.Clock
	}
	return clock.Real
}

// TickFencing is one tick of every agent's fencing machine: what the
// node does on its own every DefaultTick, for a Driven harness to call.
func (n *Node) TickFencing() { n.holders.Tick() }

// TickSync starts one tick of anti-entropy: a round with every connected
// peer, a dial of the others, idle capsules closed; what the node does on
// its own every SyncInterval, for a Driven harness to call. It runs in a
// goroutine of its own, as the dials it waits for do.
func (n *Node) TickSync() { n.spawn(n.syncTick) }

// Context is done once the node closes.
func (n *Node) Context() context.Context { return n.ctx }

// Runs reports whether the node runs agent now.
func (n *Node) Runs(agent string) bool { return n.runs(agent) }

// HolderState is what this node knows of agent's holder, without asking
// its peers (Holder asks them).
func (n *Node) HolderState(agent string) (protocol.HolderState, error) {
	return n.holders.State(agent)
}

// FencingIdle reports whether agent's fencing machine has nothing in
// flight: no migration, override or tail, and nothing left to apply.
func (n *Node) FencingIdle(agent string) (bool, error) { return n.holders.Idle(agent) }

// SavedRecord is agent's record in the holder registry on disk.
func (n *Node) SavedRecord(agent string) (fencing.Record, bool, error) {
	return n.holders.SavedRecord(agent)
}

// NewestEpoch is the highest epoch an event of agent's journal here
// carries.
func (n *Node) NewestEpoch(agent string) (uint64, error) {
	return n.holders.NewestEpoch(agent)
}

// wake runs f, which wakes a goroutine of the node that waits (closes the
// channel it waits on, sends it a result, signals its condition), or, with
// a harness's gate, has it run in its turn: the goroutine woken does not
// run beside the one that woke it. f must not block.
func (n *Node) wake(f func()) {
	if hn := n.cfg.Harness; hn == nil || hn.Gate == nil {
		f()
		return
	}
	go n.held(f)()
}

// held returns f as it is, or f waiting for the harness's gate to let it
// start.
func (n *Node) held(f func()) func() {
	hn := n.cfg.Harness
	if hn == nil || hn.Gate == nil {
		return f
	}
	turn := hn.Gate.Hold()
	return func() {
		select {
		case <-turn:
		case <-n.ctx.Done():
		}
		f()
	}
}
