package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/clock"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/store"
	"github.com/tern-dev/tern/syncpolicy"
)

// IdleCapsule is how long a capsule goes unused before the node closes
// it (see Store.CloseIdle), checked every sync interval.
const IdleCapsule = time.Minute

// antiEntropy runs the sync policy's clock: its first dials of the
// paired peers (takeOwnChain waits for them), then one tick every sync
// interval, each an anti-entropy pass (a round with every connected peer,
// a dial of the others, idle capsules closed): gossip may miss a peer,
// this never does. A peer that connects gets its round from the
// connection (see Start).
func (n *Node) antiEntropy() {
	t := time.NewTicker(n.cfg.SyncInterval)
	defer t.Stop()
	n.mu.Lock()
	n.policy.DialAll()
	rd := n.takeReady()
	n.mu.Unlock()
	var dials sync.WaitGroup
	for _, p := range rd.Dials {
		dials.Go(func() { n.dial(peer.ID(p)) }) // a peer that is down delays no other
	}
	dials.Wait()
	n.run(syncpolicy.Ready{Rounds: rd.Rounds, CloseIdle: rd.CloseIdle})
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

// syncTick is one tick of the sync policy's clock: an anti-entropy pass.
// The host's word on who is connected is the truth at each pass: a peer
// whose end of connection the node missed (a transport that does not say)
// is dialed like any other.
func (n *Node) syncTick() {
	peers := n.policyPeers()
	n.mu.Lock()
	for _, p := range peers {
		if n.policy.IsConnected(p.ID) && n.host.Network().Connectedness(peer.ID(p.ID)) != network.Connected {
			n.policy.Disconnected(p.ID)
		}
	}
	n.policy.Tick()
	n.mu.Unlock()
	n.applyPolicy()
}

// policyPeers are the paired peers as the sync policy knows them: by raw
// peer ID (whose order decides who leads), dialable if they have
// addresses.
func (n *Node) policyPeers() []syncpolicy.Peer {
	var out []syncpolicy.Peer
	for _, e := range n.peers.List() {
		if id, err := peer.Decode(e.ID); err == nil {
			out = append(out, syncpolicy.Peer{ID: string(id), Dialable: len(e.Addrs) > 0})
		}
	}
	return out
}

// peersChanged gives the sync policy the paired peers as they are now:
// the allowlist changed (Peers.changed).
func (n *Node) peersChanged() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.policy.SetPeers(n.policyPeers()); err != nil {
		n.log.Warn("sync: the paired peers were refused", "err", err)
	}
}

// repeer gives the fencing machines the paired peers as they are now (a
// pairing changed), and with dial, dials those not connected.
func (n *Node) repeer(dial bool) {
	n.holders.Repeer()
	if dial {
		n.mu.Lock()
		n.policy.DialAll()
		n.mu.Unlock()
		n.applyPolicy()
	}
}

// takeReady takes what the sync policy asks for now, copied. n.mu held.
func (n *Node) takeReady() syncpolicy.Ready {
	if !n.policy.HasReady() {
		return syncpolicy.Ready{}
	}
	rd := n.policy.Ready()
	out := syncpolicy.Ready{Rounds: slices.Clone(rd.Rounds), Dials: slices.Clone(rd.Dials), CloseIdle: rd.CloseIdle}
	n.policy.Advance()
	return out
}

// applyPolicy carries out what the sync policy asks for. n.mu not held.
func (n *Node) applyPolicy() {
	n.mu.Lock()
	rd := n.takeReady()
	n.mu.Unlock()
	n.run(rd)
}

// run carries out a Ready of the sync policy: each round and each dial in
// the background, idle capsules closed here.
func (n *Node) run(rd syncpolicy.Ready) {
	for _, r := range rd.Rounds {
		n.goRound(peer.ID(r.Peer), r.Scope)
	}
	for _, p := range rd.Dials {
		n.spawn(func() { n.dial(peer.ID(p)) })
	}
	if rd.CloseIdle {
		if _, err := n.store.CloseIdle(IdleCapsule); err != nil {
			n.log.Warn("closing idle capsules", "err", err)
		}
	}
}

