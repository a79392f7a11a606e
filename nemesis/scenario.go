package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"time"

	"github.com/tern-dev/tern/api"
)

// Scenarios are the trials' scenarios: seed s runs Scenarios[s %
// len(Scenarios)].
var Scenarios = []string{"cut-propose", "cut-prepare", "cut-activate", "cut-commit", "split", "pause-source", "pause-target", "appends-cut", "restore"}

// scenario runs one scenario on a cluster whose agent one node runs; it
// returns once every fault it made has ended (the heal).
type scenario func(ctx context.Context, t *trial) error

var scenarios = map[string]scenario{
	"cut-propose":  func(ctx context.Context, t *trial) error { return t.cutAt(ctx, "propose", false) },
	"cut-prepare":  func(ctx context.Context, t *trial) error { return t.cutAt(ctx, "prepare", false) },
	"cut-activate": func(ctx context.Context, t *trial) error { return t.cutAt(ctx, "activate", false) },
	"cut-commit":   func(ctx context.Context, t *trial) error { return t.cutAt(ctx, "commit", false) },
	"split": func(ctx context.Context, t *trial) error {
		return t.cutAt(ctx, []string{"propose", "prepare", "activate"}[t.rng.IntN(3)], true)
	},
	"pause-source": pauseSource,
	"pause-target": pauseTarget,
	"appends-cut":  appendsCut,
	"restore":      restore,
}

// cutHold is how long a cut lasts: many retries (5 ticks of 100 ms) of a
// source or target asking while cut, yet well short of a real node's
// abort timeout (300 ticks), so that a trial takes seconds.
const cutHold = 3 * time.Second

// moveTimeout is what a trial's migrations wait for their outcome.
const moveTimeout = 5 * time.Second

// slowDelay is the delay, with a jitter of a third of it, on the link
// between a move's source and target in the trials that cut it: a reply
// sent just before the log line that triggers the cut is still on the
// wire when the cut comes, and the frozen window is long enough to sweep.
const slowDelay = 30 * time.Millisecond

// Timing is how long the phases of a move on the slow link lasted (the
// migrate outcome's phases): from the freeze (the source's "fencing:
// frozen" line), the tail (the target takes the last events), the
// proposal, the prepare, and the activate until its reply came. The cuts
// in the proposal and the prepare are aimed with it.
type Timing struct {
	Tail, Propose, Prepare, Activate time.Duration
}

// defaultTiming is used when no calibrating move committed: about 4, 2, 2
// and 2 one-way delays of the slow link.
var defaultTiming = Timing{4 * slowDelay, 2 * slowDelay, 2 * slowDelay, 2 * slowDelay}

// timingOf is the Timing of a committed move's outcome.
func timingOf(out api.Outcome) (Timing, bool) {
	var tm Timing
	for _, p := range out.Phases {
		d := time.Duration(p.MS) * time.Millisecond
		switch p.Name {
		case "tail":
			tm.Tail = d
		case "propose":
			tm.Propose = d
		case "prepare":
			tm.Prepare = d
		case "activate":
			tm.Activate = d
		}
	}
	return tm, out.Outcome == "committed" && tm.Propose > 0 && tm.Prepare > 0 && tm.Activate > 0
}

// replyOffset is when, after the target's "fencing: activated" line, a
// cut aimed at the activate phase lands: the target logs the line as it
// sends its reply (after the promotion), so within the first half of a
// slow delay the reply is still on the wire and the cut drops it.
func replyOffset(f float64) time.Duration { return time.Duration(f * float64(slowDelay) / 2) }

// cutOffset is when, after the source's "fencing: frozen" line, a cut
// aimed at phase (propose, prepare) lands: at a seeded point between a
// tenth and nine tenths of that phase as tm measured it.
func cutOffset(tm Timing, phase string, f float64) time.Duration {
	f = 0.1 + 0.8*f
	switch phase {
	case "propose":
		return tm.Tail + time.Duration(f*float64(tm.Propose))
	case "prepare":
		return tm.Tail + tm.Propose + time.Duration(f*float64(tm.Prepare))
	}
	panic("nemesis: no phase " + phase)
}

