package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Options is a run of the nemesis.
type Options struct {
	Tern       string   // the tern binary the nodes run
	Transports []string // "tcp", "quic": a cluster each, the trials split between them
	Trials     int      // per transport
	// Seed is the first trial's: trial i of a transport runs seed Seed+i,
	// and seed s runs scenario Scenarios[s % len(Scenarios)], so that a
	// trial replays alone with its seed.
	Seed uint64
	// Scenarios, if not empty, are the only scenarios run: seed s runs
	// Scenarios[s % len(Scenarios)].
	Scenarios []string
	Dir       string   // where the clusters' homes and logs go (kept when a trial fails)
	Env       []string // for every node (TERN_FLAW=…)
	Keep      bool     // keep the homes and logs even when every trial passed
	// Report is told each trial as it ends.
	Report func(Trial)
	// Log, if not nil, is told what each trial does.
	Log func(format string, args ...any)
}

// Trial is what one trial did and found.
type Trial struct {
	Seed       uint64
	Transport  string
	Scenario   string
	Violations []string
	Doubles    int           // samples that showed two nodes running the agent
	LostAcks   int           // acknowledged appends lost or set aside
	Converged  time.Duration // from the heal until the copies were the same; 0 if they never were
	Err        error         // the trial could not be run (not a violation)
	Took       time.Duration
}

// Failed reports whether the trial found a violation or could not end.
func (t Trial) Failed() bool { return len(t.Violations) > 0 || t.Converged == 0 || t.Err != nil }

func (t Trial) String() string {
	outcome := "ok"
	switch {
	case t.Err != nil:
		outcome = "error: " + t.Err.Error()
	case len(t.Violations) > 0:
		outcome = "VIOLATION: " + strings.Join(t.Violations, "; ")
	case t.Converged == 0:
		outcome = "not converged"
	}
	conv := "never"
	if t.Converged > 0 {
		conv = t.Converged.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("seed %d %s %s: %s, converged in %s (trial %s)", t.Seed, t.Transport, t.Scenario, outcome, conv, t.Took.Round(100*time.Millisecond))
}

// Summary is what a run found: how many trials ran, saw two nodes run
// the agent at once, lost or set aside acknowledged appends (how many),
// did not converge after the heal, or could not be run.
type Summary struct {
	Trials, Doubles, LostAcks, NotConverged, Errors int
	Failed                                          int // trials that found anything
}

// Failed reports whether the run found anything.
func (s Summary) Found() bool { return s.Failed > 0 }

func (s Summary) String() string {
	return fmt.Sprintf("nemesis: %d trials, %d double runners, %d lost acks, %d not converged", s.Trials, s.Doubles, s.LostAcks, s.NotConverged)
}

// convergeWithin is how long after the heal the copies have to converge.
const convergeWithin = 60 * time.Second

// Run runs the trials, a cluster per transport, and returns what they
// found. An error means a cluster could not be run at all.
func Run(ctx context.Context, opt Options) (Summary, error) {
	var sum Summary
	if err := Available(); err != nil {
		return sum, err
	}
	names := Scenarios
	if len(opt.Scenarios) > 0 {
		names = opt.Scenarios
		for _, n := range names {
			if scenarios[n] == nil {
				return sum, fmt.Errorf("no scenario %q; the scenarios are %s", n, strings.Join(Scenarios, ", "))
			}
		}
	}
	for _, tr := range opt.Transports {
		dir := filepath.Join(opt.Dir, tr)
		f := faultsFor(opt.Seed)
		c, err := StartCluster(ctx, ClusterOptions{Tern: opt.Tern, Transport: tr, Dir: dir, Seed: opt.Seed, Faults: f, Env: opt.Env})
		if err != nil {
			return sum, fmt.Errorf("%s cluster: %w", tr, err)
		}
		k := newChecker(c)
		kctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { k.run(kctx) })
		tm := calibrate(ctx, c, opt.Log)
		for i := range opt.Trials {
			seed := opt.Seed + uint64(i)
			t := runTrial(ctx, c, k, tm, opt, tr, seed, names[seed%uint64(len(names))])
			sum.Trials++
			if t.Doubles > 0 {
				sum.Doubles++
			}
			sum.LostAcks += t.LostAcks
			if t.Converged == 0 && t.Err == nil && len(t.Violations) == 0 {
				sum.NotConverged++
			}
			if t.Failed() {
				sum.Failed++
			}
			if t.Err != nil {
				sum.Errors++
			}
			if opt.Report != nil {
				opt.Report(t)
			}
			if t.Converged == 0 && i+1 < opt.Trials {
				// A cluster that did not come to rest would fail every
				// trial after it for the same reason.
				if opt.Log != nil {
					opt.Log("%s: the cluster did not come to rest; its %d trials left are not run", tr, opt.Trials-i-1)
				}
				break
			}
			if ctx.Err() != nil {
				break
			}
		}
		stop()
		wg.Wait()
		c.Close()
		if !sum.Found() && !opt.Keep {
			os.RemoveAll(dir)
		}
	}
	return sum, nil
}

