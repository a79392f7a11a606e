package node

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sync"
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
// own blob has arrived, hence the rounds. Fetched blobs wait in partial/,
// whole and checked, and are listed in the capsule in batches (adoption):
// one manifest commit for a tree of small files, not one each.
func (n *Node) fetchWanted(ctx context.Context, p peer.ID, agent string) {
	ctx = noDial(ctx)
	dir := filepath.Join(n.home, PartialDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		n.log.Warn("blob fetch", "err", err)
		return
	}
	tried := map[string]bool{}
	retries := 0 // rounds in a row that got nowhere because fetches failed
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
		b := &adoption{n: n, agent: agent}
		want = n.takeAside(b, dir, want)
		for len(want) == 0 && len(b.paths) > 0 {
			// All were aside, a snapshot's listing among them, maybe: the
			// files it names that are aside too are adopted with it, one
			// commit instead of two.
			more, err := n.store.WantedOnceHeld(agent, b.paths)
			if err != nil {
				break
			}
			before := len(b.paths)
			n.takeAside(b, dir, more)
			if len(b.paths) == before {
				break
			}
		}
		for h := range b.paths {
			tried[h] = true
		}
		if len(want) == 0 { // all brought by offers: the snapshot's files may be wanted next
			if b.adopt(); !b.progress {
				return
			}
			continue
		}
		held, err := protocol.PeerHas(ctx, n.host, p, agent, want)
		if err != nil {
			// A peer serving its most streams, or out of the memory it
			// gives a peer's blob streams, resets the query: tried
			// again as a reset fetch is.
			b.adopt()
			n.log.Debug("have query", "peer", p, "agent", agent, "err", err)
			if retries == len(fetchRetries) || n.harnessed() || !waitToRetry(ctx, retries) {
				return
			}
			retries++
			continue
		}
		for _, h := range want {
			tried[h] = true
		}
		var busy []string
		failed := false
		take := func(f fetchedBlob) {
			switch {
			case f.held:
				b.progress = true // adopted meanwhile
			case f.unlock != nil:
				b.add(f.blob, f.path, f.size, f.unlock)
				blobs++
				bytes += f.size
			case f.busy:
				busy = append(busy, f.blob)
			case f.failed:
				delete(tried, f.blob) // again next round
				failed = true
			}
			if len(b.paths) >= adoptBlobs || b.bytes >= adoptBytes {
				b.adopt()
			}
		}
		for f := range n.fetchAll(ctx, p, agent, dir, held, fetchWorkers) {
			take(f)
		}
		// The blobs another fetch was taking: once this round's are
		// adopted (so that it holds no fetch lock), wait for each, then
		// find it held or take it on from where the other stopped.
		b.adopt()
		for _, h := range busy {
			take(n.fetchBlob(ctx, p, agent, h, filepath.Join(dir, h), true))
		}
		b.adopt()
		switch {
		case b.progress:
			retries = 0
		case !failed || retries == len(fetchRetries) || n.harnessed():
			return // (under a harness, its rounds retry on its own clock)
		default:
			// The peer reset the streams (it serves a few at a time, and
			// a busy one turns more away): a little later, not at the
			// next round, tens of seconds away.
			waitToRetry(ctx, retries)
			retries++
		}
	}
}

// waitToRetry waits fetchRetries[retries], and reports false if ctx ended
// first.
func waitToRetry(ctx context.Context, retries int) bool {
	t := time.NewTimer(fetchRetries[retries])
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fetchRetries are the waits before a round of a fetch that got nowhere,
// its fetches having failed, is tried again; then the next sync round
// tries, which may be minutes away when the node is idle. They last
// longer than pingWithin: a peer restarted after a kill -9 reaches this
// node on a new connection while libp2p may open streams on the dead one
// until closeDeadConns has closed it, and a fetch that gave up within
// that window waited for the next round (seen over QUIC: a restarted
// node's snapshot not reaching its peer within a minute).
var fetchRetries = []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, time.Second, 3 * time.Second}

// fetchWorkers is how many blobs a round fetches from one peer at once:
// with small files, each fetch is mostly a round trip and an fsync, which
// overlap. Half of what a peer serves at once (protocol.MaxBlobStreams),
// leaving room for another peer's. (One under a harness, whose replay is
// one step at a time.)
const fetchWorkers = protocol.MaxBlobStreams / 2

