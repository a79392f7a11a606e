package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/store"
)

// MemoryEvents is how many events each capsule of IdleMemory holds.
const MemoryEvents = 10

// MaxCapsules bounds IdleMemory's capsule count.
const MaxCapsules = 100_000

// MemoryResult is what IdleMemory measured. Each sample is the process's
// figures after a garbage collection, minus the same before the node
// started.
type MemoryResult struct {
	Capsules   int   `json:"capsules"`    // capsules the node holds
	Events     int   `json:"events"`      // events in them, MemoryEvents each
	EventBytes int64 `json:"event_bytes"` // their size as journals store them

	// Started is the node idle after Start, before any peer connected.
	Started MemorySample `json:"started"`
	// Synced is the node idle after one sync round with a peer, which
	// opens every capsule.
	Synced MemorySample `json:"synced"`
	// Closed is the node idle after it closed every capsule, as it does
	// for those unused for node.IdleCapsule (node.Store.CloseIdle).
	Closed MemorySample `json:"closed"`
	// RoundSeconds is how long that round took, from the peer's dial to
	// the node's last exchange: one per capsule, with nothing to move. A
	// node runs such a round with every peer on every anti-entropy tick.
	RoundSeconds float64 `json:"round_seconds"`
	// StatusSeconds is how long the node's status (tern status) took with
	// every capsule closed, and StatusOpened how many capsules it opened
	// for it: none, when it answers from what it kept of each.
	StatusSeconds float64 `json:"status_seconds"`
	StatusOpened  int64   `json:"status_opened"`
	// AlikeRoundSeconds is the round on connect with a second node that
	// holds the same capsules (nothing to move), from the dial to the
	// end of the leader's round; AlikeExchanges, the exchanges it ran.
	AlikeRoundSeconds float64 `json:"alike_round_seconds"`
	AlikeExchanges    float64 `json:"alike_exchanges"`
}

// MemorySample is one reading of the process, minus the baseline.
type MemorySample struct {
	HeapBytes  int64 `json:"heap_bytes"` // runtime.MemStats.HeapAlloc: live heap objects
	Goroutines int   `json:"goroutines"`
	OpenFiles  int   `json:"open_files"` // file descriptors; -1 where /proc/self/fd is not there
}

// IdleMemory measures the idle memory of a node holding capsules
// capsules, in this process: live heap bytes (runtime.ReadMemStats after
// runtime.GC), goroutines and open files, each minus its value before the
// node started. It reads them once the node has started, and again once
// it has run one sync round for every capsule with a peer and gone idle.
// The peer is a bare libp2p host (started before the baseline) that
// answers the sync protocol holding nothing, so what it costs is not
// counted, except its side of the one connection. Nothing else may run in
// the process meanwhile.
func IdleMemory(ctx context.Context, capsules int, opt Options) (res MemoryResult, err error) {
	if capsules < 1 || capsules > MaxCapsules {
		return res, fmt.Errorf("bench memory: %d capsules: want 1 to %d", capsules, MaxCapsules)
	}
	dir, err := opt.tempDir("memory")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if err := idleMemory(ctx, dir, capsules, &res, opt); err != nil {
		return res, fmt.Errorf("bench memory: %w", err)
	}
	return res, nil
}

func idleMemory(ctx context.Context, dir string, capsules int, res *MemoryResult, opt Options) (err error) {
	h := home(dir, 0)
	id, err := node.LoadIdentity(h)
	if err != nil {
		return err
	}
	if err := fillStore(ctx, h, id, capsules, res); err != nil {
		return err
	}
	key, err := followerKey(id.PeerID())
	if err != nil {
		return err
	}
	p, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings(opt.listen()))
	if err != nil {
		return err
	}
	defer p.Close()
	protocol.HandleSync(p, nothing{}, opt.log())

	base := sample()
	n, err := startNode(h, idleInterval, opt)
	if err != nil {
		return err
	}
	defer func() { closeAll(&err, n) }()
	if err := n.Peers().Add(node.Peer{ID: p.ID().String()}); err != nil {
		return err
	}
	res.Started = sample().minus(base)

	start := time.Now()
	// The node leads (see followerKey): it starts the round on connect.
	if err := n.Host().Connect(ctx, peer.AddrInfo{ID: p.ID(), Addrs: p.Addrs()}); err != nil {
		return err
	}
	var c syncCounters
	if err := poll(ctx, 10*time.Millisecond, func() (bool, error) {
		c, err = scrape(ctx, n)
		return c.Exchanges >= float64(capsules), err
	}); err != nil {
		return fmt.Errorf("the sync round: %w", err)
	}
	res.RoundSeconds = time.Since(start).Seconds()
	if c.Failed > 0 {
		return fmt.Errorf("%v of %d sync exchanges failed", c.Failed, capsules)
	}
	time.Sleep(idleSettle)
	res.Synced = sample().minus(base)
	if _, err := n.Store().CloseIdle(0); err != nil {
		return err
	}
	time.Sleep(idleSettle)
	res.Closed = sample().minus(base)
	opened := n.Store().Opens()
	start = time.Now()
	st, err := n.Status()
	if err != nil {
		return fmt.Errorf("the status: %w", err)
	}
	res.StatusSeconds = time.Since(start).Seconds()
	res.StatusOpened = n.Store().Opens() - opened
	if len(st.Capsules) != capsules {
		return fmt.Errorf("the status lists %d capsules, want %d", len(st.Capsules), capsules)
	}
	return alikeRound(ctx, dir, n, res, opt)
}

