package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/protocol"
)

// ErrNotConnected means a paired peer cannot be reached now.
var ErrNotConnected = api.ErrNotConnected

// Reach connects to the paired peer p, unless it is connected already,
// within a few seconds; a peer that is not paired is left alone (Migrate
// refuses it). Its error names the peer and says what to do; the dial's
// own words go to the log, at debug level.
func (n *Node) Reach(ctx context.Context, p peer.ID) error {
	if !n.peers.Allowed(p) || n.host.Network().Connectedness(p) == network.Connected {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := n.host.Connect(ctx, peer.AddrInfo{ID: p})
	if err == nil {
		return nil
	}
	n.log.Debug("a paired peer could not be reached", "peer", n.peerName(p), "err", err)
	return n.notConnected(p)
}

// notConnected is the error of a paired peer that cannot be reached: it
// names the peer and says what to do.
func (n *Node) notConnected(p peer.ID) error {
	return fmt.Errorf("%s is %w; start its node, or check tern status", n.peerName(p), ErrNotConnected)
}

// Migrate moves the agent to target (custody.Holders.Migrate).
// A move aborted before the agent froze because its target is not
// connected (down, or stopped as the move began) says so as Reach says
// it, not in the words of the dial or the stream that broke.
func (n *Node) Migrate(ctx context.Context, agent string, target peer.ID) (Outcome, error) {
	out, err := n.holders.Migrate(ctx, agent, target)
	if err == nil && out.Outcome == "aborted" && out.FrozenMS == 0 && n.host.Network().Connectedness(target) != network.Connected {
		n.log.Debug("a move aborted: its target is not connected", "peer", n.peerName(target), "reason", out.Reason)
		out.Reason = n.notConnected(target).Error()
	}
	return out, err
}

// Holder reports where the agent stands here and on every paired peer that
// answers within a few seconds.
func (n *Node) Holder(ctx context.Context, agent string) (api.HolderReport, error) {
	st, err := n.holders.State(agent)
	if err != nil {
		return api.HolderReport{}, err
	}
	if st.State == "copy" && st.Note == "" && n.foreign(agent) {
		st.Note = foreignError(agent).Error() // read from the journal here only, not at every state asked
	}
	rep := api.HolderReport{Agent: agent, HolderState: st, Peers: []api.PeerHolder{}}
	for _, p := range n.peers.List() {
		ph := api.PeerHolder{Peer: p.ID, Name: p.Name}
		id, err := peer.Decode(p.ID)
		if err == nil {
			qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			var ps protocol.HolderState
			ps, err = protocol.AskHolder(qctx, n.host, id, agent)
			cancel()
			ph.State, ph.Epoch = ps.State, ps.Epoch
		}
		switch {
		case err != nil && id != "" && n.host.Network().Connectedness(id) != network.Connected:
			n.log.Debug("holder: a peer did not answer", "peer", n.peerName(id), "err", err)
			ph.Error = "not connected; start its node, or check tern status"
		case err != nil:
			ph.Error = api.HomeRelative(n.home, err.Error())
		}
		rep.Peers = append(rep.Peers, ph)
	}
	// A peer that answers that it runs the agent at a newer epoch than
	// the latest activation this node knows of is named instead.
	if rep.State == "retired" {
		for _, p := range rep.Peers {
			if p.State == "active" && p.Epoch > rep.Holder.Epoch {
				rep.Note = fmt.Sprintf("superseded: %s holds it at epoch %d (as it answers now)", n.holders.PeerNames([]string{p.Peer}), p.Epoch)
			}
		}
	}
	return rep, nil
}

// Resolve carries out an operator's override (custody.Holders.Resolve).
func (n *Node) Resolve(ctx context.Context, agent, action string) (string, error) {
	return n.holders.Resolve(ctx, agent, action)
}

// RunsHere is nil when the agent runs on this node, else an *api.NotHere
// saying why not and where it runs.
func (n *Node) RunsHere(agent string) error {
	if n.runs(agent) {
		return nil
	}
	st, _ := n.holders.State(agent)
	foreign := st.State == "copy" && n.foreign(agent)
	if self := n.host.ID().String(); !foreign && (st.Holder.Peer == self || st.State == "frozen") {
		// It is this node's to run, not yet or not now: a start-up check
		// with the peers, or a migration under way.
		why := "it checks with its paired peers before running the agent after a start (a few seconds)"
		switch {
		case st.Note != "":
			why = st.Note // a full disk, an activation not complete yet
		case st.State == "frozen":
			why = "a migration has frozen the agent here"
		}
		return &api.NotHere{Agent: agent, Why: why, Later: true}
	}
	here := st.State
	if here == "copy" {
		here = "a copy"
	}
	msg := fmt.Sprintf("agent %s runs on %s, not on this node (it is %s here): send the request to that node, or move the agent here (on that node: tern migrate %s --to %s); if that machine is gone for good: tern migrate resolve %s --resume --force here",
		agent, orNone(n.holders.PeerNames([]string{st.Holder.Peer})), here, agent, n.id.Machine(), agent)
	if foreign {
		msg = foreignError(agent).Error()
	}
	return &api.NotHere{Agent: agent, Why: msg, Peer: st.Holder.Peer}
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// Runnable is nil when the agent's agent.json may run here: accepted, and
// what it runs or sends accepted by a machine of this person's
// (capsule.Dir.RunnableAgent).
func (n *Node) Runnable(agent string) error {
	err := n.store.With(agent, func(d *capsule.Dir) error { _, err := d.RunnableAgent(agent, n.ours); return err })
	if err != nil && !errors.Is(err, capsule.ErrNotAccepted) {
		err = fmt.Errorf("agent %s: %w; through the node: tern capsule accept %s", agent, err, agent)
	}
	return err
}

// MovedTo is the peer that runs the agent, when this node does not run it
// and knows another does.
func (n *Node) MovedTo(agent string) string {
	if n.runs(agent) {
		return ""
	}
	if st, err := n.holders.State(agent); err == nil && st.Holder.Peer != n.host.ID().String() {
		return st.Holder.Peer
	}
	return ""
}

// HolderElsewhere returns the peer that runs the agent, which this node
// does not. While a migration has it frozen here, it waits (up to 30 s)
// for the migration to end, and returns "" if the agent runs here again.
func (n *Node) HolderElsewhere(ctx context.Context, agent string) string {
	self := n.host.ID().String()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n.runs(agent) {
			return ""
		}
		st, err := n.holders.State(agent)
		if err == nil && st.State != "frozen" && st.Holder.Peer != self || time.Now().After(deadline) {
			return orNone(st.Holder.Peer)
		}
		select {
		case <-ctx.Done():
			return orNone(st.Holder.Peer)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
