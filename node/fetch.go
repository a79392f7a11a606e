package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
)

// PartialDir holds blobs being fetched, inside $TERN_HOME, named by their
// sha256; a transfer cut short resumes from what is there.
const PartialDir = "partial"

// fetchWanted fetches from p every blob the agent's capsule wants that p
// holds (one have query, then a fetch each), until nothing more is wanted
// or p holds none of what is left. A snapshot's files are wanted once its
// own blob has arrived, hence the rounds.
func (n *Node) fetchWanted(ctx context.Context, p peer.ID, agent string) {
	ctx = noDial(ctx)
	dir := filepath.Join(n.home, PartialDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		n.log.Warn("blob fetch", "err", err)
		return
	}
	tried := map[string]bool{}
	began, blobs, bytes := time.Now(), 0, int64(0)
	defer func() {
		if blobs > 0 {
			secs := max(time.Since(began).Seconds(), 1e-6)
			n.log.Info("received blobs from a peer", "peer", n.peerName(p), "agent", agent, "blobs", blobs,
				"bytes", bytes, "speed", fmt.Sprintf("%.1f MB/s", float64(bytes)/secs/1e6))
		}
	}()
	for ctx.Err() == nil {
		want, err := n.store.Wanted(agent)
		if err != nil {
			n.log.Warn("wanted blobs", "agent", agent, "err", err)
			return
		}
		want = slices.DeleteFunc(want, func(h string) bool { return tried[h] })
		if len(want) == 0 {
			return
		}
		held, err := protocol.PeerHas(ctx, n.host, p, agent, want)
		if err != nil {
			n.log.Debug("have query", "peer", p, "agent", agent, "err", err)
			return
		}
		for _, h := range want {
			tried[h] = true
		}
		progress := false
		for _, h := range held {
			if got, ok := n.fetchBlob(ctx, p, agent, h, filepath.Join(dir, h)); ok {
				progress = true
				blobs++
				bytes += got
			}
		}
		if !progress {
			return
		}
	}
}

// fetchFor starts fetching from p the blobs that events p just sent name.
// (Whether they are missing, the fetch finds out: asking now, after every
// batch of a long catch-up, would derive the wants again each time.)
func (n *Node) fetchFor(p peer.ID, agent string, added []*journal.Event) {
	if capsule.NamesBlobs(added) {
		n.goFetch(p, agent)
	}
}

// goFetch fetches from p, in the background, the blobs the agent's capsule
// wants (fetchWanted). At most one such fetch runs per peer and agent;
// asking again while it runs runs it once more when it ends, so a burst of
// events costs one or two have queries, and only for this agent.
func (n *Node) goFetch(p peer.ID, agent string) {
	startJob(n, &n.fetches, syncKey{p, agent}, 1, func(int) { n.fetchWanted(n.ctx, p, agent) })
}

// fetchBlob fetches the agent's blob h from p into partial and adopts
// it, and reports the bytes it received (after those a cut fetch left in
// partial) and whether the capsule holds the blob now. One fetch of a blob
// runs at a time (rounds with two peers, or SyncPeer beside a round, may
// want it at once, and there is one partial file): a second waits, then
// finds it held, or resumes from where the first stopped.
func (n *Node) fetchBlob(ctx context.Context, p peer.ID, agent, h, partial string) (int64, bool) {
	unlock, ok := n.lockFetch(ctx, h)
	if !ok {
		return 0, false
	}
	defer unlock()
	if want, err := n.store.Wanted(agent); err != nil || !slices.Contains(want, h) {
		return 0, err == nil // adopted meanwhile
	}
	track, end := n.transfers.start(Transfer{Direction: "in", Peer: p.String(), Agent: agent, Blob: h})
	got, err := protocol.Fetch(ctx, n.host, p, agent, h, partial, track)
	end()
	n.stats.blobBytes.Add(float64(got))
	if err != nil {
		n.log.Debug("blob fetch", "peer", p, "blob", h, "err", err)
		return got, false
	}
	if err := n.store.AdoptFetched(agent, h, partial); err != nil {
		n.log.Warn("blob fetched but not adopted", "blob", h, "err", err)
		return got, false
	}
	return got, true
}

// lockFetch takes the lock of the fetch named h (a blob's sha256, or
// "capsule/" and an agent id for a first copy), waiting at most until ctx
// ends (then ok is false); call unlock when done. Waiters take it in the
// order they came.
func (n *Node) lockFetch(ctx context.Context, h string) (unlock func(), ok bool) {
	unlock = func() {
		n.mu.Lock()
		l := n.fetchLocks[h]
		if len(l.waiting) == 0 {
			delete(n.fetchLocks, h)
			n.mu.Unlock()
			return
		}
		next := l.waiting[0]
		l.waiting = l.waiting[1:]
		n.mu.Unlock()
		n.wake(func() { close(next) }) // it holds the lock now
	}
	n.mu.Lock()
	l := n.fetchLocks[h]
	if l == nil {
		n.fetchLocks[h] = &fetchLock{}
		n.mu.Unlock()
		return unlock, true
	}
	turn := make(chan struct{})
	l.waiting = append(l.waiting, turn)
	n.mu.Unlock()
	select {
	case <-turn:
		return unlock, true
	case <-ctx.Done():
	}
	n.mu.Lock()
	i := slices.Index(l.waiting, turn)
	if i >= 0 {
		l.waiting = slices.Delete(l.waiting, i, i+1)
	}
	n.mu.Unlock()
	if i < 0 { // handed the lock as ctx ended
		unlock()
	}
	return nil, false
}

// fetchLock serializes the fetches of one blob or capsule: it is held
// while it is in Node.fetchLocks.
type fetchLock struct {
	waiting []chan struct{} // closed, in order, to hand the lock on; n.mu held
}