// alikeRound starts a second node holding a copy of n's capsules, pairs
// the two and times the round on connect, which has nothing to move.
func alikeRound(ctx context.Context, dir string, n *node.Node, res *MemoryResult, opt Options) (err error) {
	h := home(dir, 1)
	if _, err := node.LoadIdentity(h); err != nil { // its own key, made before it holds capsules
		return err
	}
	if err := node.CopyHome(filepath.Join(home(dir, 0), store.CapsulesDir), filepath.Join(h, store.CapsulesDir)); err != nil {
		return err
	}
	m, err := startNode(h, idleInterval, opt)
	if err != nil {
		return err
	}
	defer func() { closeAll(&err, m) }()
	// As a node that has run a while: it read each capsule once and
	// closed it, keeping its summary.
	if _, err := m.Status(); err != nil {
		return err
	}
	if _, err := m.Store().CloseIdle(0); err != nil {
		return err
	}
	for _, pair := range [][2]*node.Node{{n, m}, {m, n}} {
		if err := pair[0].Peers().Add(node.Peer{ID: pair[1].Info().PeerID}); err != nil {
			return err
		}
	}
	leader := n
	if m.Host().ID() < n.Host().ID() {
		leader = m
	}
	before, err := scrape(ctx, leader)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := m.Host().Connect(ctx, peer.AddrInfo{ID: n.Host().ID(), Addrs: n.Host().Addrs()}); err != nil {
		return err
	}
	var c syncCounters
	if err := poll(ctx, 2*time.Millisecond, func() (bool, error) {
		now, err := scrape(ctx, leader)
		c = now.minus(before)
		return c.Rounds >= 1, err
	}); err != nil {
		return fmt.Errorf("the round with a peer holding the same capsules: %w", err)
	}
	res.AlikeRoundSeconds = time.Since(start).Seconds()
	res.AlikeExchanges = c.Exchanges
	return nil
}

// idleSettle is how long IdleMemory lets a node stand still after its
// sync round before reading it: streams closing, goroutines ending.
const idleSettle = 250 * time.Millisecond

// fillStore creates capsules capsules of MemoryEvents events each,
// signed by id, in the store of home (store.CapsulesDir), while no node
// runs.
func fillStore(ctx context.Context, home string, id *node.Identity, capsules int, res *MemoryResult) error {
	dir := filepath.Join(home, store.CapsulesDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	jobs := make(chan int)
	errs := make(chan error, capsules)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 4 * runtime.GOMAXPROCS(0) { // fsync-bound: more workers than cores
		wg.Go(func() {
			for i := range jobs {
				evs, err := filledCapsule(ctx, dir, "new-"+strconv.Itoa(i), id)
				mu.Lock()
				res.Events += len(evs)
				res.EventBytes += eventBytes(evs)
				mu.Unlock()
				errs <- err
			}
		})
	}
	for i := range capsules {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	res.Capsules = capsules
	return nil
}

// filledCapsule creates a capsule with MemoryEvents events in the store
// folder dir, under a temporary name, then moves it to its agent id.
func filledCapsule(ctx context.Context, dir, name string, id *node.Identity) ([]*journal.Event, error) {
	tmp := filepath.Join(dir, name)
	agent, err := newCapsule(tmp, "memory", id)
	if err != nil {
		return nil, err
	}
	d, err := capsule.OpenDir(context.Background(), tmp, nil)
	if err != nil {
		return nil, err
	}
	drafts := make([]journal.Draft, MemoryEvents)
	for i := range drafts {
		drafts[i] = journal.Draft{Type: "message", Session: "bench",
			Body: []byte(`{"role":"user","content":[{"type":"text","text":"` + messageText + ` ` + strconv.Itoa(i) + `"}]}`)}
	}
	evs, err := d.Append(ctx, id, 0, drafts...)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return evs, os.Rename(tmp, filepath.Join(dir, agent))
}

// nothing is a peer's journals that hold nothing and keep nothing: the
// node sends it every event, and it costs no memory.
type nothing struct{}

func (nothing) Events(string, string) ([]*journal.Event, error)             { return nil, nil }
func (nothing) Add(context.Context, string, string, []*journal.Event) error { return nil }

// sample reads the process after a garbage collection.
func sample() MemorySample {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s := MemorySample{HeapBytes: int64(m.HeapAlloc), Goroutines: runtime.NumGoroutine(), OpenFiles: -1}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.OpenFiles = len(fds)
	}
	return s
}

func (s MemorySample) minus(base MemorySample) MemorySample {
	d := MemorySample{HeapBytes: s.HeapBytes - base.HeapBytes, Goroutines: s.Goroutines - base.Goroutines, OpenFiles: -1}
	if s.OpenFiles >= 0 && base.OpenFiles >= 0 {
		d.OpenFiles = s.OpenFiles - base.OpenFiles
	}
	return d
}

// followerKey returns a key whose peer ID sorts after leader's, so that of
// the two, leader starts the sync exchanges on connect (node.Node leads
// with the lower peer ID).
func followerKey(leader peer.ID) (crypto.PrivKey, error) {
	for {
		key, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, err
		}
		if id > leader {
			return key, nil
		}
	}
}
