package nodesim

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/clock"
	"github.com/tern-dev/tern/internal/flaws"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
	tp "github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/simnet"
	"github.com/tern-dev/tern/simnet/memnet"
)

// The node layer of the simulator (docs/SIMULATION.md): real nodes — their
// stores, registries and fencing machines, the sync, blob, capsule and
// migrate protocols and gossip — on memnet, an in-memory network that
// moves only when the run delivers. The run is one goroutine inside a
// testing/synctest bubble: it delivers one message, fires one timer (every
// timeout of the nodes and their network is on the run's clock), or lets
// one goroutine a node starts or wakes go (the gate), then waits until
// every node's goroutines are blocked, checks, and picks the next; time is
// the bubble's, and passes only when everything waits for it. So one of
// the nodes' goroutines runs at a time, a seed's run is a function of the
// seed, and Result.TraceHash proves it.
//
// The faults of the model layer, on a real network: a dropped message
// closes the connection it was on (TCP and QUIC hide losses until the
// connection fails); a duplicate or replayed message is a migrate request
// sent again, soon or much later; reordering is latency, delay a long one
// (streams keep their order); a partition cuts links, a one-way fault
// drops what one node sends another; corruption flips a byte a peer sends
// of a file; a crash is kill -9 (the home as it was at that instant, the
// registry deleted if it is lost); a pause holds everything a node sends
// and receives, and wakes it stale.

// simHooks are how the simulator's layers run a node and watch it. Every
// hook may be nil; a node with simHooks serves no HTTP API (tests run it on
// memnet, in a synctest bubble, where real sockets would stall the clock).
type simHooks struct {
	gate        *simGate // goroutines wait for their turn; nil: they start at once
	driven      bool     // the simulator ticks the fencing machines and anti-entropy
	incarnation uint64   // 0: random
	flaw        flaws.Flaw
	saving      func(agent string, old, rec *fencing.Record) // before the registry saves rec
	event       func(agent string, ev fencing.Event)
	runs        func(agent string, saved fencing.Record) // the agent starts running; saved is the registry's record
	// migrateFate, in the libp2p layer, says when a fencing message goes
	// out: after each of the delays it returns (none: lost; two: sent
	// again, late).
	migrateFate func(fencing.Message) []time.Duration
}

// simGate holds the goroutines nodes start, and those they wake from a
// wait, until the run lets them go, one at a time, in the order they were
// held: with deliveries and timers one at a time too, one goroutine runs at
// a time, and what it does cannot race with another.
type simGate struct {
	mu      sync.Mutex
	waiting []chan struct{}
}

// hold returns the channel a goroutine about to start waits on.
func (g *simGate) Hold() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch := make(chan struct{})
	g.waiting = append(g.waiting, ch)
	return ch
}

// release lets the goroutine that waited longest start; false if none
// waits.
func (g *simGate) release() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) == 0 {
		return false
	}
	close(g.waiting[0])
	g.waiting = g.waiting[1:]
	return true
}

// Timing of the node layer's workload and faults.
const (
	simSyncInterval   = 5 * time.Second
	simCommandGapMin  = 2 * time.Second // between migration commands
	simCommandGapMax  = 9 * time.Second
	simMigrateTimeout = time.Minute // tern migrate --timeout
	simLatencyMax     = 3 * time.Millisecond
	simJitterUnit     = 20 * time.Millisecond
	simDelayMin       = 2 * time.Second
	simDelayMax       = 20 * time.Second
	simPartitionMin   = 3 * time.Second
	simPartitionMax   = 40 * time.Second
	simDownMin        = time.Second
	simDownMax        = 15 * time.Second
	simPauseMin       = 5 * time.Second
	simPauseMax       = 60 * time.Second
	simReplayMax      = 30 * time.Second
	simHealMargin     = 5 * time.Second
	simSettleLimit    = 3 * time.Minute // after healing, before the operator steps in
	simMaxOperator    = 4
	simMaxLost        = 2        // registries lost at once
	simHistory        = 32       // finished migrate requests kept for replays
	simFileMax        = 64 << 10 // the largest workspace file the agent writes
	// simConnFailure scales the drop rate to the rate at which a message
	// is lost for good: its connection fails. (A dropped packet is
	// retransmitted by TCP and QUIC; only a connection that fails loses
	// anything.)
	simConnFailure = 0.2
)

// NodeOutcomes are the outcomes every big batch of the node layer must
// see (simnet.Summary.Uncovered). An operator override, which the model's
// batches must see, is not among them: with real timeouts a stuck state
// is rarer, and the override is proven on real hosts instead
// (TestOperatorRetireAndResume).
var NodeOutcomes = []fencing.EventKind{fencing.EvCommit, fencing.EvAbort, fencing.EvRetireByQuery,
	fencing.EvResumeByQuery, fencing.EvStaleRefused, fencing.EvRelearned}

// NodeMigrations is the node layer's default number of migration commands
// per seed.
const NodeMigrations = 8

// RunNodeLayer runs seeds first, first+1, …, first+n-1 of the node layer
// on workers goroutines (0: one per core), each seed inside a bubble of
// its own made by in (synctest.Test in tests, simnet/bubble outside),
// its nodes' homes in a fresh folder under /dev/shm where there is one
// (fsync costs nothing there), else under the temporary folder.
func RunNodeLayer(first uint64, n int, opt simnet.Options, workers int, in func(func())) simnet.Summary {
	return simnet.RunSeeds(first, n, workers, func() func(uint64) simnet.Result {
		return func(seed uint64) simnet.Result {
			dir, err := os.MkdirTemp("/dev/shm", "tern-simnet-*")
			if err != nil {
				dir, err = os.MkdirTemp("", "tern-simnet-*")
			}
			if err != nil {
				return simnet.Result{Seed: seed, Violation: "could not run: " + err.Error()}
			}
			defer os.RemoveAll(dir)
			var res simnet.Result
			in(func() { res = SimulateNodes(seed, dir, opt) })
			return res
		}
	})
}

