package node

import (
	"context"
	"errors"
	"io"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/store"
)

// ours reports whether machine is one of this person's: this node's own,
// or a paired peer's. Their acceptance counts (capsule.TrustedAgent), and
// a capsule none of them is a member of is foreign (capsule.Foreign).
func (n *Node) ours(machine string) bool {
	if machine == n.id.Machine() {
		return true
	}
	p, err := peer.Decode(machine)
	return err == nil && n.peers.Allowed(p)
}

// ErrForeign means the node's copy of an agent belongs to someone else:
// none of its members is this machine or a paired peer (capsule.Foreign).
// Such a copy never runs here.
var ErrForeign = api.ErrForeign

// foreign reports whether the node's copy of agent is foreign (see
// ErrForeign).
func (n *Node) foreign(agent string) bool {
	f := false
	n.store.With(agent, func(d *capsule.Dir) error {
		evs, err := d.Events()
		if err == nil {
			f = capsule.Foreign(evs, agent, n.ours)
		}
		return err
	})
	return f
}

// foreignError is ErrForeign for a person (api.ForeignError).
func foreignError(agent string) error { return api.ForeignError(agent) }

// tendMembers writes what this node owes the members of an agent it
// holds. Of a capsule from before members, it names the first members
// (capsule.Dir.NameFirstMembers): itself, every machine whose events it
// holds, and each of peers. Then, being a member, it adds each of peers
// that is not a member yet and is a paired peer the agent is shared with:
// the callers pass the peers they give the agent to (a copy served, an
// exchange with a peer that holds it, a move), and paired peers are the
// person's own machines. Pairing alone makes no member. A machine once
// removed is never added again.
func (n *Node) tendMembers(ctx context.Context, agent string, peers ...peer.ID) {
	peers = slices.DeleteFunc(peers, func(p peer.ID) bool {
		return p == n.host.ID() || n.knownMember(agent, p) || !n.peers.Allowed(p) || !n.store.Shares().Shared(agent, p.String())
	})
	m, err := n.store.Members(agent)
	if err != nil {
		return
	}
	var want []string
	for _, p := range peers {
		if m.Has(p.String()) && !m.Open() {
			n.members.Store(memberKey{agent, p}, true)
		} else {
			want = append(want, p.String())
		}
	}
	self := n.id.Machine()
	if !m.Open() && (len(want) == 0 || !m.Has(self)) {
		return // nothing to add, or a copy this node may not write
	}
	if m.Open() && n.foreign(agent) {
		return // someone else's agent from before members: not this node's to name
	}
	err = n.store.Sign(ctx, agent, self, false, func(d *capsule.Dir) error {
		if m.Open() {
			evs, err := d.NameFirstMembers(ctx, n.id, want)
			if len(evs) > 0 {
				n.log.Info("named the first members of an agent from before members", "agent", agent, "members", len(evs))
			}
			return err
		}
		for _, p := range want {
			e, err := d.AddMember(ctx, n.id, p)
			if err != nil {
				return err
			}
			if e != nil {
				n.log.Info("added a paired peer to an agent's members", "agent", agent, "peer", p)
			}
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			n.log.Warn("could not add paired peers to an agent's members", "agent", agent, "err", err)
		}
		return
	}
	for _, p := range peers {
		n.members.Store(memberKey{agent, p}, true)
	}
}

// memberKey names a machine known to be a member of an agent.
type memberKey struct {
	agent string
	peer  peer.ID
}

// knownMember reports whether p is known to be a member of agent
// (membership of a machine only ends with a removal, after which it is
// never added again either).
func (n *Node) knownMember(agent string, p peer.ID) bool {
	_, ok := n.members.Load(memberKey{agent, p})
	return ok
}

// givingStore serves capsules from the store (protocol.Capsules), adding
// the peer that takes one to its members first: a paired peer is given
// the agent, and what it writes there counts.
type givingStore struct {
	*store.Store
	n *Node
}

// Export adds peer to the agent's members (see tendMembers), then writes
// the capsule (Store.Export).
func (g givingStore) Export(agent, p string, all bool, w io.Writer) error {
	if id, err := peer.Decode(p); err == nil && g.Store.Shares().Shared(agent, p) && g.Store.Holds(agent) {
		g.n.tendMembers(g.n.ctx, agent, id)
	}
	return g.Store.Export(agent, p, all, w)
}

// AddMember has this node, a member of agent, add the machine peer to its
// members (capsule.Dir.AddMember); it returns the member.added event, nil
// when peer is a member already. The event reaches the peers by gossip.
func (n *Node) AddMember(ctx context.Context, agent, peer string) (*journal.Event, error) {
	return n.changeMembers(ctx, agent, func(d *capsule.Dir) (*journal.Event, error) {
		return d.AddMember(ctx, n.id, peer)
	})
}

// RemoveMember has this node, a member of agent, remove the machine peer
// from its members (capsule.Dir.RemoveMember) and returns the
// member.removed event.
func (n *Node) RemoveMember(ctx context.Context, agent, peer string) (*journal.Event, error) {
	return n.changeMembers(ctx, agent, func(d *capsule.Dir) (*journal.Event, error) {
		return d.RemoveMember(ctx, n.id, peer)
	})
}

func (n *Node) changeMembers(ctx context.Context, agent string, change func(d *capsule.Dir) (*journal.Event, error)) (*journal.Event, error) {
	var e *journal.Event
	err := n.store.Sign(ctx, agent, n.id.Machine(), false, func(d *capsule.Dir) error {
		var err error
		e, err = change(d)
		return err
	})
	if err != nil || e == nil {
		return nil, err
	}
	n.gossip.publish(ctx, agent, []*journal.Event{e})
	return e, nil
}