// trial is one scenario's run: the source (the node that runs the agent
// at the start), a target and the third node.
type trial struct {
	seed          uint64 // in the text of every append, which finds it again
	c             *Cluster
	k             *checker
	rng           *rand.Rand
	src, dst, oth *Node
	timing        Timing
	log           func(format string, args ...any)
}

// moving is a migration under way.
type moving struct {
	done    chan struct{} // closed once it ended
	outcome string        // its outcome or error, once done is closed
}

// wait waits for the migration's end and returns its outcome.
func (m *moving) wait() string {
	<-m.done
	return m.outcome
}

// move starts a migration from from to to.
func (t *trial) move(ctx context.Context, from, to *Node) *moving {
	m := &moving{done: make(chan struct{})}
	go func() {
		defer close(m.done)
		out, err := from.Migrate(ctx, to, moveTimeout)
		if err != nil {
			m.outcome = "error: " + err.Error()
			return
		}
		m.outcome = strings.TrimSpace(out.Outcome + " " + out.Reason)
	}()
	return m
}

// both cuts (or heals) the two directions between a and b.
func (t *trial) both(a, b *Node, cut bool) {
	t.c.wire.Do(func(p *Plan) {
		for _, d := range []Direction{{a.I, b.I}, {b.I, a.I}} {
			if cut {
				p.Cut(d)
			} else {
				p.Heal(d)
			}
		}
	})
}

// slowLink gives the directions between a and b a delay of slowDelay
// for the trial.
func (t *trial) slowLink(a, b *Node) {
	f := t.c.opt.Faults
	f.Delay, f.Jitter = slowDelay, slowDelay/3
	t.c.wire.Do(func(p *Plan) {
		p.Set(Direction{a.I, b.I}, f)
		p.Set(Direction{b.I, a.I}, f)
	})
}

// awaitLine waits for a line containing s logged by n after mark, or for
// the move to end; it reports whether the line came.
func awaitLine(ctx context.Context, n *Node, mark int, s string, moved *moving) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-moved.done:
		case <-time.After(moveTimeout + 15*time.Second):
		case <-ctx.Done():
		}
		cancel()
	}()
	_, _, err := n.log.Await(ctx, mark, containing(s))
	return err == nil
}

// cutAt moves the agent from src to dst and cuts src from dst (and,
// unless split, the third node from both) inside phase (propose, prepare,
// activate: aimed from the source's "fencing: frozen" line by the
// cluster's Timing; commit: at a seeded offset of up to a slow one-way
// delay after the source's "fencing: commit" line), for cutHold.
func (t *trial) cutAt(ctx context.Context, phase string, split bool) error {
	t.slowLink(t.src, t.dst)
	watch, line := t.src, "fencing: frozen"
	f := t.rng.Float64()
	var offset time.Duration
	switch phase {
	case "activate":
		watch, line, offset = t.dst, "fencing: activated", replyOffset(f)
	case "commit":
		line, offset = "fencing: commit", time.Duration(f*float64(slowDelay))
	default:
		offset = cutOffset(t.timing, phase, f)
	}
	mark := watch.log.Len()
	moved := t.move(ctx, t.src, t.dst)
	reached := awaitLine(ctx, watch, mark, line, moved)
	time.Sleep(offset)
	t.both(t.src, t.dst, true)
	if !split {
		t.both(t.src, t.oth, true)
		t.both(t.dst, t.oth, true)
	}
	t.log("cut in %s: %q (reached %v) +%v", phase, line, reached, offset.Round(time.Millisecond))
	time.Sleep(cutHold)
	t.c.wire.Do(func(p *Plan) { p.HealAll() })
	t.log("move: %s", moved.wait())
	return nil
}

// pauseSource cuts the source from every node and stops it with SIGSTOP
// when the target activates (its reply to the activate still on the
// wire), moves the agent on from the target to the third node, then heals
// and wakes the source: frozen past its point of no return, it must learn
// that its move committed, from a target that no longer holds the agent.
func pauseSource(ctx context.Context, t *trial) error {
	t.slowLink(t.src, t.dst)
	mark := t.dst.log.Len()
	moved := t.move(ctx, t.src, t.dst)
	reached := awaitLine(ctx, t.dst, mark, "fencing: activated", moved)
	time.Sleep(replyOffset(t.rng.Float64()))
	t.both(t.src, t.dst, true)
	t.both(t.src, t.oth, true)
	t.src.Pause()
	defer t.src.Wake()
	t.log("cut and paused %s while the target's reply to the activate is on the wire (target activated: %v)", t.src.Name, reached)
	if reached {
		if err := waitFor(ctx, 10*time.Second, func() error {
			if !t.dst.Runs(ctx) {
				return fmt.Errorf("%s does not run the agent", t.dst.Name)
			}
			return nil
		}); err == nil {
			t.log("moved on: %s", t.move(ctx, t.dst, t.oth).wait())
		}
	}
	t.c.wire.Do(func(p *Plan) { p.HealAll() })
	t.src.Wake()
	t.log("healed and woke %s; its move: %s", t.src.Name, moved.wait())
	return nil
}

