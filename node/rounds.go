package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/clock"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
)

// IdleCapsule is how long a capsule goes unused before the node closes
// it (see Store.CloseIdle), checked every sync interval.
const IdleCapsule = time.Minute

// antiEntropy dials paired peers at their static addresses and syncs every
// capsule with every connected peer, on a timer: gossip may miss a peer,
// this never does. It also closes the capsules that have gone idle. A
// peer that connects gets its round from the connection (see Start), so
// each tick syncs with the peers connected before it dials the others.
func (n *Node) antiEntropy() {
	t := time.NewTicker(n.cfg.SyncInterval)
	defer t.Stop()
	n.dialPeers()
	close(n.dialed)
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		n.syncTick()
	}
}

// syncTick is one tick of anti-entropy: a round with every connected
// peer, a dial of the others, idle capsules closed.
func (n *Node) syncTick() {
	for _, p := range n.host.Network().Peers() {
		n.startRound(p, changedOnly)
	}
	n.dialPeers()
	if _, err := n.store.CloseIdle(IdleCapsule); err != nil {
		n.log.Warn("closing idle capsules", "err", err)
	}
}

// dialPeers connects to paired peers that are not connected and have
// static addresses.
func (n *Node) dialPeers() {
	var wg sync.WaitGroup
	for _, ai := range n.peers.dialable() {
		if n.host.Network().Connectedness(ai.ID) == network.Connected {
			continue
		}
		wg.Go(n.held(func() { // a peer that is down delays no other
			ctx, cancel := clock.WithTimeout(n.clock(), n.ctx, 10*time.Second)
			defer cancel()
			if err := n.host.Connect(ctx, ai); err != nil {
				n.log.Debug("paired peer unreachable", "peer", ai.ID, "err", err)
				n.dialFailed(ai.ID, err)
			}
		}))
	}
	wg.Wait()
}

// connected starts the round a new connection with p calls for. One
// exchange per capsule brings both sides up to date, so only one side
// starts them (two would send the missing events twice); the other
// fetches the blobs it wants.
func (n *Node) connected(p peer.ID) {
	n.mu.Lock()
	delete(n.dialErrs, p)
	n.seen[p] = time.Now()
	n.mu.Unlock()
	n.forgetSynced(p) // it may have restarted from another state
	// Every agent held active here asks the peer what it knows: one that
	// knows a newer activation makes this node step down at once.
	n.spawn(func() { n.holders.connected(p) })
	if leads(n.host.ID(), p) {
		n.goSync(p)
	} else {
		n.startRound(p, wantsOnly)
	}
}

// noDial keeps the streams opened with ctx on the connections there are:
// a round or a fetch never dials. Dialing is antiEntropy's, once a sync
// interval; a peer that drops each connection at once (it did not pair
// this node, or unpaired it) would otherwise be redialed in a loop by the
// round each connection starts.
func noDial(ctx context.Context) context.Context {
	return network.WithNoDial(ctx, "sync runs on the connection it was started for")
}

// leads reports whether, of two connected peers, self is the one that
// starts the sync exchanges on connect: the lower peer ID, so that both
// sides agree whoever dialed.
func leads(self, other peer.ID) bool { return self < other }

// round is what a sync round with a peer covers; a higher round covers
// what a lower one does.
type round int

const (
	wantsOnly   round = iota + 1 // fetch wanted blobs; exchange no events
	changedOnly                  // and exchange capsules the peer is not known to hold whole
	everything                   // and exchange every capsule, taking those the peer offers
)

// goSync runs a round over every capsule with p in the background.
func (n *Node) goSync(p peer.ID) { n.startRound(p, everything) }

// startRound runs a sync round with p in the background. At most one round
// runs per peer; requests that arrive meanwhile run one more round when it
// ends (covering everything if any of them asked for it), so bursts never
// pile up streams.
func (n *Node) startRound(p peer.ID, r round) {
	if !n.peers.Allowed(p) {
		return
	}
	startJob(n, &n.rounds, p, int(r), func(level int) { n.syncRound(n.ctx, p, round(level)) })
}

