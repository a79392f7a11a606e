package nodesim

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/simnet"
)

// The libp2p layer of the simulator: real nodes on go-libp2p's mocknet —
// real libp2p streams, GossipSub and connections — in real time, migrating
// an agent at random while links are cut and mended (with the partition
// fault), some of them in the middle of a move. It is not deterministic:
// libp2p's goroutines and the clock decide the interleaving, so a failing
// seed is a lead rather than a replay. Its checker is the node layer's:
// the Ledger at every registry save and every start of a run, at most one
// runner after every step, and at rest, once every link is back, exactly
// one runner at the newest epoch, nothing frozen or staging, every node
// holding the same events.

// Timing of the libp2p layer (real time).
const (
	p2pTick         = 10 * time.Millisecond // the fencing machines' tick
	p2pSyncInterval = 200 * time.Millisecond
	p2pStepGap      = 80 * time.Millisecond // at most, between steps
	p2pMoveTimeout  = 3 * time.Second
	p2pRestLimit    = 15 * time.Second
)

// RunLibp2pLayer runs seeds first, first+1, …, first+n-1 of the libp2p
// layer on workers goroutines (0: one per core), each seed's homes in a
// fresh temporary folder.
func RunLibp2pLayer(first uint64, n int, opt simnet.Options, workers int) simnet.Summary {
	return simnet.RunSeeds(first, n, workers, func() func(uint64) simnet.Result {
		return func(seed uint64) simnet.Result {
			dir, err := os.MkdirTemp("", "tern-simnet-*")
			if err != nil {
				return simnet.Result{Seed: seed, Violation: "could not run: " + err.Error()}
			}
			defer os.RemoveAll(dir)
			return SimulateLibp2p(seed, dir, opt)
		}
	})
}

// p2pRun is one run of the libp2p layer.
type p2pRun struct {
	opt   simnet.Options
	set   simnet.Settings
	rng   *rand.Rand // the workload's
	fates *rand.Rand // the messages', drawn by the nodes' goroutines under mu
	mn    mocknet.Mocknet
	nodes []*node.Node
	names []string
	start time.Time

	mu       sync.Mutex // guards what the nodes' goroutines report
	ledger   simnet.Ledger
	res      simnet.Result
	violated bool
}

// SimulateLibp2p runs one seed of the libp2p layer with opt in dir (a
// folder it may fill with the nodes' homes) and returns what the checker
// found.
func SimulateLibp2p(seed uint64, dir string, opt simnet.Options) simnet.Result {
	if opt.Nodes < 2 {
		opt.Nodes = 3
	}
	if opt.Migrations <= 0 {
		opt.Migrations = NodeMigrations
	}
	r := &p2pRun{opt: opt, rng: rand.New(rand.NewPCG(seed, seed^0xbb67ae8584caa73b)), mn: mocknet.New(), start: time.Now()}
	r.res.Seed = seed
	r.set = simnet.DeriveSettings(r.rng, opt.Faults)
	r.res.Settings = r.set
	r.fates = rand.New(rand.NewPCG(seed, 7))
	defer r.mn.Close()
	var moves sync.WaitGroup
	defer func() {
		moves.Wait()
		for _, n := range r.nodes {
			n.Close()
		}
	}()
	if err := r.boot(dir); err != nil {
		r.violation("boot: %v", err)
		return r.res
	}
	cuts := opt.Faults&(simnet.FaultPartition|simnet.FaultOneWay) != 0
	for step := range 2 * opt.Migrations {
		switch k := r.rng.IntN(10); {
		case k < 4:
			r.migrate(&moves, cuts)
		case k < 6 && cuts:
			i, j := r.rng.IntN(len(r.nodes)), r.rng.IntN(len(r.nodes))
			if i != j {
				r.cut(r.nodes[i], r.nodes[j])
			}
		case k < 7:
			r.mendAll()
		case k < 8:
			for _, n := range r.nodes {
				if n.Runs(simnet.AgentID) {
					r.work(n, step)
				}
			}
		}
		time.Sleep(time.Duration(r.rng.Int64N(int64(p2pStepGap))))
		r.res.Steps++
		if r.check(); r.failed() {
			return r.res
		}
	}
	moves.Wait()
	r.mendAll()
	r.rest()
	r.res.Ticks = time.Since(r.start).Milliseconds()
	return r.res
}

