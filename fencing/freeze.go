package fencing

import "fmt"

// tail is a source frozen for the tail of a migration: the runtime has
// stopped and appends are refused while the caller moves what was written
// during the warm transfer, before anything is proposed. Nothing of it is
// durable: a node that restarts in the tail holds the agent active, as
// its record says, and checks with its peers before it runs again.
type tail struct {
	on     bool
	target string
	silent int // ticks since the freeze
}

// Freeze stops the agent here for the tail of a migration to target: the
// runtime stops at its next safe point (Ready.Stop) and Appends refuses
// with ErrFrozen. The caller then moves what it lacks to the target and
// goes on with Migrate, or gives up with Unfreeze. A tail that lasts
// Timing.Abort ticks is given up by the machine itself (EvAbort,
// ErrTimeout).
//
// It fails with ErrRegistryLost while relearning, ErrNotRunning if the
// agent does not run here, ErrBusy while a start is pending or another
// migration is under way, ErrUnknownPeer for a target that is not a peer.
func (m *Machine) Freeze(target string) error {
	switch {
	case m.lost:
		return fmt.Errorf("freeze %s for %s: %w", m.cfg.Agent, target, ErrRegistryLost)
	case m.tl.on || m.src.on:
		return fmt.Errorf("freeze %s for %s: a migration is under way: %w", m.cfg.Agent, target, ErrBusy)
	case !m.running || m.rec.State != Active:
		return fmt.Errorf("freeze %s for %s: %w", m.cfg.Agent, target, ErrNotRunning)
	case m.rd.Run:
		return fmt.Errorf("freeze %s for %s: apply the pending Ready first: %w", m.cfg.Agent, target, ErrBusy)
	case m.peerIndex(target) < 0:
		return fmt.Errorf("freeze %s for %s: %w", m.cfg.Agent, target, ErrUnknownPeer)
	}
	m.tl = tail{on: true, target: target}
	m.setRunning(false)
	m.event(EvFrozen, m.rec.Epoch, target, nil)
	return nil
}

// Unfreeze gives up the tail of a migration (the target could not take
// what was written meanwhile): the agent runs here again at its epoch
// (Ready.Run) and EvAbort says why. It does nothing outside the tail.
func (m *Machine) Unfreeze(why error) {
	if !m.tl.on {
		return
	}
	target := m.tl.target
	m.tl = tail{}
	m.event(EvAbort, 0, target, why)
	m.runIfMay()
}

// Tailing reports whether the agent is frozen for the tail of a migration.
func (m *Machine) Tailing() bool { return m.tl.on }

func (m *Machine) tickTail() {
	if m.tl.silent++; m.tl.silent >= m.tm.Abort {
		m.Unfreeze(fmt.Errorf("the tail of the migration took too long: %w", ErrTimeout))
	}
}

// Appends says how an append to the agent's journal is written on this
// node now: under the held epoch while the agent runs here, at epoch 0 (an
// offline edit) where it does not. While a migration has stopped the agent
// here (the tail, or frozen) it fails with ErrFrozen; while an activation
// is being completed (Ready.Promote, PromoteDone) with ErrActivating.
func (m *Machine) Appends() (epoch uint64, err error) {
	r := &m.rec
	switch {
	case m.tl.on:
		return 0, fmt.Errorf("%w to %s", ErrFrozen, m.tl.target)
	case r.State == Frozen:
		return 0, fmt.Errorf("%w to %s", ErrFrozen, r.Peer)
	case m.promoting:
		return 0, ErrActivating
	case m.running:
		return r.Epoch, nil
	}
	return 0, nil
}

// mayRun reports whether the agent may start running here: it is active
// here, its registry is known, the startup check is over, no migration has
// stopped it, and no activation is waiting for its promotion.
func (m *Machine) mayRun() bool {
	return m.rec.State == Active && !m.lost && !m.ask.on && !m.tl.on && !m.promoting
}

// runIfMay starts the runtime if the agent may run (mayRun).
func (m *Machine) runIfMay() {
	if m.mayRun() {
		m.setRunning(true)
	}
}