// goRound runs a round of scope with p in the background and tells the
// policy when it ends. A round the policy asks for with p meanwhile (it
// coalesces them into one) runs next in the same goroutine.
func (n *Node) goRound(p peer.ID, scope syncpolicy.Scope) {
	started := n.spawn(func() {
		for scope != 0 {
			n.syncRound(n.ctx, p, scope)
			n.mu.Lock()
			n.policy.RoundDone(string(p))
			rd := n.takeReady()
			n.mu.Unlock()
			scope = 0
			if i := slices.IndexFunc(rd.Rounds, func(r syncpolicy.Round) bool { return r.Peer == string(p) }); i >= 0 {
				scope = rd.Rounds[i].Scope
				rd.Rounds = slices.Delete(rd.Rounds, i, i+1)
			}
			n.run(rd)
		}
	})
	if !started { // the node is closing: the round never runs
		n.mu.Lock()
		n.policy.RoundDone(string(p))
		n.mu.Unlock()
	}
}

// dial connects to the paired peer p, unless it is connected, and tells
// the policy how it went.
func (n *Node) dial(p peer.ID) {
	var err error
	if n.host.Network().Connectedness(p) != network.Connected {
		ai := peer.AddrInfo{ID: p}
		for _, d := range n.peers.Dialable() {
			if d.ID == p {
				ai = d
			}
		}
		ctx, cancel := clock.WithTimeout(n.clock(), n.ctx, 10*time.Second)
		if err = n.host.Connect(ctx, ai); err != nil {
			n.log.Debug("paired peer unreachable", "peer", p, "err", err)
		}
		cancel()
	}
	n.dialOutcome(p, err)
}

// connected tells the sync policy of a new connection with p: the side
// that leads runs the round of everything it calls for, the other fetches
// the blobs it wants (one exchange per capsule brings both sides up to
// date; two would send the missing events twice).
func (n *Node) connected(p peer.ID) {
	n.mu.Lock()
	n.seen[p] = time.Now()
	n.policy.Connected(string(p)) // it may have restarted from another state
	n.mu.Unlock()
	// Every agent held active here asks the peer what it knows: one that
	// knows a newer activation makes this node step down at once.
	n.spawn(func() { n.holders.Connected(p) })
	n.applyPolicy()
}

// noDial keeps the streams opened with ctx on the connections there are:
// a round or a fetch never dials. Dialing is antiEntropy's, once a sync
// interval; a peer that drops each connection at once (it did not pair
// this node, or unpaired it) would otherwise be redialed in a loop by the
// round each connection starts.
func noDial(ctx context.Context) context.Context {
	return network.WithNoDial(ctx, "sync runs on the connection it was started for")
}

// goSync asks the sync policy for a round of everything with p: p
// differs from this node (a gap in what gossip brought, a capsule it
// offers that this node lacks, a sync state that found it behind).
func (n *Node) goSync(p peer.ID) {
	n.mu.Lock()
	n.policy.Differs(string(p))
	n.mu.Unlock()
	n.applyPolicy()
}

// SyncPeer takes a copy of every capsule p shares that this node lacks,
// then runs one sync exchange with p for every capsule held, and fetches
// the blobs each one wants that p holds. It returns when they are done
// (a blob another round is fetching meanwhile is waited for).
func (n *Node) SyncPeer(ctx context.Context, p peer.ID) { n.syncRound(ctx, p, syncpolicy.Everything) }

