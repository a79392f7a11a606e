package node

import (
	"context"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

// What the runtime (package turns) needs of the node: turns.Node.

// With runs f on the agent's open capsule.
func (n *Node) With(agent string, f func(*capsule.Dir) error) error { return n.store.With(agent, f) }

// Self is the node's peer ID.
func (n *Node) Self() string { return n.host.ID().String() }

// Ours reports whether machine is this machine or a paired peer.
func (n *Node) Ours(machine string) bool { return n.ours(machine) }

// Hold holds the agent's appends in until release, so that a freeze for
// a migration waits for it; epoch is the epoch to append at, 0 when the
// agent does not run here.
func (n *Node) Hold(agent string) (epoch uint64, release func(), err error) {
	return n.holders.AppendEpoch(agent)
}

// AppendAt signs drafts as this machine at epoch (inside Hold), appends
// them durably and gossips them.
func (n *Node) AppendAt(ctx context.Context, agent string, epoch uint64, drafts []journal.Draft) ([]*journal.Event, error) {
	evs, err := n.store.AppendReserved(ctx, agent, n.id, epoch, drafts)
	if err != nil {
		return nil, err
	}
	n.gossip.publish(ctx, agent, evs)
	return evs, nil
}

// SnapshotAt records the folder ws as the agent's workspace snapshot,
// signed at epoch (inside Hold).
func (n *Node) SnapshotAt(ctx context.Context, agent string, epoch uint64, ws string) error {
	return n.store.Sign(ctx, agent, n.id.Machine(), false, func(d *capsule.Dir) error {
		_, _, err := d.SnapshotWith(ctx, n.id, epoch, ws, capsule.SnapshotOptions{Seen: n.seenOf(agent)})
		return err
	})
}

// runs reports whether the agent runs on this node now (its fencing says
// so).
func (n *Node) runs(agent string) bool { return n.holders.Runs(agent) }

// seenOf is what the agent's snapshots on this node read of its
// workspace's files (capsule.Seen): the next one reads only what changed.
func (n *Node) seenOf(agent string) *capsule.Seen {
	v, _ := n.read.LoadOrStore(agent, capsule.NewSeen())
	return v.(*capsule.Seen)
}