// boot starts the nodes on mocknet, pairs and links them all, and has node
// 0 import the agent's capsule: it holds the agent at epoch 1.
func (r *p2pRun) boot(dir string) error {
	for i := range r.opt.Nodes {
		var seed [ed25519.SeedSize]byte
		binary.LittleEndian.PutUint64(seed[:], r.rng.Uint64())
		key, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed[:]))
		if err != nil {
			return err
		}
		home := filepath.Join(dir, fmt.Sprintf("n%d", i))
		data, err := crypto.MarshalPrivateKey(key)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(home, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(home, node.KeyFile), data, 0o600); err != nil {
			return err
		}
		addr := ma.StringCast(fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", i+1))
		idx := i
		cfg := node.Config{NoMDNS: true, SyncInterval: p2pSyncInterval, Tick: p2pTick,
			Harness: &node.Harness{Flaw: r.opt.Flaw, MigrateFate: r.migrateFate,
				Host:   func() (host.Host, error) { return r.mn.AddPeer(key, addr) },
				Saving: func(_ string, old, rec *fencing.Record) { r.saving(idx, old, rec) },
				Event:  func(_ string, ev fencing.Event) { r.event(ev) },
				Runs:   func(_ string, saved fencing.Record) { r.runs(idx, saved) }}}
		n, err := node.Start(home, cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		r.nodes = append(r.nodes, n)
		r.names = append(r.names, fmt.Sprintf("n%d", i))
	}
	r.ledger.Reset(r.names)
	for _, a := range r.nodes {
		for j, b := range r.nodes {
			if a != b {
				if err := a.Pair(node.Peer{ID: b.Host().ID().String(), Name: r.names[j], Addrs: []string{b.Host().Addrs()[0].String()}}); err != nil {
					return err
				}
			}
		}
	}
	if err := r.mn.LinkAll(); err != nil {
		return err
	}
	if err := r.mn.ConnectAllButSelf(); err != nil {
		return err
	}
	src := filepath.Join(dir, "capsule")
	c, err := capsule.NewWithID(src, simnet.AgentID, "simulated", r.nodes[0].Identity())
	if err != nil {
		return err
	}
	c.Close()
	if _, _, err := r.nodes[0].Import(src); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); !r.nodes[0].Runs(simnet.AgentID); {
		if time.Now().After(deadline) {
			return fmt.Errorf("n0 does not run the agent it created")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// migrateFate decides when a fencing message goes out, at the run's
// rates: lost, held back (a late message), or sent twice, the second time
// late (a duplicate, or a replay much later).
func (r *p2pRun) migrateFate(fencing.Message) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	late := func() time.Duration { return time.Duration(r.fates.Int64N(int64(p2pMoveTimeout))) }
	switch x := r.fates.Float64(); {
	case x < r.set.Drop:
		return nil
	case x < r.set.Drop+r.set.Delay*4:
		return []time.Duration{late()}
	case x < r.set.Drop+r.set.Delay*4+r.set.Duplicate+r.set.Replay:
		return []time.Duration{0, late()}
	}
	return []time.Duration{0}
}

func (r *p2pRun) saving(node int, old, rec *fencing.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ledger.Persist(node, old, rec, time.Since(r.start).Milliseconds()); err != nil {
		r.violationLocked("%v", err)
	}
}

func (r *p2pRun) event(ev fencing.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if int(ev.Kind) < len(r.res.Coverage) {
		r.res.Coverage[ev.Kind]++
	}
}

func (r *p2pRun) runs(node int, saved fencing.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ledger.Run(node, &saved); err != nil {
		r.violationLocked("%v", err)
	}
}

// migrate moves the agent from whoever runs it to another node, in the
// background; with cuts, sometimes the link between them goes down in the
// middle of the move for a while.
func (r *p2pRun) migrate(moves *sync.WaitGroup, cuts bool) {
	from := -1
	for i, n := range r.nodes {
		if n.Runs(simnet.AgentID) {
			from = i
		}
	}
	if from < 0 {
		return
	}
	to := (from + 1 + r.rng.IntN(len(r.nodes)-1)) % len(r.nodes)
	a, b := r.nodes[from], r.nodes[to]
	r.work(a, -1)
	r.res.Migrations++
	if cuts && r.rng.IntN(2) == 0 {
		cutAfter := time.Duration(r.rng.IntN(15)) * time.Millisecond
		mendAfter := time.Duration(r.rng.IntN(400)) * time.Millisecond
		moves.Go(func() {
			time.Sleep(cutAfter)
			r.cut(a, b)
			time.Sleep(mendAfter)
			r.mn.LinkPeers(a.Host().ID(), b.Host().ID())
			r.mn.ConnectPeers(a.Host().ID(), b.Host().ID())
		})
	}
	moves.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), p2pMoveTimeout)
		defer cancel()
		a.Migrate(ctx, simnet.AgentID, b.Host().ID())
	})
}

