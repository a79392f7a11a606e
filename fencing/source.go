package fencing

import (
	"fmt"

	"github.com/tern-dev/tern/internal/flaws"
)

// migration is the volatile side of a frozen source.
type migration struct {
	on         bool
	committing bool   // past the point of no return: only the decision resolves it
	proposing  bool   // no accept yet
	files      []File // what the proposal moves (nil after a restart)
	silent     int    // ticks since the target last answered
	retryIn    int
	starting   bool // the target refused only because it was still asking its peers
	renumbered bool // proposed again under a newer epoch after a stale refusal
}

// Migrate proposes the agent to target: the record becomes frozen at the
// held epoch with the next epoch proposed, and the proposal goes out after
// it is persisted. It follows Freeze and the tail (the agent frozen for
// target already); called on a running agent, it freezes it first. files
// is everything the target must hold (the capsule's files with their
// hashes); the slice must not be modified afterwards. The outcome arrives
// as an event: EvCommit or EvRetireByQuery (retired), EvAbort or
// EvResumeByQuery (running again at the same epoch).
//
// It fails with ErrNotRunning if the agent does not run here, ErrBusy if a
// Ready with a pending start is not yet applied or the tail is for another
// target, ErrUnknownPeer for a target that is not a peer.
func (m *Machine) Migrate(target string, files []File) error {
	frozen := m.tl.on && m.tl.target == target
	switch {
	case m.lost:
		return fmt.Errorf("migrate %s to %s: %w", m.cfg.Agent, target, ErrRegistryLost)
	case m.tl.on && !frozen:
		return fmt.Errorf("migrate %s to %s: frozen for %s: %w", m.cfg.Agent, target, m.tl.target, ErrBusy)
	case m.rec.State != Active || !frozen && !m.running:
		return fmt.Errorf("migrate %s to %s: %w", m.cfg.Agent, target, ErrNotRunning)
	case m.rd.Run:
		return fmt.Errorf("migrate %s to %s: apply the pending Ready first: %w", m.cfg.Agent, target, ErrBusy)
	case m.peerIndex(target) < 0:
		return fmt.Errorf("migrate %s to %s: %w", m.cfg.Agent, target, ErrUnknownPeer)
	}
	r := &m.rec
	n := r.Highest + 1
	r.Highest, r.State, r.Peer, r.Next, r.Committing = n, Frozen, target, n, false
	m.save()
	m.tl = tail{}
	if !frozen {
		m.setRunning(false)
		m.event(EvFrozen, n, target, nil)
	}
	m.src = migration{on: true, proposing: true, files: files, retryIn: m.tm.Retry}
	m.send(Message{Type: MsgPropose, To: target, Epoch: n, Files: files})
	return nil
}

// GiveUp ends the migration in progress before its point of no return, as
// the machine does itself when the target stays silent (EvAbort, why): the
// agent runs here again at its epoch, the proposal not yet sent is not
// sent, and an abort fences the target. The caller gives up when it cannot
// apply the Ready that froze the agent (its record cannot be written). Past
// the point of no return, or with no migration, it does nothing and
// reports false: only the target's decision resolves it then.
func (m *Machine) GiveUp(why error) bool {
	if !m.src.on || m.src.committing {
		return false
	}
	n, target := m.rec.Next, m.rec.Peer
	kept := m.rd.Messages[:0]
	for _, msg := range m.rd.Messages {
		if !(msg.Type == MsgPropose && msg.To == target && msg.Epoch == n) {
			kept = append(kept, msg)
		}
	}
	m.rd.Messages = kept
	m.resume(EvAbort, why)
	m.send(Message{Type: MsgAbort, To: target, Epoch: n})
	return true
}

// sendRequest sends a request about the migration in progress.
func (m *Machine) sendRequest(t MsgType) {
	msg := Message{Type: t, To: m.rec.Peer, Epoch: m.rec.Next}
	if t == MsgPropose {
		msg.Files = m.src.files
	}
	m.send(msg)
}

func (m *Machine) tickSource() {
	s := &m.src
	s.silent++
	s.retryIn--
	if !s.committing && s.silent >= m.tm.Abort {
		n, target, why := m.rec.Next, m.rec.Peer, ErrTimeout
		if s.starting {
			why = fmt.Errorf("the target was still asking its peers what they know: %w", ErrBusy)
		}
		m.resume(EvAbort, why)
		m.send(Message{Type: MsgAbort, To: target, Epoch: n})
		return
	}
	if s.retryIn > 0 {
		return
	}
	s.retryIn = m.tm.Retry
	switch {
	case s.committing && m.cfg.Flaw == flaws.FlawResumeOnSilence:
		m.resume(EvAbort, ErrTimeout)
	case s.committing:
		m.sendRequest(MsgQuery) // the lost activate reply: ask, and fence
	case s.proposing:
		m.sendRequest(MsgPropose)
	default:
		m.sendRequest(MsgPrepare) // answered by prepared, or by what is still missing
	}
}