// fetchedBlob is what fetching one blob came to: fetched into path (the
// caller adopts it, then calls unlock), held already, busy (another fetch
// of it runs), or failed (the stream broke, or p no longer serves it).
type fetchedBlob struct {
	blob, path string
	size       int64
	held       bool
	busy       bool
	failed     bool
	unlock     func()
}

// fetchBatch is how many blobs one request asks a peer for (a stream
// each request, the blobs back to back): a tree of small files costs a
// round trip a batch, not one a file.
const fetchBatch = 64

// fetchAll fetches the blobs from p into dir, fetchBatch to a request and
// workers requests at a time, and yields each outcome.
func (n *Node) fetchAll(ctx context.Context, p peer.ID, agent, dir string, blobs []string, workers int) iter.Seq[fetchedBlob] {
	return func(yield func(fetchedBlob) bool) {
		if n.harnessed() {
			for _, h := range blobs {
				if !yield(n.fetchBlob(ctx, p, agent, h, filepath.Join(dir, h), false)) {
					return
				}
			}
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		todo, out := make(chan []string), make(chan fetchedBlob)
		var wg sync.WaitGroup
		for range min(workers, (len(blobs)+fetchBatch-1)/fetchBatch) {
			wg.Go(func() {
				for batch := range todo {
					n.fetchMany(ctx, p, agent, dir, batch, func(f fetchedBlob) { out <- f })
				}
			})
		}
		go func() {
			defer close(out)
			defer wg.Wait()
			defer close(todo)
			for batch := range slices.Chunk(blobs, fetchBatch) {
				select {
				case todo <- batch:
				case <-ctx.Done():
					return
				}
			}
		}()
		stopped := false
		for f := range out {
			if stopped {
				if f.unlock != nil {
					f.unlock() // fetched, but the caller stopped: left in partial/
				}
				continue
			}
			stopped = !yield(f)
			if stopped {
				cancel()
			}
		}
	}
}

// A batch of fetched blobs is adopted once it holds adoptBlobs blobs or
// adoptBytes bytes, and at the end of a round.
const (
	adoptBlobs = 512
	adoptBytes = 64 << 20
)

// adoption is a batch of blobs fetched for an agent and not yet listed in
// its capsule, with the fetch locks it holds until they are.
type adoption struct {
	n        *Node
	agent    string
	paths    map[string]string // blob name → its file in partial/
	bytes    int64
	unlocks  []func()
	progress bool // a blob of the round is held now
}

// add queues the fetched blob h, at path, whose fetch lock unlock frees.
func (b *adoption) add(h, path string, size int64, unlock func()) {
	if b.paths == nil {
		b.paths = map[string]string{}
	}
	b.paths[h], b.bytes = path, b.bytes+size
	b.unlocks = append(b.unlocks, unlock)
}

// adopt lists the batch in the capsule and frees its fetch locks.
func (b *adoption) adopt() {
	if len(b.paths) > 0 {
		if err := b.n.store.AdoptFetched(b.agent, b.paths); err != nil {
			b.n.log.Warn("blobs fetched but not adopted", "agent", b.agent, "blobs", len(b.paths), "err", err)
		} else {
			b.progress = true
		}
	}
	for _, unlock := range b.unlocks {
		unlock()
	}
	clear(b.paths)
	b.bytes, b.unlocks = 0, b.unlocks[:0]
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

// fetchBlob fetches the agent's blob h from p into partial, unless the
// capsule holds it already. One fetch of a blob runs at a time (rounds
// with two peers, or SyncPeer beside a round, may want it at once, and
// there is one partial file): if another runs, fetchBlob waits for it
// (then finds the blob held, or resumes from where it stopped) when wait
// is set, else reports busy. A fetch cut short leaves partial to resume
// from. The fetched blob's lock is the caller's to free once adopted.
func (n *Node) fetchBlob(ctx context.Context, p peer.ID, agent, h, partial string, wait bool) fetchedBlob {
	unlock, ok := n.tryLockFetch(h)
	if !ok && wait {
		unlock, ok = n.lockFetch(ctx, h)
		if !ok {
			return fetchedBlob{blob: h, failed: true} // ctx ended
		}
	}
	if !ok {
		return fetchedBlob{blob: h, busy: true}
	}
	if n.store.HoldsBlob(agent, "", h) {
		unlock()
		return fetchedBlob{blob: h, held: true}
	}
	return n.fetchLocked(ctx, p, agent, h, partial, unlock)
}

// fetchLocked is fetchBlob once it holds the blob's fetch lock.
func (n *Node) fetchLocked(ctx context.Context, p peer.ID, agent, h, partial string, unlock func()) fetchedBlob {
	if f, ok := n.asideCopy(h, partial, unlock); ok {
		return f
	}
	track, end := n.transfers.Start(protocol.Transfer{Direction: "in", Peer: p.String(), Agent: agent, Blob: h})
	got, err := protocol.Fetch(ctx, n.host, p, agent, h, partial, track)
	end()
	n.stats.blobBytes.Add(float64(got))
	if err != nil {
		unlock()
		n.log.Debug("blob fetch", "peer", p, "blob", h, "err", err)
		return fetchedBlob{blob: h, failed: true}
	}
	return fetchedBlob{blob: h, path: partial, size: got, unlock: unlock}
}

// fetchMany fetches the blobs of batch from p on one stream (those whose
// fetch lock it takes and that the capsule does not hold), into dir, and
// tells out each outcome, as fetchBlob would one. From a peer that serves
// one blob a request, it fetches them one by one.
func (n *Node) fetchMany(ctx context.Context, p peer.ID, agent, dir string, batch []string, out func(fetchedBlob)) {
	var ask []string
	unlocks := map[string]func(){}
	for _, h := range batch {
		unlock, ok := n.tryLockFetch(h)
		switch {
		case !ok:
			out(fetchedBlob{blob: h, busy: true})
		case n.store.HoldsBlob(agent, "", h):
			unlock()
			out(fetchedBlob{blob: h, held: true})
		default:
			if f, ok := n.asideCopy(h, filepath.Join(dir, h), unlock); ok {
				out(f)
				continue
			}
			ask = append(ask, h)
			unlocks[h] = unlock
		}
	}
	if len(ask) == 0 {
		return
	}
	partial := func(h string) string { return filepath.Join(dir, h) }
	ends := map[string]func(){}
	begin := func(h string) protocol.Progress {
		track, end := n.transfers.Start(protocol.Transfer{Direction: "in", Peer: p.String(), Agent: agent, Blob: h})
		ends[h] = end
		return track
	}
	done := func(h string, got int64, err error) {
		if end := ends[h]; end != nil {
			end()
			delete(ends, h)
		}
		n.stats.blobBytes.Add(float64(got))
		unlock := unlocks[h]
		delete(unlocks, h)
		if err != nil {
			unlock()
			n.log.Debug("blob fetch", "peer", p, "blob", h, "err", err)
			out(fetchedBlob{blob: h, failed: true})
			return
		}
		out(fetchedBlob{blob: h, path: partial(h), size: got, unlock: unlock})
	}
	_, err := protocol.FetchMany(ctx, n.host, p, agent, ask, partial, begin, done)
	for _, end := range ends {
		end()
	}
	for _, h := range ask {
		unlock, left := unlocks[h]
		switch {
		case !left:
		case errors.Is(err, protocol.ErrNoBatches):
			out(n.fetchLocked(ctx, p, agent, h, partial(h), unlock))
		default: // the peer ended early, or the stream broke: the next round asks again
			unlock()
			out(fetchedBlob{blob: h, failed: true})
		}
	}
	if err != nil && !errors.Is(err, protocol.ErrNoBatches) {
		n.log.Debug("blob fetch", "peer", p, "blobs", len(ask), "err", err)
	}
}

// tryLockFetch takes the lock of the fetch named h if no one holds it.
func (n *Node) tryLockFetch(h string) (unlock func(), ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fetchLocks[h] != nil {
		return nil, false
	}
	n.fetchLocks[h] = &fetchLock{}
	return n.unlockFetch(h), true
}

// unlockFetch returns the function that frees the lock of the fetch
// named h, handing it to its first waiter.
func (n *Node) unlockFetch(h string) func() {
	return func() {
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
}

// lockFetch takes the lock of the fetch named h (a blob's sha256, or
// "capsule/" and an agent id for a first copy), waiting at most until ctx
// ends (then ok is false); call unlock when done. Waiters take it in the
// order they came.
func (n *Node) lockFetch(ctx context.Context, h string) (unlock func(), ok bool) {
	unlock = n.unlockFetch(h)
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
