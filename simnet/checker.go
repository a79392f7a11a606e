package simnet

import (
	"fmt"

	"github.com/tern-dev/tern/fencing"
)

// Ledger is the ground truth the checker of every layer (the model here,
// the node layer on real node code) holds the nodes to: every decision
// each node ever wrote, across crashes and lost registries, and where and
// when each epoch was activated. Its checks return what is wrong, or nil.
// It is not safe for concurrent use.
type Ledger struct {
	names        []string
	decided      [][]fencing.Decision // node → epoch → first decision ever written
	activatedOn  []int32              // epoch → node, -1 if never
	activatedAt  []int64              // epoch → time of activation
	maxActivated uint64
}

// Reset starts a run of nodes with these names (used in what the checks
// report).
func (l *Ledger) Reset(names []string) {
	l.names = names
	for len(l.decided) < len(names) {
		l.decided = append(l.decided, nil)
	}
	l.decided = l.decided[:len(names)]
	for i := range l.decided {
		clear(l.decided[i])
		l.decided[i] = l.decided[i][:0]
	}
	l.activatedOn = l.activatedOn[:0]
	l.activatedAt = l.activatedAt[:0]
	l.maxActivated = 0
}

// Boot records the decisions of the record node starts with.
func (l *Ledger) Boot(node int, rec *fencing.Record, now int64) error {
	for _, d := range rec.Decisions {
		if err := l.Decide(node, d, now); err != nil {
			return err
		}
	}
	return nil
}

// Decide checks one decision record written on node: never a different
// decision for the same epoch on the same node, ever; each epoch activated
// on one node only, ever.
func (l *Ledger) Decide(node int, d fencing.Decided, now int64) error {
	e := int(d.Epoch)
	ds := l.decided[node]
	for len(ds) <= e {
		ds = append(ds, fencing.Undecided)
	}
	l.decided[node] = ds
	if was := ds[e]; was != fencing.Undecided && was != d.Decision {
		return fmt.Errorf("%s decided %v for epoch %d after deciding %v", l.names[node], d.Decision, e, was)
	}
	ds[e] = d.Decision
	if d.Decision != fencing.Activated {
		return nil
	}
	for len(l.activatedOn) <= e {
		l.activatedOn = append(l.activatedOn, -1)
		l.activatedAt = append(l.activatedAt, 0)
	}
	if on := l.activatedOn[e]; on >= 0 && int(on) != node {
		return fmt.Errorf("epoch %d activated on %s and on %s", e, l.names[on], l.names[node])
	}
	if l.activatedOn[e] < 0 {
		l.activatedOn[e] = int32(node)
		l.activatedAt[e] = now
	}
	l.maxActivated = max(l.maxActivated, d.Epoch)
	return nil
}

// Forget gives up what node decided before it lost its registry, when the
// operator overrides on it as fencing.Machine.OverrideLost does: those
// decisions are the ones its contract lets go (no registry left holds
// them; a peer that still knew any of those epochs would have answered
// the override's fence with it and pushed the fence above). From then on
// the node is held to what it decides anew; an epoch activated anywhere
// stays activated, so none is ever activated on two nodes, and every run
// is still at the newest activated epoch.
func (l *Ledger) Forget(node int) {
	clear(l.decided[node])
	l.decided[node] = l.decided[node][:0]
}

// Persist checks a record node is about to save against old, the one its
// registry holds: registries only move forward, decision records are
// never changed or removed. It records the new decisions.
func (l *Ledger) Persist(node int, old, rec *fencing.Record, now int64) error {
	name := l.names[node]
	switch {
	case rec.Highest < old.Highest:
		return fmt.Errorf("%s's highest epoch went back from %d to %d", name, old.Highest, rec.Highest)
	case rec.Floor < old.Floor:
		return fmt.Errorf("%s's floor went back from %d to %d", name, old.Floor, rec.Floor)
	case len(rec.Decisions) < len(old.Decisions):
		return fmt.Errorf("%s removed decision records", name)
	}
	for i, d := range old.Decisions {
		if rec.Decisions[i] != d {
			return fmt.Errorf("%s changed its decision record for epoch %d from %v to %v", name, d.Epoch, d.Decision, rec.Decisions[i].Decision)
		}
	}
	for _, d := range rec.Decisions[len(old.Decisions):] {
		if err := l.Decide(node, d, now); err != nil {
			return err
		}
	}
	return nil
}

// Run checks a node that starts running the agent under saved, the record
// its registry holds: it has persisted activated for its epoch, and no
// newer epoch was ever activated anywhere (runs go in epoch order, so
// every fencing token only grows).
func (l *Ledger) Run(node int, saved *fencing.Record) error {
	x := saved.Epoch
	name := l.names[node]
	switch {
	case saved.State != fencing.Active || saved.Decision(x) != fencing.Activated:
		return fmt.Errorf("%s runs without a persisted activation (record %v at %d)", name, saved.State, x)
	case x != l.maxActivated:
		return fmt.Errorf("%s runs at epoch %d although epoch %d was activated", name, x, l.maxActivated)
	case l.activatedOn[x] != int32(node):
		return fmt.Errorf("%s runs epoch %d, activated on %s", name, x, l.names[l.activatedOn[x]])
	}
	return nil
}

// NewestActivatedOn is the newest epoch node ever activated, whatever its
// registry has forgotten since: what its journal says (a node appends the
// holder.activated event of an epoch as it activates it).
func (l *Ledger) NewestActivatedOn(node int) uint64 {
	ds := l.decided[node]
	for e := len(ds) - 1; e > 0; e-- {
		if ds[e] == fencing.Activated {
			return uint64(e)
		}
	}
	return 0
}

// MaxActivated is the newest epoch activated anywhere.
func (l *Ledger) MaxActivated() uint64 { return l.maxActivated }

// Activated returns the node that activated epoch and when; ok is false if
// no node did.
func (l *Ledger) Activated(epoch uint64) (node int, at int64, ok bool) {
	if epoch >= uint64(len(l.activatedOn)) || l.activatedOn[epoch] < 0 {
		return 0, 0, false
	}
	return int(l.activatedOn[epoch]), l.activatedAt[epoch], true
}

// check runs after every step: at most one runner. (What a step does to a
// node is checked by checkHost when the step touches it.)
func (r *Runner) check() {
	if r.runners > 1 && !r.violated {
		r.violation("%d nodes run the agent: %s", r.runners, r.describe())
	}
}

// fail reports err, if any, as the run's violation.
func (r *Runner) fail(err error) {
	if err != nil {
		r.violation("%v", err)
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
	case h.running && h.m.Tailing():
		r.violation("%s runs the agent in the tail of a migration", h.id)
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
		case h.running && s.Epoch != r.chk.MaxActivated():
			r.violation("%s runs epoch %d at quiescence, newest activated %d", h.id, s.Epoch, r.chk.MaxActivated())
		case h.running && h.store != r.cur:
			r.violation("%s runs a capsule that is not the latest: %v, want %v", h.id, h.store, r.cur)
		}
		if r.violated {
			return true
		}
	}
	return true
}