// pauseTarget stops the target with SIGSTOP once the source froze, moves
// the agent on to the third node if a node other than the target runs it,
// and wakes the target.
func pauseTarget(ctx context.Context, t *trial) error {
	mark := t.src.log.Len()
	moved := t.move(ctx, t.src, t.dst)
	reached := awaitLine(ctx, t.src, mark, "fencing: frozen", moved)
	t.dst.Pause()
	defer t.dst.Wake()
	t.log("paused %s (source froze: %v); move: %s", t.dst.Name, reached, moved.wait())
	if err := waitFor(ctx, 10*time.Second, func() error {
		if !t.src.Runs(ctx) {
			return fmt.Errorf("%s does not run the agent", t.src.Name)
		}
		return nil
	}); err == nil {
		t.log("moved on: %s", t.move(ctx, t.src, t.oth).wait())
	}
	t.dst.Wake()
	return nil
}

// appendsCut cuts the node that runs the agent from one peer for cutHold
// while appends go to it and offline edits to that peer, then heals.
func appendsCut(ctx context.Context, t *trial) error {
	t.both(t.src, t.dst, true)
	stop := time.Now().Add(cutHold)
	for i := 0; time.Now().Before(stop); i++ {
		t.append(ctx, t.dst, fmt.Sprintf("seed %d offline edit %d", t.seed, i))
		time.Sleep(100 * time.Millisecond)
	}
	t.both(t.src, t.dst, false)
	return nil
}

// restore backs up the source's home (stopped), moves the agent to the
// target, appends to the source and stops it at once, puts the backup
// back, and starts it.
func restore(ctx context.Context, t *trial) error {
	backup := t.src.Home + ".backup"
	t.src.Stop()
	if out, err := exec.CommandContext(ctx, "cp", "-a", t.src.Home, backup).CombinedOutput(); err != nil {
		return fmt.Errorf("back up %s: %v: %s", t.src.Name, err, out)
	}
	if err := t.src.Start(ctx); err != nil {
		return err
	}
	if err := waitFor(ctx, 20*time.Second, func() error {
		if !t.src.Runs(ctx) {
			return fmt.Errorf("%s does not run the agent again after its restart", t.src.Name)
		}
		return nil
	}); err != nil {
		return err
	}
	t.log("move before the restore: %s", t.move(ctx, t.src, t.dst).wait())
	// An append the source acknowledges just before it stops is on its
	// disk, which the backup is about to replace: it must be on a peer by
	// then (a stopping node hands on what changed).
	t.append(ctx, t.src, fmt.Sprintf("seed %d: an append just before the stop", t.seed))
	t.src.Stop()
	defer exec.Command("rm", "-rf", backup).Run()
	if out, err := exec.CommandContext(ctx, "rm", "-rf", t.src.Home).CombinedOutput(); err != nil {
		return fmt.Errorf("remove %s's home: %v: %s", t.src.Name, err, out)
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", backup, t.src.Home).CombinedOutput(); err != nil {
		return fmt.Errorf("restore %s's home: %v: %s", t.src.Name, err, out)
	}
	t.k.restored(t.src.I)
	t.log("restored %s's home from the backup", t.src.Name)
	return t.src.Start(ctx)
}

// append appends to n and records the acknowledgement.
func (t *trial) append(ctx context.Context, n *Node, text string) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if id, err := n.Append(ctx, text); err == nil {
		t.k.acked(ack{node: n.I, id: id, text: text})
	}
}

// containing matches a log line that contains s.
func containing(s string) func(string) bool {
	return func(line string) bool { return strings.Contains(line, s) }
}