// onReply handles a target's answer. Only an answer about the migration in
// progress counts: frozen, to that peer, on that epoch (compare-and-clear).
func (m *Machine) onReply(msg *Message) {
	r := &m.rec
	if msg.Type == MsgDecision && msg.Decision == Activated && m.cfg.Flaw == flaws.FlawRetireWithoutCompare {
		m.flawedRetire(msg)
		return
	}
	if !m.src.on || r.State != Frozen || msg.From != r.Peer || msg.Epoch != r.Next {
		return
	}
	s := &m.src
	if msg.Type == MsgRefuse && msg.Reason == ReasonStarting && s.proposing {
		// Not an answer yet: the proposal goes out again every Retry
		// ticks, and the migration aborts if the target is still asking
		// after Abort ticks.
		s.starting = true
		return
	}
	s.silent = 0
	switch msg.Type {
	case MsgAccept:
		if !s.proposing || s.committing {
			return
		}
		s.proposing = false
		m.sendFiles(msg.Missing)
		m.sendRequest(MsgPrepare)
		s.retryIn = m.tm.Retry
	case MsgMissing:
		if s.committing || s.proposing {
			return
		}
		m.sendFiles(msg.Missing)
		m.sendRequest(MsgPrepare)
		s.retryIn = m.tm.Retry
	case MsgPrepared:
		if s.committing {
			return
		}
		// The point of no return: persisted before activate goes out.
		s.committing, s.proposing = true, false
		r.Committing = true
		m.save()
		m.sendRequest(MsgActivate)
		s.retryIn = m.tm.Retry
	case MsgRefuse:
		if s.committing {
			return // only a decision resolves a committing source
		}
		if msg.Highest > r.Highest {
			r.Highest = msg.Highest
		}
		if msg.Reason == ReasonStale && s.proposing && !s.renumbered {
			// The target has seen the epoch proposed (a peer told it while
			// it started, say), and took nothing: propose again, once,
			// above everything either has seen, as Migrate would.
			n := r.Highest + 1
			r.Highest, r.Next = n, n
			m.save()
			s.renumbered = true
			m.send(Message{Type: MsgPropose, To: r.Peer, Epoch: n, Files: s.files})
			s.retryIn = m.tm.Retry
			return
		}
		err := msg.Reason.Err()
		if msg.Detail != "" {
			err = fmt.Errorf("%w: %s", err, msg.Detail)
		}
		m.resume(EvAbort, err)
	case MsgDecision:
		switch msg.Decision {
		case Activated:
			if !s.committing {
				return // cannot happen: the target activates only on activate
			}
			kind := EvCommit
			if msg.Re != MsgActivate {
				kind = EvRetireByQuery
			}
			m.retire(kind)
		case Refused:
			if s.committing && r.Holder.Epoch > r.Epoch {
				// This node knows of an activation newer than the epoch it
				// holds: only it could propose after that epoch, so the
				// newer one descends from this migration, which committed.
				// (A refusal then comes from a target whose registry is
				// behind what it decided: one restored from a backup.)
				m.retire(EvRetireByQuery)
				m.rd.Events[len(m.rd.Events)-1].Err = errMovedOn
				return
			}
			kind, err := EvAbort, error(nil)
			if msg.Re == MsgQuery {
				kind = EvResumeByQuery
			} else if s.committing {
				err = errActivateRefused
			}
			m.resume(kind, err)
		case Unknown:
			// The target lost its decision. If it knows of an activation
			// newer than the epoch held here, the agent moved on: only
			// this node could propose after it, so the newer epoch
			// descends from this migration, which therefore committed.
			// Otherwise stay frozen and keep asking.
			if f := msg.Info.Holder; s.committing && f.Epoch > r.Epoch {
				if f.Epoch > r.Holder.Epoch {
					r.Holder = f
				}
				m.retire(EvRetireByQuery)
				m.rd.Events[len(m.rd.Events)-1].Err = errMovedOn
			}
		}
	}
}

func (m *Machine) sendFiles(idx []int) {
	for _, i := range idx {
		if i >= 0 && i < len(m.src.files) {
			m.send(Message{Type: MsgTransfer, To: m.rec.Peer, Epoch: m.rec.Next, Index: i})
		}
	}
}

// unfreeze makes a frozen source active again at its epoch.
func (m *Machine) unfreeze() {
	r := &m.rec
	r.State, r.Peer, r.Next, r.Committing = Active, "", 0, false
	m.save()
	m.src = migration{}
}

// resume ends the migration in progress with the agent running here again
// at the held epoch.
func (m *Machine) resume(kind EventKind, err error) {
	n, target := m.rec.Next, m.rec.Peer
	m.unfreeze()
	m.runIfMay()
	m.event(kind, n, target, err)
	m.cancelOverride(n)
}

// retire ends the migration in progress with the agent held by the target.
func (m *Machine) retire(kind EventKind) {
	r := &m.rec
	n, target := r.Next, r.Peer
	r.State, r.Next, r.Committing = Retired, 0, false
	if n > r.Holder.Epoch {
		r.Holder = Holder{target, n}
	}
	r.Highest = max(r.Highest, r.Holder.Epoch)
	m.save()
	m.src = migration{}
	m.event(kind, n, target, nil)
	m.cancelOverride(n)
}

// flawedRetire is flaws.FlawRetireWithoutCompare: retire on any activated answer.
func (m *Machine) flawedRetire(msg *Message) {
	r := &m.rec
	if r.State == Retired || r.State == None {
		return
	}
	if r.State == Staging {
		return
	}
	m.setRunning(false)
	r.State, r.Peer, r.Next, r.Committing = Retired, msg.From, 0, false
	if msg.Epoch > r.Holder.Epoch {
		r.Holder = Holder{msg.From, msg.Epoch}
	}
	if msg.Epoch > r.Highest {
		r.Highest = msg.Epoch
	}
	m.save()
	m.src = migration{}
	m.ask = asking{}
	m.event(EvCommit, msg.Epoch, msg.From, nil)
}
