package fencing

import "fmt"

// A node's registry only moves forward, so a node whose record knows less
// than the node once did has had it restored from an older copy (a home
// restored from a backup). Two things show it: a peer that knows this node
// as the holder of an epoch above its highest, or stages such an epoch
// from it (rolledBack, in relearn.go), and an event this node signed under
// an epoch its record does not hold as activated here (Signed). Either
// makes the node relearn its registry from every peer, as after a lost one.
// A restore that nothing shows (the node's newer decisions were known to
// no one else, and it signed nothing under them) stays invisible: the one
// fault epochs cannot see (docs/MIGRATION.md).

// Signed tells the machine that this node's journal holds an event it
// signed under epoch (its own chain, which its peers give back to a home
// restored from a backup). A node signs under an epoch only while it holds
// it, once it has recorded it activated; a record that does not say so
// (and has not relearnt past it: its floor) is behind, and the node
// relearns it from every peer, taking that epoch into account.
func (m *Machine) Signed(epoch uint64) {
	if epoch <= m.signed {
		return
	}
	m.signed = epoch
	r := &m.rec
	if !m.lost && (epoch > r.Highest || epoch > r.Floor && r.Decision(epoch) != Activated) {
		m.forget(fmt.Errorf("this node's journal holds an event it signed at epoch %d, which its registry does not record as activated here: the registry was restored from an older copy; relearning it: %w",
			epoch, ErrRegistryLost))
	}
}