// faultsFor is the wire's faults for a run's seed: a few milliseconds of
// delay and jitter, and up to 2 % loss, duplication and reordering.
func faultsFor(seed uint64) Faults {
	rng := rand.New(rand.NewPCG(seed, 0xfa))
	return Faults{
		Delay:   time.Duration(1+rng.IntN(4)) * time.Millisecond,
		Jitter:  time.Duration(rng.IntN(4)) * time.Millisecond,
		Loss:    float64(rng.IntN(3)) / 100,
		Dup:     float64(rng.IntN(3)) / 100,
		Reorder: float64(rng.IntN(3)) / 100,
	}
}

func runTrial(ctx context.Context, c *Cluster, k *checker, tm Timing, opt Options, transport string, seed uint64, name string) Trial {
	start := time.Now()
	t := Trial{Seed: seed, Transport: transport, Scenario: name}
	rng := rand.New(rand.NewPCG(seed, 0x7e))
	logf := func(format string, args ...any) {
		if opt.Log != nil {
			opt.Log("seed %d %s %s: %s", seed, transport, name, fmt.Sprintf(format, args...))
		}
	}
	// Start from rest: one node runs the agent, the copies the same.
	if err := waitFor(ctx, convergeWithin, k.unlessViolated(func() error { return converged(ctx, c) })); err != nil {
		// What the checker saw since the trial before ended (the
		// calibrating move, for the first) is this trial's.
		t.Violations, t.Doubles, _ = k.endTrial()
		if len(t.Violations) == 0 {
			t.Err = fmt.Errorf("the cluster did not come to rest before the trial: %w", err)
		}
		t.Took = time.Since(start)
		return t
	}
	k.endTrial() // what came before belongs to the trial before
	var src *Node
	for _, n := range c.Nodes {
		if n.Runs(ctx) {
			src = n
		}
	}
	if src == nil {
		t.Err = fmt.Errorf("no node runs the agent at the start")
		t.Took = time.Since(start)
		return t
	}
	others := []*Node{}
	for _, n := range c.Nodes {
		if n != src {
			others = append(others, n)
		}
	}
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	tr := &trial{seed: seed, c: c, k: k, rng: rng, src: src, dst: others[0], oth: others[1], timing: tm, log: logf}
	// Appends go to whichever node was last seen running the agent, all
	// through the trial.
	actx, stopAppends := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; actx.Err() == nil; i++ {
			if n := k.runner(); n != nil {
				tr.append(actx, n, fmt.Sprintf("seed %d append %d", seed, i))
			}
			select {
			case <-actx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	err := scenarios[name](ctx, tr)
	// The heal: every fault ends.
	c.wire.Do(func(p *Plan) { p.HealAll(); p.setAll(c.opt.Faults) })
	for _, n := range c.Nodes {
		if n.cmd == nil {
			if serr := n.Start(ctx); serr != nil && err == nil {
				err = serr
			}
		} else {
			n.Wake()
		}
	}
	stopAppends()
	wg.Wait()
	healed := time.Now()
	if cerr := waitFor(ctx, convergeWithin, k.unlessViolated(func() error { return converged(ctx, c) })); cerr == nil {
		t.Converged = max(time.Since(healed), time.Millisecond)
	} else {
		logf("not converged: %v", cerr)
	}
	violations, doubles, acks := k.endTrial()
	t.Violations, t.Doubles = violations, doubles
	if t.Converged > 0 {
		lost, lerr := lostAcks(ctx, c, acks)
		if lerr != nil {
			t.Violations = append(t.Violations, "reading the holder's journal: "+lerr.Error())
		}
		t.LostAcks = len(lost)
		t.Violations = append(t.Violations, lost...)
	}
	logf("%d acknowledged appends", len(acks))
	t.Err = err
	t.Took = time.Since(start)
	return t
}

// calibrate moves the agent from node 0 to node 1 on the slow link and
// returns how long its phases took, which the cuts aim at; the default if
// the move did not commit. It leaves the wire as it found it.
func calibrate(ctx context.Context, c *Cluster, log func(string, ...any)) Timing {
	t := &trial{c: c}
	t.slowLink(c.Nodes[0], c.Nodes[1])
	defer c.wire.Do(func(p *Plan) { p.setAll(c.opt.Faults) })
	out, err := c.Nodes[0].Migrate(ctx, c.Nodes[1], moveTimeout)
	tm, ok := timingOf(out)
	if err != nil || !ok {
		tm = defaultTiming
	}
	if log != nil {
		log("%s: the phases of a move on the slow link: %+v, frozen %d ms (measured: %v)", c.opt.Transport, out.Phases, out.FrozenMS, ok)
	}
	return tm
}