// SimulateNodes runs one seed of the node layer with opt in dir (a
// folder it may fill with the nodes' homes) and returns what the checker
// found. It must run inside a testing/synctest bubble: the bubble's clock
// is the nodes' clock, and synctest.Wait is how the run knows the nodes
// have done all a delivery started (simnet/bubble makes one outside go
// test).
func SimulateNodes(seed uint64, dir string, opt simnet.Options) simnet.Result {
	if opt.Nodes < 2 {
		opt.Nodes = 3
	}
	if opt.Migrations <= 0 {
		opt.Migrations = NodeMigrations
	}
	r := &simRun{opt: opt, dir: dir, trace: opt.Trace, hash: 14695981039346656037, lastDue: map[uint64]time.Time{}, protos: map[uint64]protocol.ID{}, requests: map[uint64][]byte{}}
	r.rng = rand.New(rand.NewPCG(seed, seed^0x6a09e667f3bcc909))
	r.res.Seed = seed
	r.set = simnet.DeriveSettings(r.rng, opt.Faults)
	r.res.Settings = r.set
	r.net = memnet.New(&r.clock)
	r.start = time.Now()
	defer r.shutdown()
	if err := r.boot(); err != nil {
		r.violation("boot: %v", err)
		return r.res
	}
	r.plan()
	r.loop()
	r.res.Ticks = int64(time.Since(r.start) / time.Millisecond)
	r.res.TraceHash = r.hash
	return r.res
}

// simRun is one run of the node layer.
type simRun struct {
	opt   simnet.Options
	set   simnet.Settings
	rng   *rand.Rand
	net   *memnet.Network
	clock clock.Manual // the nodes', their network's and the run's timers, which the run fires
	dir   string
	start time.Time
	nodes []*simNode
	trace io.Writer
	hash  uint64

	mu       sync.Mutex // guards what the nodes' goroutines report: ledger, res, violated
	ledger   simnet.Ledger
	res      simnet.Result
	violated bool

	gate     simGate
	pending  []*simMsg
	lastDue  map[uint64]time.Time // by flow: streams keep their order
	protos   map[uint64]protocol.ID
	requests map[uint64][]byte // migrate requests being written, by stream
	history  []simRequest
	script   []simEvent
	queue    []simEvent
	seq      uint64
	healed   bool
	healAt   time.Time
	oneWay   map[[2]int]time.Time // a→b stalls until then
	cuts     map[[2]int]int       // links cut, by how many partitions
	moves    sync.WaitGroup       // migrations, overrides and replays in progress
	active   atomic.Int32         // how many of them
	// acked is every event the workload's appends were acknowledged
	// with, in order: at rest each must be readable on every node (its
	// content, should a heal have signed it again), unless it was written
	// under an epoch that had ended.
	acked []simAcked
	// forged is every holder.activated a fault offered a node that no
	// holder handed the agent to its writer: no node may ever store one.
	forged []string
}

// simAcked is one acknowledged append of the workload: its event, and the
// text that makes its content unique.
type simAcked struct {
	node, id, text string
}

// simNode is one node of the run and what the run knows of it.
type simNode struct {
	idx    int
	name   string
	home   string
	key    crypto.PrivKey
	id     peer.ID
	addr   ma.Multiaddr
	n      *node.Node // nil while down
	dead   bool       // crashed: what it does until it is gone never happened (r.mu)
	paused bool
	lostAt time.Duration // when it last lost its registry; -1 never
	lost   bool          // its registry is lost and not yet relearnt
	saved  fencing.Record
	log    *slog.Logger
}

// simMsg is a message in flight.
type simMsg struct {
	m       *memnet.Message
	due     time.Time
	seq     uint64
	lose    bool
	corrupt bool
}

// simRequest is a migrate request a node sent, for a replay.
type simRequest struct {
	from, to peer.ID
	data     []byte
}

// simEvent is something the workload or a fault does at a time.
type simEvent struct {
	at   time.Time
	seq  uint64
	kind simKind
	node int
	arg  int
}

type simKind uint8

const (
	simCommand simKind = iota + 1
	simOffline         // an offline edit on a copy
	simPartition
	simRepair // arg: partition group
	simOneWay
	simCrash // arg 1: the registry is lost
	simRestart
	simPause
	simWake
	simReplay // arg: history index
	simHeal
	simTick  // the fencing machines' tick, on every node
	simSync  // anti-entropy, on every node
	simForge // arg 0: a stranger's holder.activated; 1: a member's without a handover
)

func (k simKind) String() string {
	return [...]string{"", "command", "offline edit", "partition", "repair", "one-way cut",
		"crash", "restart", "pause", "wake", "replay", "heal", "tick", "sync", "forged activation"}[k]
}