// SyncPeer takes a copy of every capsule p shares that this node lacks,
// then runs one sync exchange with p for every capsule held, and fetches
// the blobs each one wants that p holds. It returns when they are done
// (a blob another round is fetching meanwhile is waited for).
func (n *Node) SyncPeer(ctx context.Context, p peer.ID) { n.syncRound(ctx, p, everything) }

func (n *Node) syncRound(ctx context.Context, p peer.ID, r round) {
	defer n.stats.rounds.Inc()
	ctx = noDial(ctx)
	var theirs map[string]string // the peer's VectorDigest of each capsule it shares
	if r > wantsOnly {
		theirs = n.takeMissing(ctx, p)
	}
	ids, err := n.store.List()
	if err != nil {
		n.log.Warn("list capsules", "err", err)
		return
	}
	for _, id := range ids {
		if r > wantsOnly && n.sameAsPeer(p, id, theirs[id]) {
			n.stats.alike.Inc() // the list's one round trip showed it: no exchange
		} else if r == everything || r == changedOnly && !n.peerHoldsAll(p, id) && !n.responds(p, id) {
			if _, held := theirs[id]; held {
				n.tendMembers(ctx, id, p) // it holds the agent: it was given it
			}
			st, err := n.exchange(ctx, p, id)
			if err != nil {
				n.log.Debug("sync", "peer", p, "agent", id, "err", err)
				continue
			}
			if st.Received > 0 {
				n.log.Info("caught up with a peer", "peer", n.peerName(p), "agent", id, "events", st.Received)
				n.healSoon(id)
			}
		}
		n.fetchWanted(ctx, p, id)
	}
}

// exchange runs one sync exchange of the agent with p (protocol.Sync),
// counts it, and records what both then hold.
func (n *Node) exchange(ctx context.Context, p peer.ID, agent string) (protocol.SyncStats, error) {
	st, err := protocol.Sync(ctx, n.host, p, agent, n.store)
	n.stats.observe(st, err)
	if err == nil {
		n.recordSynced(p, agent, st.Both)
	}
	return st, err
}

// sameAsPeer reports whether the peer's digest of the agent's vector is
// this node's: both hold the same events, and the exchange is skipped
// (recorded as done, so a timer round skips it too).
func (n *Node) sameAsPeer(p peer.ID, agent, digest string) bool {
	if digest == "" {
		return false
	}
	v, err := n.store.Vector(agent)
	if err != nil || protocol.VectorDigest(v) != digest {
		return false
	}
	n.recordSynced(p, agent, v)
	return true
}

// takeMissing copies from p every capsule it shares that this node does
// not hold; each tar is checked completely before the capsule appears. It
// returns the peer's VectorDigest of each capsule it shares, as its list
// said.
func (n *Node) takeMissing(ctx context.Context, p peer.ID) map[string]string {
	ids, vectors, err := protocol.PeerCapsules(ctx, n.host, p)
	if err != nil {
		n.log.Debug("capsule list", "peer", p, "err", err)
		return nil
	}
	for _, id := range ids {
		if n.store.Holds(id) || !capsule.ValidAgentID(id) {
			continue
		}
		if err := n.takeCapsule(ctx, p, id); err != nil {
			n.log.Warn("could not take a capsule a peer shares", "peer", p, "agent", id, "err", err)
			continue
		}
		n.log.Info("took a capsule a peer shares", "peer", n.peerName(p), "agent", id)
	}
	return vectors
}

