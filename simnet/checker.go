package simnet

import (
	"github.com/tern-dev/tern/fencing"
)

// checker keeps the ground truth the invariants are checked against: every
// decision ever written on each node (across crashes and lost registries)
// and where each epoch was activated.
type checker struct {
	n            int
	decided      [][]fencing.Decision // node → epoch → first decision ever written
	activatedOn  []int32              // epoch → node, -1 if never
	activatedAt  []int64              // epoch → time of activation
	maxActivated uint64
}

func (c *checker) init(n int) {
	c.n = n
	c.decided = make([][]fencing.Decision, n)
}

func (c *checker) reset() {
	for i := range c.decided {
		clear(c.decided[i])
		c.decided[i] = c.decided[i][:0]
	}
	c.activatedOn = c.activatedOn[:0]
	c.activatedAt = c.activatedAt[:0]
	c.maxActivated = 0
}

func (c *checker) boot(r *Runner, h *host, rec *fencing.Record) {
	for _, d := range rec.Decisions {
		c.decide(r, h, d)
	}
}

// decide checks one decision record written on h: never a different
// decision for the same epoch on the same node, ever; each epoch activated
// on one node only, ever.
func (c *checker) decide(r *Runner, h *host, d fencing.Decided) {
	e := int(d.Epoch)
	ds := c.decided[h.idx]
	for len(ds) <= e {
		ds = append(ds, fencing.Undecided)
	}
	c.decided[h.idx] = ds
	if was := ds[e]; was != fencing.Undecided && was != d.Decision {
		r.violation("%s decided %v for epoch %d after deciding %v", h.id, d.Decision, e, was)
		return
	}
	ds[e] = d.Decision
	if d.Decision != fencing.Activated {
		return
	}
	for len(c.activatedOn) <= e {
		c.activatedOn = append(c.activatedOn, -1)
		c.activatedAt = append(c.activatedAt, 0)
	}
	if on := c.activatedOn[e]; on >= 0 && int(on) != h.idx {
		r.violation("epoch %d activated on n%d and on %s", e, on, h.id)
		return
	}
	if c.activatedOn[e] < 0 {
		c.activatedOn[e] = int32(h.idx)
		c.activatedAt[e] = r.now
	}
	c.maxActivated = max(c.maxActivated, d.Epoch)
}

// persist checks a record h is about to save against the one it holds:
// registries only move forward, decision records are never changed or
// removed.
func (c *checker) persist(r *Runner, h *host, rec *fencing.Record) {
	old := &h.saved
	switch {
	case rec.Highest < old.Highest:
		r.violation("%s's highest epoch went back from %d to %d", h.id, old.Highest, rec.Highest)
		return
	case rec.Floor < old.Floor:
		r.violation("%s's floor went back from %d to %d", h.id, old.Floor, rec.Floor)
		return
	case len(rec.Decisions) < len(old.Decisions):
		r.violation("%s removed decision records", h.id)
		return
	}
	for i, d := range old.Decisions {
		if rec.Decisions[i] != d {
			r.violation("%s changed its decision record for epoch %d from %v to %v", h.id, d.Epoch, d.Decision, rec.Decisions[i].Decision)
			return
		}
	}
	for _, d := range rec.Decisions[len(old.Decisions):] {
		c.decide(r, h, d)
	}
}

// run checks a node that starts its runtime: it has persisted activated for
// its epoch, and no newer epoch was ever activated anywhere (runs go in
// epoch order, so every fencing token only grows).
func (c *checker) run(r *Runner, h *host) {
	s := &h.saved
	x := s.Epoch
	switch {
	case s.State != fencing.Active || s.Decision(x) != fencing.Activated:
		r.violation("%s runs without a persisted activation (record %v at %d)", h.id, s.State, x)
	case x != c.maxActivated:
		r.violation("%s runs at epoch %d although epoch %d was activated", h.id, x, c.maxActivated)
	case c.activatedOn[x] != int32(h.idx):
		r.violation("%s runs epoch %d, activated on n%d", h.id, x, c.activatedOn[x])
	}
}

// check runs after every step: at most one runner. (What a step does to a
// node is checked by checkHost when the step touches it.)
func (r *Runner) check() {
	if r.runners > 1 && !r.violated {
		r.violation("%d nodes run the agent: %s", r.runners, r.describe())
	}
}

// checkHost runs whenever a step changed h: every frozen node has an
// unresolved migration; a staging area holds files only where the record
// says staging.
func (r *Runner) checkHost(h *host) {
	switch {
	case r.violated || !h.up:
	case h.stagedOK != 0 && h.saved.State != fencing.Staging:
		r.violation("%s has files in its staging area while %v", h.id, h.saved.State)
	case h.paused || h.saved.State != fencing.Frozen:
	case h.m.State() != fencing.Frozen || !h.m.Resolving():
		r.violation("%s is frozen with no migration in progress", h.id)
	}
}

// quiescent is called when no event is left and no machine waits for
// anything. It lets the operator act if the ground truth allows it
// (returning false to go on), and otherwise checks the final state: exactly
// one runner, at the newest epoch, with the latest capsule; nothing frozen;
// no staging left; every node up and with its registry.
func (r *Runner) quiescent() bool {
	if !r.healed {
		r.violation("quiescent before healing")
		return true
	}
	if r.runners != 1 && r.operate() {
		return false
	}
	if r.violated {
		return true
	}
	if r.runners != 1 {
		r.violation("%d nodes run the agent at quiescence: %s", r.runners, r.describe())
		return true
	}
	for _, h := range r.hosts {
		s := &h.saved
		switch {
		case !h.up || h.paused || h.lost:
			r.violation("%s is not back at quiescence: %s", h.id, h)
		case s.State == fencing.Frozen || s.State == fencing.Staging:
			r.violation("%s is still %v at quiescence: %s", h.id, s.State, r.describe())
		case h.stagedOK != 0:
			r.violation("%s has staging files left at quiescence", h.id)
		case s.State == fencing.Active && !h.running:
			r.violation("%s holds the agent but does not run it: %s", h.id, r.describe())
		case h.running && s.Epoch != r.chk.maxActivated:
			r.violation("%s runs epoch %d at quiescence, newest activated %d", h.id, s.Epoch, r.chk.maxActivated)
		case h.running && h.store != r.cur:
			r.violation("%s runs a capsule that is not the latest: %v, want %v", h.id, h.store, r.cur)
		}
		if r.violated {
			return true
		}
	}
	return true
}