// syncRound runs a round of scope with p: copies of the capsules it
// shares that this node lacks, an exchange of each capsule the policy
// decides to exchange, then the blobs each capsule wants that p holds.
func (n *Node) syncRound(ctx context.Context, p peer.ID, scope syncpolicy.Scope) {
	defer n.stats.rounds.Inc()
	ctx = noDial(ctx)
	var theirs map[string]string // the peer's VectorDigest of each capsule it shares
	if scope > syncpolicy.WantsOnly {
		theirs = n.takeMissing(ctx, p)
	}
	ids, err := n.store.List()
	if err != nil {
		n.log.Warn("list capsules", "err", err)
		return
	}
	for _, id := range ids {
		if scope > syncpolicy.WantsOnly && n.sameAsPeer(p, id, theirs[id]) {
			n.stats.alike.Inc() // the list's one round trip showed it: no exchange
		} else if n.decide(p, id, scope) == syncpolicy.Exchange {
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

// handOnWithin bounds how long a closing node spends handing on what it
// wrote (handOn).
const handOnWithin = 3 * time.Second

// handOn gives every connected peer, as the node closes, what it lacks of
// each capsule that changed since their last exchange (Decide's rule for a
// round of changed capsules), all peers at once, for at most
// handOnWithin. An append acknowledged just before the node stopped is
// then on a peer, not on this disk alone until the next start: gossip
// may not have sent it yet, and the disk may not come back as it was (a
// home restored from a backup, a dead disk). A harnessed node's close is a
// crash: it hands on nothing.
func (n *Node) handOn() {
	if n.harnessed() {
		return
	}
	ids, err := n.store.List()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(noDial(context.Background()), handOnWithin)
	defer cancel()
	var wg sync.WaitGroup
	for _, sp := range n.policyPeers() {
		n.mu.Lock()
		connected := n.policy.IsConnected(sp.ID)
		n.mu.Unlock()
		if !connected {
			continue
		}
		p := peer.ID(sp.ID)
		wg.Go(func() {
			for _, id := range ids {
				if n.decide(p, id, syncpolicy.ChangedOnly) == syncpolicy.Exchange {
					if _, err := n.exchange(ctx, p, id); err != nil {
						n.log.Debug("hand on", "peer", p, "agent", id, "err", err)
					}
				}
			}
		})
	}
	wg.Wait()
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
	got, _, err := n.store.ImportFrom(pr, nil)
	pr.CloseWithError(store.ErrImportEnded) // the fetch stops if the import did
	if terr := <-done; err != nil && terr != nil {
		err = terr // the stream's cut says more than the tar's end
	}
	if err != nil {
		return err
	}
	if got != id {
		return fmt.Errorf("asked the peer for capsule %s, it sent capsule %s", id, got)
	}
	if err := n.holders.Adopt(id); err != nil {
		n.log.Warn("no fencing for a capsule a peer shares", "agent", id, "err", err)
	}
	return n.gossip.join(id)
}

// decide is the policy's word on the capsule of agent in a round of
// scope with p. A capsule whose vector cannot be read is exchanged
// unless the round leaves it (the exchange then fails on it, as it should).
func (n *Node) decide(p peer.ID, agent string, scope syncpolicy.Scope) syncpolicy.Action {
	ours, err := n.store.Vector(agent)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		ours = nil // equal to no vector both held
	}
	return n.policy.Decide(string(p), agent, scope, ours)
}

// recordSynced tells the policy that p and this node both held both, a
// vector of agent, when an exchange ended.
func (n *Node) recordSynced(p peer.ID, agent string, both journal.Vector) {
	if both == nil {
		return
	}
	n.mu.Lock()
	n.policy.Exchanged(string(p), agent, both)
	n.mu.Unlock()
}

// offerAware serves sync from the store; a peer syncing an agent this node
// does not hold has just offered it, so the node starts a round with that
// peer, which takes the capsule.
type offerAware struct {
	*store.Store
	n *Node
}

// Exchanging marks an exchange a peer started as running until end is
// called (protocol.Tracker).
func (o offerAware) Exchanging(agent, from string) (end func()) {
	p, err := peer.Decode(from)
	if err != nil {
		return func() {}
	}
	n := o.n
	if n.store.Holds(agent) {
		n.tendMembers(n.ctx, agent, p) // before its events come in
	}
	n.mu.Lock()
	n.policy.ExchangeStarted(string(p), agent)
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		n.policy.ExchangeEnded(string(p), agent)
		n.mu.Unlock()
	}
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
	added, err := o.Store.AddNew(ctx, agent, from, events)
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
