package node

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/protocol"
)

// offering is what a snapshot through the node tells its peers as it
// stores the agent's blobs (see offer).
type offering struct {
	// stored is told each blob stored, from any goroutine: it is offered.
	stored func(sha256Hex string)
	// sent sends what is left, once every blob has been stored.
	sent func()
	// end, once the snapshot has committed or failed, sends what is left
	// if sent was not called and stops serving the unlisted blobs.
	end func()
	// stream pushes a large file to the peers while it is stored (see
	// push); a peer that kept it is not offered it. Nil: nothing is pushed.
	stream func(size int64) capsule.BlobStream
}

// offer starts offering the blobs of agent a snapshot stores to the
// connected peers that share it, and marks them served before they are
// listed (store.Offering). Under a harness, nothing is offered.
func (n *Node) offer(agent string) offering {
	if n.harnessed() {
		return offering{stored: func(string) {}, sent: func() {}, end: func() {}}
	}
	serve, unserve := n.store.Offering(agent)
	kept := &pushedBlobs{to: map[peer.ID]map[string]bool{}}
	add, flush := protocol.OfferAsStored(func(blobs []string) { n.sendOffer(agent, blobs, kept.has) })
	var once sync.Once
	sent := func() { once.Do(flush) }
	return offering{
		stored: func(h string) {
			serve(h)
			add(h)
		},
		sent:   sent,
		end:    func() { sent(); unserve() },
		stream: func(size int64) capsule.BlobStream { return n.push(agent, size, kept) },
	}
}

// sendOffer names blobs to every connected peer that shares the agent, at
// once, but for those pushed (a peer that kept a blob pushed to it has it);
// a peer that fails it (an older tern) gets them once the event naming them
// reaches it.
func (n *Node) sendOffer(agent string, blobs []string, pushed func(peer.ID, string) bool) {
	var wg sync.WaitGroup
	for _, p := range n.host.Network().Peers() {
		if !n.store.Shares().Shared(agent, p.String()) {
			continue
		}
		these := slices.DeleteFunc(slices.Clone(blobs), func(h string) bool { return pushed(p, h) })
		if len(these) == 0 {
			continue
		}
		wg.Go(func() {
			if err := protocol.SendOffer(n.ctx, n.host, p, protocol.Offer{Agent: agent, Blobs: these}); err != nil {
				n.log.Debug("blob offer", "peer", p, "agent", agent, "err", err)
			}
		})
	}
	wg.Wait()
}

// wholeSuffix names a blob an offer brought, whole and checked against its
// name, in partial/: it waits there until an event names it (fetchWanted
// adopts it without asking a peer), or until the node restarts.
const wholeSuffix = ".whole"

// maxAside bounds the bytes of offered blobs kept aside at once: offers
// beyond it are left for the events that will name their blobs.
const maxAside = 1 << 30

// takeOffer fetches, in the background, the blobs p offered of an agent
// this node shares with p (held, or not yet: a new agent's first snapshot
// may be offered before the node takes its capsule), that it neither holds
// nor has aside.
func (n *Node) takeOffer(p peer.ID, o protocol.Offer) {
	if n.harnessed() || !capsule.ValidAgentID(o.Agent) || !n.store.Shares().Shared(o.Agent, p.String()) {
		return
	}
	k := syncKey{p, o.Agent}
	n.mu.Lock()
	n.offered[k] = append(n.offered[k], o.Blobs...)
	n.mu.Unlock()
	startJob(n, &n.prefetches, k, 1, func(int) { n.takeOffered(n.ctx, k) })
}

// takeOffered fetches what was offered for k until nothing is left.
func (n *Node) takeOffered(ctx context.Context, k syncKey) {
	dir := filepath.Join(n.home, PartialDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	for ctx.Err() == nil {
		n.mu.Lock()
		blobs := n.offered[k]
		delete(n.offered, k)
		n.mu.Unlock()
		held := map[string]bool{}
		for _, h := range n.store.HeldBlobs(k.agent, "", blobs) {
			held[h] = true
		}
		blobs = slices.DeleteFunc(blobs, func(h string) bool {
			_, err := os.Stat(filepath.Join(dir, h+wholeSuffix))
			return err == nil || held[h]
		})
		if len(blobs) == 0 || n.aside.Load() > maxAside {
			return
		}
		for f := range n.fetchAll(ctx, k.peer, k.agent, dir, blobs, 1) { // one stream: the fetch of what is named comes first
			if f.unlock == nil {
				continue
			}
			if os.Rename(f.path, f.path+wholeSuffix) == nil {
				n.aside.Add(f.size)
			}
			f.unlock()
		}
	}
}

// asideCopy is the blob h as an offer brought it, beside partial, if it
// did: the fetch that holds its lock (unlock) takes it from there.
func (n *Node) asideCopy(h, partial string, unlock func()) (fetchedBlob, bool) {
	st, err := os.Stat(partial + wholeSuffix)
	if err != nil {
		return fetchedBlob{}, false
	}
	n.aside.Add(-st.Size())
	return fetchedBlob{blob: h, path: partial + wholeSuffix, size: st.Size(), unlock: unlock}, true
}

// takeAside adds to b the blobs of want that an offer brought, and
// returns the rest.
func (n *Node) takeAside(b *adoption, dir string, want []string) []string {
	return slices.DeleteFunc(want, func(h string) bool {
		path := filepath.Join(dir, h+wholeSuffix)
		st, err := os.Stat(path)
		if err != nil {
			return false
		}
		unlock, ok := n.tryLockFetch(h)
		if !ok {
			return false
		}
		b.add(h, path, st.Size(), unlock)
		n.aside.Add(-st.Size())
		return true
	})
}