// boot makes the homes and keys, starts every node, pairs them all, and
// has node 0 import the agent's capsule: it holds the agent at epoch 1.
func (r *simRun) boot() error {
	names := make([]string, r.opt.Nodes)
	for i := range r.opt.Nodes {
		sn := &simNode{idx: i, name: fmt.Sprintf("n%d", i), home: filepath.Join(r.dir, fmt.Sprintf("n%d", i)), lostAt: -1}
		names[i] = sn.name
		var seed [ed25519.SeedSize]byte
		binary.LittleEndian.PutUint64(seed[:], r.rng.Uint64())
		binary.LittleEndian.PutUint64(seed[8:], uint64(i))
		key, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed[:]))
		if err != nil {
			return err
		}
		sn.key = key
		sn.id, _ = peer.IDFromPrivateKey(key)
		sn.addr = ma.StringCast(fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", i+1))
		data, err := crypto.MarshalPrivateKey(key)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(sn.home, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sn.home, node.KeyFile), data, 0o600); err != nil {
			return err
		}
		sn.log = slog.New(slog.DiscardHandler)
		if r.trace != nil {
			sn.log = slog.New(slog.NewTextHandler(&prefixWriter{r: r, sn: sn}, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
		r.nodes = append(r.nodes, sn)
	}
	r.ledger.Reset(names)
	for _, sn := range r.nodes {
		if err := r.startNode(sn); err != nil {
			return err
		}
	}
	for _, a := range r.nodes {
		for _, b := range r.nodes {
			if a != b {
				if err := a.n.Pair(node.Peer{ID: b.id.String(), Name: b.name, Addrs: []string{b.addr.String()}}); err != nil {
					return err
				}
			}
		}
	}
	src := filepath.Join(r.dir, "capsule")
	c, err := capsule.NewWithID(src, simnet.AgentID, "simulated", r.nodes[0].n.Identity())
	if err != nil {
		return err
	}
	c.Close()
	if _, _, err := r.nodes[0].n.Import(src); err != nil {
		return err
	}
	for i, a := range r.nodes {
		for _, b := range r.nodes[i+1:] {
			r.net.Connect(a.id, b.id)
		}
	}
	return nil
}

// startNode starts sn's node from its home, as `tern node` would.
func (r *simRun) startNode(sn *simNode) error {
	cfg := node.Config{NoMDNS: true, SyncInterval: simSyncInterval,
		Harness: &node.Harness{Gate: &r.gate, Clock: &r.clock, Driven: true, Incarnation: r.rng.Uint64() | 1, Flaw: r.opt.Flaw,
			Host:   func() (host.Host, error) { return r.net.AddHost(sn.key, sn.addr) },
			Saving: func(agent string, old, rec *fencing.Record) { r.saving(sn, old, rec) },
			Event:  func(_ string, ev fencing.Event) { r.event(sn, ev) },
			Runs:   func(_ string, saved fencing.Record) { r.runs(sn, saved) }}}
	r.mu.Lock()
	sn.dead = false
	r.mu.Unlock()
	n, err := node.Start(sn.home, cfg, sn.log)
	if err != nil {
		return fmt.Errorf("start %s: %w", sn.name, err)
	}
	sn.n = n
	return nil
}

// saving checks a record a node is about to save.
func (r *simRun) saving(sn *simNode, old, rec *fencing.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sn.dead {
		return
	}
	if err := r.ledger.Persist(sn.idx, old, rec, r.now()); err != nil {
		r.violationLocked("%v", err)
	}
	sn.saved = rec.Clone()
}

func (r *simRun) event(sn *simNode, ev fencing.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sn.dead {
		return
	}
	if int(ev.Kind) < len(r.res.Coverage) {
		r.res.Coverage[ev.Kind]++
	}
	if ev.Kind == fencing.EvRelearned {
		sn.lost = false
	}
}

// runs checks a node that starts running the agent.
func (r *simRun) runs(sn *simNode, saved fencing.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sn.dead {
		return
	}
	if err := r.ledger.Run(sn.idx, &saved); err != nil {
		r.violationLocked("%v", err)
	}
	r.tracefLocked("%s runs the agent at epoch %d", sn.name, saved.Epoch)
}

// now is the run's clock, in milliseconds since it began.
func (r *simRun) now() int64 { return int64(time.Since(r.start) / time.Millisecond) }

// plan scripts the workload and the faults.
func (r *simRun) plan() {
	t := r.start
	for range r.opt.Migrations {
		t = t.Add(between(r.rng, simCommandGapMin, simCommandGapMax))
		r.schedule(&r.script, t, simCommand, 0, 0)
	}
	end := t.Sub(r.start)
	r.healAt = t.Add(simHealMargin)
	r.schedule(&r.script, r.healAt, simHeal, 0, 0)
	n := len(r.nodes)
	at := func() time.Time { return r.start.Add(time.Second + time.Duration(r.rng.Int64N(int64(end)))) }
	for range r.opt.Migrations / 2 {
		r.schedule(&r.script, at(), simOffline, r.rng.IntN(n), 0)
	}
	for range r.set.Partitions {
		r.schedule(&r.script, at(), simPartition, 0, 0)
	}
	for range r.set.OneWay {
		r.schedule(&r.script, at(), simOneWay, 0, 0)
	}
	for range r.set.Crashes {
		r.schedule(&r.script, at(), simCrash, r.rng.IntN(n), 0)
	}
	for range r.set.LostRegistries {
		r.schedule(&r.script, at(), simCrash, r.rng.IntN(n), 1)
	}
	for range r.set.Pauses {
		r.schedule(&r.script, at(), simPause, r.rng.IntN(n), 0)
	}
	for k := range 2 {
		r.schedule(&r.script, at(), simForge, r.rng.IntN(n), k)
	}
	r.oneWay, r.cuts = map[[2]int]time.Time{}, map[[2]int]int{}
	r.schedule(&r.queue, r.start.Add(node.DefaultTick), simTick, 0, 0)
	r.schedule(&r.queue, r.start.Add(simSyncInterval), simSync, 0, 0)
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// schedule adds an event to q, keeping it in time order.
func (r *simRun) schedule(q *[]simEvent, at time.Time, kind simKind, node, arg int) {
	r.seq++
	e := simEvent{at: at, seq: r.seq, kind: kind, node: node, arg: arg}
	i, _ := slices.BinarySearchFunc(*q, e, func(a, b simEvent) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return int(a.seq) - int(b.seq)
	})
	*q = slices.Insert(*q, i, e)
}

// loop runs the simulation: collect what the nodes sent, check, let the
// next goroutine waiting at the gate start, deliver the next message due,
// fire the next timer due or run the next event due, or let time pass
// until one is due or a node sends something.
func (r *simRun) loop() {
	settleBy := r.healAt.Add(simSettleLimit)
	for !r.failed() {
		synctest.Wait()
		r.collect()
		r.check()
		if r.failed() {
			return
		}
		if r.gate.release() {
			continue
		}
		now := time.Now()
		if m := r.nextDue(now); m != nil {
			r.deliver(m)
			continue
		}
		if r.clock.Fire(now) {
			continue
		}
		if e, ok := r.nextEvent(now); ok {
			r.handle(e)
			continue
		}
		if r.healed {
			why := r.unsettled()
			if why == "" {
				r.finalCheck()
				return
			}
			if now.After(settleBy) {
				if !r.operate() {
					r.violation("no rest %v after healing (%s): %s", now.Sub(r.healAt).Round(time.Second), why, r.describe())
					return
				}
				settleBy = now.Add(simSettleLimit)
			}
		}
		r.sleep(now, settleBy)
	}
}

// sleep lets time pass until the next message, timer or event is due,
// settleBy, or a node sends something.
func (r *simRun) sleep(now, settleBy time.Time) {
	next := settleBy
	if !r.healed {
		next = r.healAt
	}
	for _, m := range r.pending {
		if !r.held(m) && m.due.Before(next) {
			next = m.due
		}
	}
	for _, q := range [][]simEvent{r.script, r.queue} {
		if len(q) > 0 && q[0].at.Before(next) {
			next = q[0].at
		}
	}
	if due, ok := r.clock.Next(); ok && due.Before(next) {
		next = due
	}
	if r.healed {
		// Let the nodes' timers tick the settling along, and look often.
		if limit := now.Add(simSyncInterval); limit.Before(next) {
			next = limit
		}
	}
	if !next.After(now) {
		next = now.Add(time.Millisecond)
	}
	t := time.NewTimer(next.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.net.Woken():
	}
}

// collect takes what the nodes sent and gives each message its fate: a
// due time (latency, jitter, sometimes a long delay; never before what
// precedes it on its stream), and maybe loss or corruption.
func (r *simRun) collect() {
	now := time.Now()
	for _, m := range r.net.Sent() {
		r.seq++
		pm := &simMsg{m: m, seq: r.seq}
		lat := time.Duration(r.rng.Int64N(int64(simLatencyMax))) + time.Millisecond
		if r.set.Jitter > 0 {
			lat += time.Duration(r.rng.Int64N(int64(r.set.Jitter)*int64(simJitterUnit) + 1))
		}
		if !r.healed && r.rng.Float64() < r.set.Delay {
			lat += between(r.rng, simDelayMin, simDelayMax)
		}
		pm.due = now.Add(lat)
		if until, ok := r.oneWay[[2]int{r.index(m.From), r.index(m.To)}]; ok && pm.due.Before(until) {
			pm.due = until // a dead path: TCP retransmits until it is back
		}
		if f := m.Flow(); f != 0 {
			if last := r.lastDue[f]; pm.due.Before(last) {
				pm.due = last
			}
			r.lastDue[f] = pm.due
		}
		r.note(m)
		if !r.healed {
			pm.lose = r.rng.Float64() < r.set.Drop*simConnFailure
			// A peer whose disk returns bad bytes: what it serves of a
			// blob is corrupt. (The wire itself is authenticated.)
			pm.corrupt = m.Kind == memnet.Data && r.protos[m.Stream()] == tp.BlobID && m.Flow()&1 == 0 && r.rng.Float64() < r.set.Corrupt
		}
		r.pending = append(r.pending, pm)
	}
}

// note follows streams: their protocols, and the migrate requests nodes
// send, kept for replays.
func (r *simRun) note(m *memnet.Message) {
	s := m.Stream()
	switch m.Kind {
	case memnet.Open:
		r.protos[s] = m.Proto
	case memnet.Data:
		if r.protos[s] == tp.MigrateID && m.Flow()&1 == 1 {
			r.requests[s] = append(r.requests[s], m.Data...)
		}
	case memnet.CloseWrite, memnet.Reset:
		if req, ok := r.requests[s]; ok && m.Kind == memnet.CloseWrite && m.Flow()&1 == 1 && len(req) > 0 {
			if len(r.history) == simHistory {
				r.history = r.history[1:]
			}
			r.history = append(r.history, simRequest{from: m.From, to: m.To, data: req})
			r.maybeReplay()
		}
		if m.Flow()&1 == 1 || m.Kind == memnet.Reset {
			delete(r.requests, s)
		}
	}
}

// maybeReplay schedules a duplicate (soon) or a replay (much later) of a
// migrate request.
func (r *simRun) maybeReplay() {
	if r.healed {
		return
	}
	i := len(r.history) - 1
	now := time.Now()
	if r.rng.Float64() < r.set.Duplicate {
		r.schedule(&r.queue, now.Add(time.Duration(r.rng.Int64N(int64(50*time.Millisecond)))), simReplay, 0, i)
	}
	if r.rng.Float64() < r.set.Replay {
		r.schedule(&r.queue, now.Add(between(r.rng, time.Second, simReplayMax)), simReplay, 0, r.rng.IntN(len(r.history)))
	}
}

// held reports whether m waits for a paused node: its receiver, or its
// sender unless it is news of a closed connection.
func (r *simRun) held(m *simMsg) bool {
	for _, sn := range r.nodes {
		if sn.paused && (sn.id == m.m.To || sn.id == m.m.From && !m.m.Local()) {
			return true
		}
	}
	return false
}

// nextDue removes and returns the earliest message due by now whose nodes
// are not paused (a paused node's messages wait for it).
func (r *simRun) nextDue(now time.Time) *simMsg {
	best := -1
	for i, m := range r.pending {
		if m.due.After(now) || r.held(m) {
			continue
		}
		if best < 0 || m.due.Before(r.pending[best].due) || m.due.Equal(r.pending[best].due) && m.seq < r.pending[best].seq {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	m := r.pending[best]
	r.pending = slices.Delete(r.pending, best, best+1)
	return m
}

func (r *simRun) deliver(pm *simMsg) {
	m := pm.m
	r.res.Steps++
	sum := m.Sum()
	r.mix(uint64(r.now()), uint64(m.Kind), uint64(r.index(m.From))<<8|uint64(r.index(m.To)), binary.LittleEndian.Uint64(sum[:]))
	switch {
	case pm.lose:
		r.tracef("lost %s", m)
		r.net.Lose(m)
	case pm.corrupt && len(m.Data) > 0:
		i := r.rng.IntN(len(m.Data))
		m.Data[i] ^= 1 << r.rng.IntN(8)
		r.tracef("corrupted byte %d of %s", i, m)
		r.net.Deliver(m)
	default:
		if r.trace != nil {
			r.tracef("%s", m)
		}
		r.net.Deliver(m)
	}
}

// nextEvent removes and returns the earliest scripted or queued event due
// by now.
func (r *simRun) nextEvent(now time.Time) (simEvent, bool) {
	var q *[]simEvent
	for _, c := range []*[]simEvent{&r.script, &r.queue} {
		if len(*c) == 0 || (*c)[0].at.After(now) {
			continue
		}
		if q == nil || (*c)[0].at.Before((*q)[0].at) || (*c)[0].at.Equal((*q)[0].at) && (*c)[0].seq < (*q)[0].seq {
			q = c
		}
	}
	if q == nil {
		return simEvent{}, false
	}
	e := (*q)[0]
	*q = (*q)[1:]
	return e, true
}

func (r *simRun) handle(e simEvent) {
	r.res.Steps++
	r.mix(uint64(r.now()), 1000+uint64(e.kind), uint64(e.node), uint64(e.arg))
	sn := r.nodes[e.node]
	switch e.kind {
	case simCommand:
		r.command()
	case simOffline:
		if sn.n != nil && !sn.paused && !sn.n.Runs(simnet.AgentID) {
			r.work(sn, "an offline edit")
		}
	case simPartition:
		r.partition()
	case simRepair:
		r.repair(uint64(e.arg))
	case simOneWay:
		a := r.rng.IntN(len(r.nodes))
		b := (a + 1 + r.rng.IntN(len(r.nodes)-1)) % len(r.nodes)
		until := time.Now().Add(between(r.rng, simPartitionMin, simPartitionMax))
		r.tracef("one-way cut %s→%s until t=%dms", r.nodes[a].name, r.nodes[b].name, until.Sub(r.start).Milliseconds())
		if until.After(r.oneWay[[2]int{a, b}]) {
			r.oneWay[[2]int{a, b}] = until
		}
	case simCrash:
		r.crash(sn, e.arg == 1)
	case simRestart:
		r.restart(sn)
	case simPause:
		if sn.n != nil && !sn.paused {
			r.tracef("%s pauses", sn.name)
			sn.paused = true
			r.schedule(&r.queue, time.Now().Add(between(r.rng, simPauseMin, simPauseMax)), simWake, sn.idx, 0)
		}
	case simWake:
		if sn.paused {
			r.tracef("%s wakes up", sn.name)
			sn.paused = false
		}
	case simReplay:
		r.replay(r.history[e.arg])
	case simHeal:
		r.heal()
	case simForge:
		if sn.n != nil && !sn.paused {
			r.forge(sn, e.arg == 1)
		}
	case simTick, simSync:
		// A paused node's clock stands still, as a sleeping laptop's
		// monotonic clock does.
		for _, sn := range r.nodes {
			if sn.n == nil || sn.paused {
				continue
			}
			if e.kind == simTick {
				sn.n.TickFencing()
			} else {
				sn.n.TickSync()
			}
		}
		every := node.DefaultTick
		if e.kind == simSync {
			every = simSyncInterval
		}
		r.schedule(&r.queue, e.at.Add(every), e.kind, 0, 0)
	}
}

// command is a person asking the node that runs the agent to migrate it to
// another node, at random, after the agent did some work.
func (r *simRun) command() {
	var src *simNode
	for _, sn := range r.nodes {
		if sn.n != nil && !sn.paused && sn.n.Runs(simnet.AgentID) {
			src = sn
		}
	}
	if src == nil {
		r.tracef("command: nobody runs the agent; skipped")
		return
	}
	dst := r.nodes[(src.idx+1+r.rng.IntN(len(r.nodes)-1))%len(r.nodes)]
	r.work(src, "work")
	r.tracef("command: migrate %s → %s", src.name, dst.name)
	r.res.Migrations++
	n, target := src.n, dst.id
	r.move(func() {
		ctx, cancel := clock.WithTimeout(&r.clock, n.Context(), simMigrateTimeout)
		defer cancel()
		out, err := n.Migrate(ctx, simnet.AgentID, target)
		if err != nil {
			r.tracef("migrate %s → %s refused: %v", src.name, dst.name, err)
			return
		}
		r.tracef("migrate %s → %s: %s %s", src.name, dst.name, out.Outcome, out.Reason)
	})
}

// work appends an event on sn: the agent's work where it runs, an offline
// edit on a copy. A frozen agent refuses it. Where it runs, the agent
// sometimes also changes a file of its workspace and snapshots it: new
// blobs, which peers fetch and migrations carry.
func (r *simRun) work(sn *simNode, what string) {
	text := fmt.Sprintf("%s on %s at %d (#%d)", what, sn.name, r.now(), len(r.acked))
	body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": text}}})
	evs, err := sn.n.Append(context.Background(), simnet.AgentID, []journal.Draft{{Type: "message", Session: "sim", Body: body}})
	switch {
	case errors.Is(err, node.ErrFrozen):
		r.tracef("%s on %s refused: frozen", what, sn.name)
		return
	case err != nil:
		r.tracef("%s on %s failed: %v", what, sn.name, err)
		return
	}
	r.acked = append(r.acked, simAcked{node: sn.name, id: evs[0].ID, text: text})
	if what != "work" || r.rng.IntN(3) != 0 {
		return
	}
	ws := filepath.Join(r.dir, "workspace")
	data := make([]byte, 1+r.rng.IntN(simFileMax))
	for i := range data {
		data[i] = byte(r.rng.Uint32())
	}
	name := fmt.Sprintf("file%d", r.rng.IntN(3))
	if err := os.MkdirAll(ws, 0o755); err != nil {
		r.violation("workspace: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(ws, name), data, 0o644); err != nil {
		r.violation("workspace: %v", err)
		return
	}
	err = sn.n.Store().With(simnet.AgentID, func(d *capsule.Dir) error {
		_, err := d.Snapshot(context.Background(), sn.n.Identity(), ws)
		return err
	})
	if err != nil {
		r.tracef("snapshot on %s failed: %v", sn.name, err)
	}
}

// partition cuts every link between a random group and the rest for a
// while.
func (r *simRun) partition() {
	n := len(r.nodes)
	group := uint64(1 + r.rng.IntN(1<<n-2))
	r.tracef("partition %b", group)
	r.cutGroup(group, 1)
	r.schedule(&r.queue, time.Now().Add(between(r.rng, simPartitionMin, simPartitionMax)), simRepair, 0, int(group))
}

func (r *simRun) repair(group uint64) {
	r.tracef("repair %b", group)
	r.cutGroup(group, -1)
}

// cutGroup adds d to the cut count of every link across group's border;
// a link is cut while its count is positive.
func (r *simRun) cutGroup(group uint64, d int) {
	for i, a := range r.nodes {
		for j, b := range r.nodes[i+1:] {
			j += i + 1
			if (group>>i)&1 == (group>>j)&1 {
				continue
			}
			k := [2]int{i, j}
			r.cuts[k] += d
			if r.cuts[k] > 0 {
				r.net.Cut(a.id, b.id)
			} else {
				r.net.Mend(a.id, b.id)
			}
		}
	}
}

// crash kills sn's node at this instant, as kill -9 would: its home stays
// as it is now, whatever the node does while it goes; with lose, the
// registry file is gone too. It restarts after a while.
func (r *simRun) crash(sn *simNode, lose bool) {
	if sn.n == nil {
		return
	}
	if lose {
		// At most two lost registries at once, as in the model.
		r.mu.Lock()
		lost := 0
		for _, o := range r.nodes {
			if o != sn && o.lost {
				lost++
			}
		}
		lose = lost < simMaxLost
		r.mu.Unlock()
	}
	r.tracef("%s crashes%s", sn.name, map[bool]string{true: " and loses its registry"}[lose])
	snap := sn.home + ".crash"
	if err := node.CopyHome(sn.home, snap); err != nil {
		r.violation("snapshot %s: %v", sn.name, err)
		return
	}
	r.mu.Lock()
	sn.dead = true
	r.mu.Unlock()
	r.stop(sn)
	if err := os.RemoveAll(sn.home); err != nil {
		r.violation("crash %s: %v", sn.name, err)
		return
	}
	if err := os.Rename(snap, sn.home); err != nil {
		r.violation("crash %s: %v", sn.name, err)
		return
	}
	if lose {
		os.Remove(filepath.Join(sn.home, node.RegistryFile))
		r.mu.Lock()
		sn.lost = true
		r.mu.Unlock()
		sn.lostAt = time.Since(r.start)
		sn.saved = fencing.Record{}
	}
	sn.paused = false
	if !r.healed {
		r.schedule(&r.queue, time.Now().Add(between(r.rng, simDownMin, simDownMax)), simRestart, sn.idx, 0)
	}
}

// stop takes sn's node down: off the network first, so nothing it does
// while it closes reaches anyone, and whatever it still runs ends or
// blocks before the run goes on.
func (r *simRun) stop(sn *simNode) {
	sn.n.Host().Close()
	sn.n.Close()
	sn.n = nil
	synctest.Wait()
}

func (r *simRun) restart(sn *simNode) {
	if sn.n != nil {
		return
	}
	r.tracef("%s restarts", sn.name)
	if err := r.startNode(sn); err != nil {
		r.violation("%v", err)
		return
	}
	if rec, ok, err := sn.n.SavedRecord(simnet.AgentID); err == nil && ok {
		sn.saved = rec
	}
	for _, o := range r.nodes {
		if o != sn && o.n != nil {
			r.net.Connect(sn.id, o.id)
		}
	}
}

// replay sends a migrate request again, as its sender.
func (r *simRun) replay(req simRequest) {
	from := r.nodes[r.index(req.from)]
	if from.n == nil || from.paused {
		return
	}
	r.tracef("replay a migrate request %s → %s", from.name, r.nodes[r.index(req.to)].name)
	s, err := from.n.Host().NewStream(context.Background(), req.to, tp.MigrateID)
	if err != nil {
		return
	}
	s.Write(req.data)
	s.CloseWrite()
	r.move(func() {
		io.Copy(io.Discard, s)
		s.Close()
	})
}

// heal ends every fault: links mended, crashed nodes restarted, paused
// ones woken, everyone connected.
func (r *simRun) heal() {
	r.tracef("heal")
	r.healed = true
	clear(r.oneWay)
	for i, a := range r.nodes {
		for _, b := range r.nodes[i+1:] {
			r.net.Mend(a.id, b.id)
		}
	}
	clear(r.cuts)
	r.queue = slices.DeleteFunc(r.queue, func(e simEvent) bool { return e.kind == simReplay })
	for _, sn := range r.nodes {
		sn.paused = false
		if sn.n == nil {
			r.restart(sn)
		}
	}
	for i, a := range r.nodes {
		for _, b := range r.nodes[i+1:] {
			r.net.Connect(a.id, b.id)
		}
	}
}

// check runs after every step: at most one node runs the agent.
func (r *simRun) check() {
	var runners []string
	for _, sn := range r.nodes {
		if sn.n != nil && sn.n.Runs(simnet.AgentID) {
			runners = append(runners, sn.name)
		}
	}
	if len(runners) > 1 {
		r.violation("%d nodes run the agent (%s): %s", len(runners), strings.Join(runners, ", "), r.describe())
	}
}

// unsettled says why the run has not come to rest after healing, or ""
// if it has: no message in flight, no migration or override running,
// every machine idle, no warmed workspace lingering, exactly one node
// running the agent, and every node holding the same events.
func (r *simRun) unsettled() string {
	if len(r.pending) > 0 {
		return "messages in flight"
	}
	if r.busy() {
		return "a migration or override is running"
	}
	runners := 0
	for _, sn := range r.nodes {
		if sn.n == nil {
			return sn.name + " is down"
		}
		idle, err := sn.n.FencingIdle(simnet.AgentID)
		if err != nil {
			return fmt.Sprintf("%s: %v", sn.name, err)
		}
		running := sn.n.Runs(simnet.AgentID)
		if !idle {
			return sn.name + "'s machine is busy"
		}
		if running {
			runners++
		}
		if ents, _ := os.ReadDir(filepath.Join(sn.home, node.StagingDir, simnet.AgentID)); len(ents) > 0 {
			return sn.name + " has a staging area" // a warmed workspace lingers a while
		}
	}
	if runners != 1 {
		return fmt.Sprintf("%d nodes run the agent", runners)
	}
	if !r.converged() {
		return "the nodes hold different events"
	}
	return ""
}

// busy reports whether a migration, an override or a replay is running.
func (r *simRun) busy() bool { return r.active.Load() > 0 }

// move runs f in the background, counted by busy.
func (r *simRun) move(f func()) {
	r.active.Add(1)
	r.moves.Go(func() {
		defer r.active.Add(-1)
		f()
	})
}

// converged reports whether every node holds the same events.
func (r *simRun) converged() bool {
	var first journal.Vector
	for i, sn := range r.nodes {
		v, err := sn.n.Store().Vector(simnet.AgentID)
		if err != nil {
			return false
		}
		if i == 0 {
			first = v
		} else if !maps.Equal(first, v) {
			return false
		}
	}
	return true
}

// forge offers sn, as a peer would, a holder.activated naming its writer
// the holder at an epoch above any activated: signed by a stranger's key,
// or, with member, by another node's (a member) with no handover. Every
// node must refuse it (journal.Custody), and who runs the agent must not
// change.
func (r *simRun) forge(sn *simNode, member bool) {
	var signer journal.Signer
	if member {
		other := r.nodes[(sn.idx+1)%len(r.nodes)]
		ks, err := journal.NewKeySigner(other.key)
		if err != nil {
			r.violation("forge: %v", err)
			return
		}
		signer = ks
	} else {
		var seed [ed25519.SeedSize]byte
		binary.LittleEndian.PutUint64(seed[:], r.rng.Uint64())
		key, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed[:]))
		if err == nil {
			signer, err = journal.NewKeySigner(key)
		}
		if err != nil {
			r.violation("forge: %v", err)
			return
		}
	}
	epoch := r.ledger.MaxActivated() + 100
	v, err := sn.n.Store().Vector(simnet.AgentID)
	if err != nil {
		return // the node holds no copy yet
	}
	head := v[signer.Machine()]
	body, _ := json.Marshal(journal.ActivatedBody{Holder: journal.Bound{Peer: signer.Machine(), Epoch: epoch},
		From: journal.Bound{Peer: sn.id.String(), Epoch: 1, Seq: v[sn.id.String()].Seq}})
	e, err := journal.NewEvent(signer, journal.Stamp{Seq: head.Seq + 1, Prev: head.ID, Clock: 1 << 40, Epoch: epoch, Time: time.Now()},
		journal.Draft{Type: journal.ActivatedType, Body: body})
	if err != nil {
		r.violation("forge: %v", err)
		return
	}
	r.tracef("%s is offered a forged activation at epoch %d by %s", sn.name, epoch, signer.Machine())
	r.forged = append(r.forged, e.ID)
	sn.n.Store().Add(sn.n.Context(), simnet.AgentID, "forger", []*journal.Event{e})
}

// finalCheck checks the rest the run came to: one runner at the newest
// epoch activated, holding every event; nothing frozen or staging, no
// staging area left; the runner's capsule verifies; no node holds a forged
// activation.
func (r *simRun) finalCheck() {
	for _, sn := range r.nodes {
		if evs, err := sn.n.Store().Events(simnet.AgentID, ""); err == nil {
			for _, e := range evs {
				if slices.Contains(r.forged, e.ID) {
					r.violation("%s stored a forged activation by %s at epoch %d", sn.name, e.Machine, e.Epoch)
					return
				}
			}
		}
		st, err := sn.n.HolderState(simnet.AgentID)
		if err != nil {
			r.violation("%s: %v", sn.name, err)
			return
		}
		switch {
		case st.State == "frozen" || st.State == "staging" || st.State == "unknown":
			r.violation("%s is %s at rest: %s", sn.name, st.State, r.describe())
			return
		case sn.n.Runs(simnet.AgentID) && st.Epoch != r.ledger.MaxActivated():
			r.violation("%s runs epoch %d at rest, newest activated %d", sn.name, st.Epoch, r.ledger.MaxActivated())
			return
		}
		if ents, _ := os.ReadDir(filepath.Join(sn.home, node.StagingDir, simnet.AgentID)); len(ents) > 0 {
			r.violation("%s has a staging area left at rest", sn.name)
			return
		}
		if sn.n.Runs(simnet.AgentID) {
			err := sn.n.Store().With(simnet.AgentID, func(d *capsule.Dir) error {
				rep, err := capsule.Verify(d.Path, capsule.VerifyOptions{})
				if err != nil {
					return err
				}
				if issues := rep.Issues(); len(issues) > 0 {
					return fmt.Errorf("%v", issues)
				}
				return nil
			})
			if err != nil {
				r.violation("the capsule %s runs does not verify: %v", sn.name, err)
				return
			}
		}
		if what := r.unreadAcked(sn); what != "" {
			r.violation("%s at rest: %s", sn.name, what)
			return
		}
	}
}

// unreadAcked says which acknowledged append of the workload sn does not
// read at rest ("" when it reads them all): neither the event nor a copy
// of it that a heal signed again is on the readable view, and it was not
// written under an epoch that had ended (which every node sets aside).
func (r *simRun) unreadAcked(sn *simNode) string {
	evs, err := sn.n.Store().Events(simnet.AgentID, "")
	if err != nil {
		return err.Error()
	}
	view, _ := journal.Readable(evs)
	read := make(map[string]bool, len(view))
	for _, e := range view {
		read[string(e.Body)] = true
	}
	why := journal.Quarantined(evs)
	for _, a := range r.acked {
		body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": a.text}}})
		canon, _ := journal.Canonical(body)
		if read[string(canon)] || why[a.id] == journal.AsideStaleEpoch {
			continue
		}
		if _, held := why[a.id]; held {
			return fmt.Sprintf("the append %q acknowledged on %s (%s) is not readable: %s", a.text, a.node, a.id, why[a.id])
		}
		return fmt.Sprintf("the append %q acknowledged on %s (%s) is not held", a.text, a.node, a.id)
	}
	return ""
}

// operate is the operator, called when the nodes have not settled long
// after healing. Like the model's, it acts only where the ground truth says
// a person would: a node lost its registry, and with it the decision that
// would have resolved things, so that node is gone for good as far as the
// agent goes. It returns false if it may do nothing.
func (r *simRun) operate() bool {
	if r.res.Operator >= simMaxOperator || r.busy() {
		return false
	}
	for _, sn := range r.nodes {
		if sn.n.Runs(simnet.AgentID) {
			return false // a person would see it running
		}
	}
	// Nodes that lost their registries wait for each other, and nobody
	// holds the agent: resume on the lost one whose journal is newest.
	var newest *simNode
	var newestEpoch uint64
	lost := 0
	for _, sn := range r.nodes {
		r.mu.Lock()
		l := sn.lost
		r.mu.Unlock()
		if !l {
			continue
		}
		lost++
		e, err := sn.n.NewestEpoch(simnet.AgentID)
		if err != nil {
			r.violation("%s's journal: %v", sn.name, err)
			return false
		}
		if newest == nil || e > newestEpoch {
			newest, newestEpoch = sn, e
		}
	}
	if lost >= 2 {
		r.mu.Lock()
		newest.lost = false
		r.mu.Unlock()
		return r.override(newest, nil)
	}
	// A source frozen past the point of no return, asking a target that
	// lost its decision: resume on the source.
	for _, sn := range r.nodes {
		s := &sn.saved
		if s.State != fencing.Frozen || !s.Committing {
			continue
		}
		t := r.nodes[r.indexOf(s.Peer)]
		if t.lostAt >= 0 && t.saved.Decision(s.Next) == fencing.Undecided && s.Next <= t.saved.Floor {
			return r.override(sn, t)
		}
	}
	// Nobody runs, nobody is frozen, and the node that activated last lost
	// its registry since: resume on another node.
	for _, sn := range r.nodes {
		if sn.saved.State == fencing.Frozen {
			return false
		}
	}
	on, at, ok := r.ledger.Activated(r.ledger.MaxActivated())
	if !ok {
		return false
	}
	l := r.nodes[on]
	if l.lostAt < time.Duration(at)*time.Millisecond {
		return false
	}
	for _, sn := range r.nodes {
		if sn != l && sn.saved.State != fencing.Active && sn.saved.State != fencing.Staging {
			return r.override(sn, l)
		}
	}
	return false
}

// override runs tern migrate resolve --resume on sn: gone is the node
// that lost the decisions, or nil if sn lost its registry as others did.
func (r *simRun) override(sn, gone *simNode) bool {
	r.res.Operator++
	if gone == nil {
		r.tracef("operator: resume on %s, which lost its registry as others did", sn.name)
		r.mu.Lock()
		r.ledger.Forget(sn.idx)
		r.mu.Unlock()
		r.mix(uint64(r.now()), 301, uint64(sn.idx), 0)
	} else {
		r.tracef("operator: resume on %s; %s is gone for good", sn.name, gone.name)
		r.mix(uint64(r.now()), 300, uint64(sn.idx), uint64(gone.idx))
	}
	n := sn.n
	r.move(func() {
		ctx, cancel := clock.WithTimeout(&r.clock, n.Context(), simMigrateTimeout)
		defer cancel()
		msg, err := n.Resolve(ctx, simnet.AgentID, "resume")
		r.tracef("operator on %s: %s %v", sn.name, msg, err)
	})
	return true
}

// shutdown closes every node and waits for whatever they run.
func (r *simRun) shutdown() {
	for _, sn := range r.nodes {
		if sn.n != nil {
			r.mu.Lock()
			sn.dead = true
			r.mu.Unlock()
			r.stop(sn)
		}
	}
	// Every stream still open learns that its host is gone.
	for {
		synctest.Wait()
		sent := r.net.Sent()
		if len(sent) == 0 && len(r.pending) == 0 {
			break
		}
		for _, m := range r.pending {
			r.net.Deliver(m.m)
		}
		r.pending = nil
		for _, m := range sent {
			r.net.Deliver(m)
		}
	}
	r.moves.Wait()
}

func (r *simRun) index(p peer.ID) int {
	for i, sn := range r.nodes {
		if sn.id == p {
			return i
		}
	}
	return -1
}

func (r *simRun) indexOf(machine string) int {
	for i, sn := range r.nodes {
		if sn.id.String() == machine {
			return i
		}
	}
	return 0
}

// describe summarises every node, for a violation.
func (r *simRun) describe() string {
	var parts []string
	for _, sn := range r.nodes {
		s := sn.name + ": "
		switch {
		case sn.n == nil:
			s += "down"
		default:
			st, _ := sn.n.HolderState(simnet.AgentID)
			s += fmt.Sprintf("%s at %d", st.State, st.Epoch)
			if sn.n.Runs(simnet.AgentID) {
				s += ", running"
			}
			if sn.paused {
				s += ", paused"
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func (r *simRun) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.violated
}

func (r *simRun) violation(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violationLocked(format, args...)
}

func (r *simRun) violationLocked(format string, args ...any) {
	if r.violated {
		return
	}
	r.violated = true
	r.res.Violation = fmt.Sprintf("t=%dms: ", r.now()) + fmt.Sprintf(format, args...)
	r.tracefLocked("VIOLATION %s", r.res.Violation)
}

// mix folds one step into the trace hash.
func (r *simRun) mix(a, b, c, d uint64) {
	const prime = 1099511628211
	h := r.hash
	for _, x := range [...]uint64{a, b, c, d} {
		h = (h ^ x) * prime
	}
	r.hash = h
}

func (r *simRun) tracef(format string, args ...any) {
	if r.trace == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tracefLocked(format, args...)
}

// tracefLocked writes a line of the trace. In a path, the run's folder is
// written $RUN and the random part of a temporary name (os.MkdirTemp's,
// os.CreateTemp's) *, so that the same seed gives the same trace wherever
// and however often it runs.
func (r *simRun) tracefLocked(format string, args ...any) {
	if r.trace != nil {
		line := strings.ReplaceAll(fmt.Sprintf(format, args...), r.dir, "$RUN")
		line = tempName.ReplaceAllString(line, "${1}*")
		fmt.Fprintf(r.trace, "t=%dms %s\n", r.now(), line)
	}
}

// tempName matches a temporary file or folder in the run's folder: a
// hidden name that ends in a dash and os.MkdirTemp's random digits.
var tempName = regexp.MustCompile(`(\$RUN(?:/[^/\s"]+)*/\.[^/\s"]*-)[0-9]+`)

// prefixWriter writes a node's log lines into the trace, but for those it
// writes once it is dead (a killed process writes nothing).
type prefixWriter struct {
	r  *simRun
	sn *simNode
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	if !w.sn.dead {
		w.r.tracefLocked("  %s| %s", w.sn.name, strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}