// takeCapsule takes a copy of the agent's capsule from p, with its small
// blobs only (the others follow as wants), unpacked as it arrives and
// checked whole before it appears (Store.ImportFrom). One copy of an agent
// is taken at a time: a second call waits for the first, and then finds
// the capsule held.
func (n *Node) takeCapsule(ctx context.Context, p peer.ID, id string) error {
	unlock, ok := n.lockFetch(ctx, "capsule/"+id)
	if !ok {
		return ctx.Err()
	}
	defer unlock()
	if n.store.Holds(id) {
		return nil // taken meanwhile, from this peer or another
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := protocol.TakeCapsule(ctx, n.host, p, id, false, pw, capsule.DefaultLimits.MaxTotalSize)
		pw.CloseWithError(err) // nil: the reader sees the end of the tar
		done <- err
	}()
	got, _, err := n.store.ImportFrom(pr)
	pr.CloseWithError(errImportEnded) // the fetch stops if the import did
	if terr := <-done; err != nil && terr != nil {
		err = terr // the stream's cut says more than the tar's end
	}
	if err != nil {
		return err
	}
	if got != id {
		return fmt.Errorf("asked the peer for capsule %s, it sent capsule %s", id, got)
	}
	if _, err := n.holders.get(id); err != nil {
		n.log.Warn("no fencing for a capsule a peer shares", "agent", id, "err", err)
	}
	return n.gossip.join(id)
}

// recordSynced remembers both, a vector of events p and this node both
// held when an exchange of agent ended.
func (n *Node) recordSynced(p peer.ID, agent string, both journal.Vector) {
	if both != nil {
		n.synced.Add(syncKey{p, agent}, both)
	}
}

// forgetSynced forgets what p was known to hold.
func (n *Node) forgetSynced(p peer.ID) {
	for _, k := range n.synced.Keys() {
		if k.peer == p {
			n.synced.Remove(k)
		}
	}
}

// peerHoldsAll reports whether p is known to hold every event of agent
// this node holds: our vector equals the one both held after the last
// exchange. (What p wrote since, p brings: its own vector moved.)
func (n *Node) peerHoldsAll(p peer.ID, agent string) bool {
	both, ok := n.synced.Get(syncKey{p, agent})
	if !ok {
		return false
	}
	ours, err := n.store.Vector(agent)
	return err == nil && maps.Equal(ours, both)
}

// offerAware serves sync from the store; a peer syncing an agent this node
// does not hold has just offered it, so the node starts a round with that
// peer, which takes the capsule.
type offerAware struct {
	*Store
	n *Node
}

// Exchanging marks an exchange a peer started as running until end is
// called (protocol.Tracker).
func (o offerAware) Exchanging(agent, from string) (end func()) {
	p, err := peer.Decode(from)
	if err != nil {
		return func() {}
	}
	k := syncKey{p, agent}
	n := o.n
	if n.store.Holds(agent) {
		n.tendMembers(n.ctx, agent, p) // before its events come in
	}
	n.mu.Lock()
	n.responding[k]++
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		if n.responding[k]--; n.responding[k] == 0 {
			delete(n.responding, k)
		}
		n.mu.Unlock()
	}
}

// responds reports whether an exchange of agent that p started is running.
func (n *Node) responds(p peer.ID, agent string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.responding[syncKey{p, agent}] > 0
}

// Synced records what a peer that started an exchange now holds
// (protocol.Recorder).
func (o offerAware) Synced(agent, from string, both journal.Vector) {
	if p, err := peer.Decode(from); err == nil {
		o.n.recordSynced(p, agent, both)
	}
	o.n.healSoon(agent)
}

// Add stores events a peer sent in an exchange it started, and fetches
// the blobs they name.
func (o offerAware) Add(ctx context.Context, agent, from string, events []*journal.Event) error {
	added, err := o.Store.add(ctx, agent, from, events)
	if p, derr := peer.Decode(from); derr == nil {
		if len(added) > 0 {
			o.n.log.Info("caught up with a peer", "peer", o.n.peerName(p), "agent", agent, "events", len(added))
		}
		o.n.fetchFor(p, agent, added)
	}
	return err
}

func (o offerAware) Events(agent, from string) ([]*journal.Event, error) {
	evs, err := o.Store.Events(agent, from)
	if errors.Is(err, protocol.ErrNotShared) && capsule.ValidAgentID(agent) && !o.Store.Holds(agent) {
		if p, derr := peer.Decode(from); derr == nil {
			o.n.goSync(p)
		}
	}
	return evs, err
}
