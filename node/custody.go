package node

import (
	"context"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/custody"
	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/journal"
)

// What the holders (package custody) need of the node: custody.Node.

// The home's folders and files that custody keeps, and its tick.
const (
	// StagingDir holds what a node prepares for an agent migrating to it.
	StagingDir = custody.StagingDir
	// WorkspacesDir holds the workspace of every agent the node runs.
	WorkspacesDir = custody.WorkspacesDir
	// RegistryFile is the holder registry (tern.registry/1).
	RegistryFile = custody.RegistryFile
	// DefaultTick is how often the node ticks its fencing machines.
	DefaultTick = custody.DefaultTick
)

// ErrFrozen means the agent is migrating away from this node: appends
// wait until the migration ends.
var ErrFrozen = fencing.ErrFrozen

// Outcome is what a migration came to (api.Outcome).
type Outcome = api.Outcome

// Phase is one phase of a migration (api.Phase).
type Phase = api.Phase

// HoldsBlob reports whether the agent's capsule holds the blob.
func (n *Node) HoldsBlob(agent, sha256Hex string) bool {
	return n.store.HoldsBlob(agent, "", sha256Hex)
}

// Vector is the agent's version vector here.
func (n *Node) Vector(agent string) (journal.Vector, error) { return n.store.Vector(agent) }

// Wanted are the blobs the agent's journal refers to that are not here.
func (n *Node) Wanted(agent string) ([]string, error) { return n.store.Wanted(agent) }

// Foreign reports whether the node's copy of the agent belongs to someone
// else (ErrForeign).
func (n *Node) Foreign(agent string) bool { return n.foreign(agent) }

// TendMembers makes each of peers a member of the agent if it may be one.
func (n *Node) TendMembers(ctx context.Context, agent string, peers ...peer.ID) {
	n.tendMembers(ctx, agent, peers...)
}

// PairedPeers are the paired peers, with their names.
func (n *Node) PairedPeers() []api.Peer { return n.peers.List() }

// Paired reports whether p is a paired peer.
func (n *Node) Paired(p peer.ID) bool { return n.peers.Allowed(p) }

// SyncFrom brings the agent's capsule here up to date with p's, taking
// the capsule first if the node does not hold it (events both ways, then
// every blob it wants that p holds), and returns the bytes it received:
// what a target does when the source asks it to pull before a migration.
func (n *Node) SyncFrom(ctx context.Context, p peer.ID, agent string) (int64, error) {
	var received int64
	if !n.store.Holds(agent) {
		if err := n.takeCapsule(ctx, p, agent); err != nil {
			return 0, err
		}
		// The blobs the copy brought, by this pull or by a round that took
		// it meanwhile (those it left out are counted below).
		held, err := n.heldSizes(agent)
		if err != nil {
			return 0, err
		}
		for _, size := range held {
			received += size
		}
	} else {
		st, err := n.exchange(ctx, p, agent)
		if err != nil {
			return 0, err
		}
		received += st.BytesReceived
		if st.Received > 0 {
			n.healSoon(agent)
		}
	}
	// A move here is being prepared: the wait of this node's first
	// signature of the agent (for its own chain from every peer) is taken
	// now, while the agent still runs at the source, not in the frozen
	// window. Bounded by ownChainWait; not cut by the pull's deadline, as
	// it runs once in the node's life.
	n.store.TakeOwnChain(context.WithoutCancel(ctx), agent)
	before, _ := n.heldSizes(agent)
	n.fetchWanted(ctx, p, agent)
	after, _ := n.heldSizes(agent)
	for h, size := range after {
		if _, ok := before[h]; !ok {
			received += size
		}
	}
	return received, nil
}

// heldSizes returns the size of every blob the agent's capsule holds.
func (n *Node) heldSizes(agent string) (map[string]int64, error) {
	out := map[string]int64{}
	err := n.store.With(agent, func(d *capsule.Dir) error {
		for _, h := range d.HeldBlobs() {
			out[h] = d.BlobSize(h)
		}
		return nil
	})
	return out, err
}
