package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

// A machine's own chain of an agent (the events it signs, seq after seq)
// must not fork: two events at one seq make both branches unreadable on
// every copy until the machine heals it. tern forks it only when a node's
// home was restored from a backup older than events the machine had
// already written and acknowledged. Two things keep that rare and short:
//
//   - Before the node signs its first event of an agent after it starts,
//     it takes what its reachable paired peers hold of its own chain
//     (takeOwnChain), so it goes on from its newest event, not its backup's.
//   - A fork that happens anyway (the restored home was used alone) is
//     healed by the node itself as soon as an exchange brings the other
//     branch (healOwnChain), so that every event either branch
//     acknowledged reads on every copy again with no one running a
//     command. journal.Heal keeps events written under an ended epoch
//     aside, and their copies too.

// ownChainWait bounds how long the first signature of an agent after a
// start waits for the node's paired peers: for the dials of its start (at
// most ownChainDials of it; a peer that is down can take longer to fail),
// and for one exchange with each peer connected.
const (
	ownChainWait  = 5 * time.Second
	ownChainDials = 2 * time.Second
)

// takeOwnChain runs one sync exchange of the agent with every connected
// paired peer (one that does not share it refuses, and is skipped), after
// waiting for the dials of the node's start, all within ownChainWait.
// Dials go on in parallel (dialPeers), and so do the exchanges, so a peer
// that is down or stopped delays only its own answer, never another's.
// It runs before the node signs its first event of the agent (Store.sign),
// or earlier, while a move here is prepared (SyncFrom), so that the wait
// is not in the move's frozen window.
func (n *Node) takeOwnChain(ctx context.Context, agent string) {
	ctx, cancel := context.WithTimeout(ctx, ownChainWait)
	defer cancel()
	dials := time.NewTimer(ownChainDials)
	select {
	case <-n.dialed:
	case <-dials.C:
	case <-ctx.Done():
	}
	dials.Stop()
	var wg sync.WaitGroup
	for _, p := range n.host.Network().Peers() {
		if !n.peers.Allowed(p) {
			continue
		}
		wg.Go(func() {
			st, err := n.exchange(noDial(ctx), p, agent)
			if err != nil {
				n.log.Debug("taking this machine's own chain from a peer before signing", "peer", p, "agent", agent, "err", err)
				return
			}
			if st.Received > 0 {
				n.log.Info("took events from a peer before signing the agent's first event since the start", "peer", n.peerName(p), "agent", agent, "events", st.Received)
			}
		})
	}
	wg.Wait()
}

// healSoon checks, in the background, whether this machine's chain of the
// agent has a fork or a broken link, and heals it if so (healOwnChain),
// after telling the agent's machine the newest epoch this machine signed
// under (a registry older than that is relearnt: fencing.Machine.Signed).
// Callers call it once an exchange, an import or a copy has stored what
// it brought: never in the middle of one, so that a heal sees the
// activations that came with the events it would otherwise sign again.
func (n *Node) healSoon(agent string) {
	n.mu.Lock()
	if n.healing == nil {
		n.healing = map[string]bool{}
	}
	busy := n.healing[agent]
	n.healing[agent] = true
	n.mu.Unlock()
	if busy {
		return
	}
	n.spawn(func() {
		defer func() {
			n.mu.Lock()
			delete(n.healing, agent)
			n.mu.Unlock()
		}()
		n.holders.Signed(agent)
		n.healOwnChain(n.ctx, agent)
	})
}

// healOwnChain heals this machine's chain of the agent if it has a fork
// or a broken link, and gossips the heal. A heal waits while a migration
// has stopped the agent here (the target must end with the events the
// source holds); one that cannot be made yet (a seq of the chain is held
// by no copy here) waits for the exchange that brings it.
func (n *Node) healOwnChain(ctx context.Context, agent string) {
	self := n.id.Machine()
	var problem error
	if err := n.store.With(agent, func(d *capsule.Dir) error {
		problem = d.ChainProblem(self)
		return nil
	}); err != nil || problem == nil {
		return
	}
	_, release, err := n.holders.AppendEpoch(agent)
	if err != nil {
		n.log.Info("this machine's chain of the agent needs healing; it is healed once the agent is writable here", "agent", agent, "problem", problem, "why", err)
		return
	}
	defer release()
	evs, err := n.store.Heal(ctx, agent, n.id)
	switch {
	case errors.Is(err, journal.ErrNothingToHeal):
		return
	case err != nil:
		n.log.Info("this machine's chain of the agent cannot be healed yet", "agent", agent, "problem", problem, "err", err)
		return
	}
	n.log.Warn("healed this machine's own chain of the agent: every event either branch acknowledged reads again; events written under an ended epoch stay aside",
		"agent", agent, "problem", problem, "events", len(evs))
	n.gossip.publish(ctx, agent, evs)
}