// work appends an event where the agent runs: what it did before a move.
func (r *p2pRun) work(n *node.Node, step int) {
	body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": fmt.Sprint("step ", step)}}})
	n.Append(context.Background(), simnet.AgentID, []journal.Draft{{Type: "message", Session: "sim", Body: body}})
}

func (r *p2pRun) cut(a, b *node.Node) {
	r.mn.UnlinkPeers(a.Host().ID(), b.Host().ID())
	a.Host().Network().ClosePeer(b.Host().ID())
	b.Host().Network().ClosePeer(a.Host().ID())
}

func (r *p2pRun) mendAll() {
	r.mn.LinkAll()
	r.mn.ConnectAllButSelf()
}

// check runs after every step: at most one node runs the agent.
func (r *p2pRun) check() {
	var runners []string
	for i, n := range r.nodes {
		if n.Runs(simnet.AgentID) {
			runners = append(runners, r.names[i])
		}
	}
	if len(runners) > 1 {
		r.violation("%d nodes run the agent (%s): %s", len(runners), strings.Join(runners, ", "), r.describe())
	}
}

// rest waits for the nodes to come to rest and checks where they did: one
// runner at the newest epoch activated, nothing frozen or staging, every
// node holding the same events.
func (r *p2pRun) rest() {
	deadline := time.Now().Add(p2pRestLimit)
	for {
		if r.check(); r.failed() {
			return
		}
		why := r.unsettled()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			r.violation("no rest %v after every link came back (%s): %s", p2pRestLimit, why, r.describe())
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *p2pRun) unsettled() string {
	runners := 0
	var first journal.Vector
	for i, n := range r.nodes {
		st, err := n.HolderState(simnet.AgentID)
		if err != nil {
			return fmt.Sprintf("%s: %v", r.names[i], err)
		}
		if st.State == "frozen" || st.State == "staging" || st.State == "unknown" {
			return r.names[i] + " is " + st.State
		}
		if n.Runs(simnet.AgentID) {
			runners++
			r.mu.Lock()
			newest := r.ledger.MaxActivated()
			r.mu.Unlock()
			if st.Epoch != newest {
				return fmt.Sprintf("%s runs epoch %d, newest activated %d", r.names[i], st.Epoch, newest)
			}
		}
		v, err := n.Store().Vector(simnet.AgentID)
		if err != nil {
			return fmt.Sprintf("%s: %v", r.names[i], err)
		}
		if i == 0 {
			first = v
		} else if !maps.Equal(first, v) {
			return "the nodes hold different events"
		}
	}
	if runners != 1 {
		return fmt.Sprintf("%d nodes run the agent", runners)
	}
	return ""
}

func (r *p2pRun) describe() string {
	var parts []string
	for i, n := range r.nodes {
		st, _ := n.HolderState(simnet.AgentID)
		s := fmt.Sprintf("%s: %s at %d", r.names[i], st.State, st.Epoch)
		if n.Runs(simnet.AgentID) {
			s += ", running"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func (r *p2pRun) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.violated
}

func (r *p2pRun) violation(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violationLocked(format, args...)
}

func (r *p2pRun) violationLocked(format string, args ...any) {
	if !r.violated {
		r.violated = true
		r.res.Violation = fmt.Sprintf("t=%dms: ", time.Since(r.start).Milliseconds()) + fmt.Sprintf(format, args...)
	}
}
