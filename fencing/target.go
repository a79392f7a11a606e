package fencing

import (
	"crypto/sha256"
	"fmt"

	"github.com/tern-dev/tern/internal/flaws"
)

// staging is the volatile side of a target receiving an epoch.
type staging struct {
	on        bool
	files     []File
	have      []bool // file i is in the staging area or already held (Have)
	idle      int    // ticks since the source last spoke
	preparing bool   // Ready.Prepare issued, PrepareDone not yet called
}

func (m *Machine) stagingFrom(msg *Message) bool {
	r := &m.rec
	return m.tgt.on && r.State == Staging && r.Epoch == msg.Epoch && r.Peer == msg.From
}

func (m *Machine) refuse(msg *Message, reason Reason) {
	m.send(Message{Type: MsgRefuse, To: msg.From, Epoch: msg.Epoch, Reason: reason, Highest: m.rec.Highest})
}

// decision answers a request about an epoch with the decision for it and
// the newest activation this node knows of.
func (m *Machine) decision(msg *Message, d Decision) {
	m.send(Message{Type: MsgDecision, To: msg.From, Epoch: msg.Epoch, Re: msg.Type, Decision: d,
		Info: Info{Known: !m.lost, Holder: m.rec.Holder}})
}

// onPropose takes a proposal only if its epoch is newer than any seen.
func (m *Machine) onPropose(msg *Message) {
	r := &m.rec
	n := msg.Epoch
	switch {
	case m.lost:
		m.refuse(msg, ReasonRegistryLost)
		return
	case m.stagingFrom(msg): // a duplicate: answer it again
		m.tgt.idle = 0
		m.send(Message{Type: MsgAccept, To: msg.From, Epoch: n, Missing: m.missing()})
		return
	case n <= r.Highest:
		m.event(EvStaleRefused, n, msg.From, ErrStaleEpoch)
		m.refuse(msg, ReasonStale)
		return
	case r.State == Frozen && m.src.committing:
		// Past the point of no return of its own move (a restart there
		// leaves it asking its target): it learns soon whether it retired,
		// and the proposer proposes again meanwhile.
		m.refuse(msg, ReasonStarting)
		return
	case r.State == Active || r.State == Frozen:
		m.refuse(msg, ReasonBusy)
		return
	case m.ovr.on, m.ask.on:
		// An override in progress, or the startup check: until the peers
		// have answered, this node's registry may be behind what it sent.
		m.refuse(msg, ReasonStarting)
		return
	}
	if r.State == Staging {
		m.refuseStaging(errSuperseded)
	}
	r.Highest, r.State, r.Epoch, r.Peer, r.Prepared = n, Staging, n, msg.From, false
	m.save()
	m.tgt = staging{on: true, files: msg.Files, have: resize(m.tgt.have, len(msg.Files))}
	if m.cfg.Have != nil {
		for i, f := range msg.Files {
			m.tgt.have[i] = m.cfg.Have(f)
		}
	}
	m.send(Message{Type: MsgAccept, To: msg.From, Epoch: n, Missing: m.missing()})
}

// missing lists the files the staging area still lacks, for a message.
func (m *Machine) missing() []int {
	n := 0
	for _, ok := range m.tgt.have {
		if !ok {
			n++
		}
	}
	idx := m.ints(n)
	for i, ok := range m.tgt.have {
		if !ok {
			idx = append(idx, i)
		}
	}
	return idx
}

// ints returns an empty slice with room for n ints, carved from a block
// the machine allocates now and then: messages are immutable, so a slice
// handed out is never written again.
func (m *Machine) ints(n int) []int {
	if n == 0 {
		return nil
	}
	if cap(m.intBlock)-len(m.intBlock) < n {
		m.intBlock = make([]int, 0, max(32, n))
	}
	k := len(m.intBlock)
	m.intBlock = m.intBlock[:k+n]
	return m.intBlock[k : k : k+n]
}

// onTransfer checks one file against the hash the proposal declared; a
// mismatch refuses the epoch.
func (m *Machine) onTransfer(msg *Message) {
	if m.lost {
		m.refuse(msg, ReasonRegistryLost)
		return
	}
	if !m.stagingFrom(msg) {
		if m.rec.Decision(msg.Epoch) != Activated {
			m.refuse(msg, ReasonNotStaging)
		}
		return
	}
	t := &m.tgt
	t.idle = 0
	i := msg.Index
	if i < 0 || i >= len(t.files) || int64(len(msg.Data)) != t.files[i].Size || sha256.Sum256(msg.Data) != t.files[i].Sum {
		name := "?"
		if i >= 0 && i < len(t.files) {
			name = t.files[i].Name
		}
		m.refuseStaging(fmt.Errorf("file %d %q from %s: %w", i, name, msg.From, ErrHashMismatch))
		m.refuse(msg, ReasonHashMismatch)
		return
	}
	if t.have[i] || t.preparing || m.rec.Prepared {
		return
	}
	t.have[i] = true
	m.rd.Stage = append(m.rd.Stage, Chunk{Epoch: msg.Epoch, Index: i, File: t.files[i], Data: msg.Data})
}

// onPrepare asks the caller to prepare once every file is there.
func (m *Machine) onPrepare(msg *Message) {
	if m.lost {
		m.refuse(msg, ReasonRegistryLost)
		return
	}
	if !m.stagingFrom(msg) {
		if m.rec.Decision(msg.Epoch) != Activated {
			m.refuse(msg, ReasonNotStaging)
		}
		return
	}
	t := &m.tgt
	t.idle = 0
	switch {
	case m.rec.Prepared:
		m.send(Message{Type: MsgPrepared, To: msg.From, Epoch: msg.Epoch})
	case t.preparing:
	default:
		if miss := m.missing(); len(miss) > 0 {
			m.send(Message{Type: MsgMissing, To: msg.From, Epoch: msg.Epoch, Missing: miss})
			return
		}
		t.preparing = true
		m.rd.Prepare = msg.Epoch
	}
}

// PrepareDone reports the caller's preparation of epoch (Ready.Prepare). A
// nil err makes the target prepared: it will activate epoch when told. An
// error refuses the epoch. A call for an epoch no longer staged is ignored.
func (m *Machine) PrepareDone(epoch uint64, err error) {
	r := &m.rec
	if !m.tgt.on || !m.tgt.preparing || r.State != Staging || r.Epoch != epoch {
		return
	}
	m.tgt.preparing = false
	source := r.Peer
	if err != nil {
		m.refuseStaging(fmt.Errorf("%w: %w", ErrPrepareFailed, err))
		detail := err.Error()
		if len(detail) > MaxDetail {
			detail = detail[:MaxDetail]
		}
		m.send(Message{Type: MsgRefuse, To: source, Epoch: epoch, Reason: ReasonPrepareFailed, Highest: r.Highest, Detail: detail})
		return
	}
	r.Prepared = true
	m.save()
	m.send(Message{Type: MsgPrepared, To: source, Epoch: epoch})
}

// answerFromRecord answers msg from what the record already says: unknown
// while the registry is lost, the decision written for its epoch, or
// unknown for an undecided epoch at or below the relearnt floor. It
// reports whether it answered; if not, the caller decides (and fences).
func (m *Machine) answerFromRecord(msg *Message) bool {
	r := &m.rec
	n := msg.Epoch
	switch d := r.Decision(n); {
	case m.lost:
		m.decision(msg, Unknown)
	case d != Undecided:
		m.decision(msg, d)
	case n <= r.Floor:
		m.decision(msg, Unknown)
	case m.ask.on && m.ask.purpose == askStartup:
		// Until the peers have answered, this node's registry may be
		// older than what it decided (marks.go): no decision is made now,
		// and the asker asks again.
		m.decision(msg, Unknown)
	default:
		return false
	}
	return true
}

// onActivate activates a prepared epoch, or answers the decision already
// recorded for it. Anything else is refused, durably.
func (m *Machine) onActivate(msg *Message) {
	r := &m.rec
	n := msg.Epoch
	if m.answerFromRecord(msg) {
		return
	}
	if m.stagingFrom(msg) && r.Prepared {
		r.decide(n, Activated)
		r.State, r.Epoch, r.Peer, r.Prepared = Active, n, "", false
		if n > r.Holder.Epoch {
			r.Holder = Holder{m.cfg.Self, n}
		}
		m.save()
		m.files = m.tgt.files
		m.tgt = staging{have: m.tgt.have}
		m.promoting = true
		m.askPromote()
		m.event(EvActivated, n, msg.From, nil)
		m.decision(msg, Activated)
		return
	}
	if n <= r.Highest && !(r.State == Staging && r.Epoch == n) {
		m.event(EvStaleRefused, n, msg.From, ErrStaleEpoch)
	}
	m.fence(n, errActivateUnprepared)
	m.decision(msg, Refused)
}

// onQuery answers "what did you decide for this epoch?" from the decision
// record. Without one it records refused first: the query fences, so an
// activate that arrives later cannot win.
func (m *Machine) onQuery(msg *Message) {
	r := &m.rec
	n := msg.Epoch
	if m.lost {
		m.decision(msg, Unknown)
		return
	}
	switch m.cfg.Flaw {
	case flaws.FlawQueryHeldEpoch:
		if r.State == Active && r.Epoch == n {
			m.decision(msg, Activated)
		} else {
			m.decision(msg, Refused)
		}
		return
	case flaws.FlawQueryWithoutFence:
		if d := r.Decision(n); d != Undecided {
			m.decision(msg, d)
		} else {
			m.decision(msg, Refused)
		}
		return
	}
	if m.answerFromRecord(msg) {
		return
	}
	m.fence(n, errQueried)
	m.decision(msg, Refused)
}

// onAbort forgets a staged epoch; like a query, it fences.
func (m *Machine) onAbort(msg *Message) {
	if m.answerFromRecord(msg) {
		return
	}
	m.fence(msg.Epoch, errAborted)
	m.decision(msg, Refused)
}

// fence durably records refused(n), emptying the staging area if it held n.
func (m *Machine) fence(n uint64, why error) {
	r := &m.rec
	if r.State == Staging && r.Epoch == n {
		m.refuseStaging(why)
		return
	}
	r.decide(n, Refused)
	m.save()
	m.event(EvRefused, n, "", why)
}

// refuseStaging records refused for the staged epoch and empties staging.
func (m *Machine) refuseStaging(why error) {
	r := &m.rec
	n, source := r.Epoch, r.Peer
	r.decide(n, Refused)
	r.State, r.Epoch, r.Peer, r.Prepared = None, 0, "", false
	m.save()
	m.tgt = staging{have: m.tgt.have}
	m.clearStaging()
	m.event(EvRefused, n, source, why)
}

// askPromote asks the caller to promote the activated epoch (Ready.Promote).
func (m *Machine) askPromote() {
	m.rd.Promote = true
	m.rd.Files = m.files
	m.promoteIn = m.tm.Retry
}

// PromoteDone reports how the promotion Ready.Promote asked for went. Once
// it succeeded the agent runs here (Ready.Run); until then nothing runs,
// and a failed promotion is asked for again every Retry ticks. It does
// nothing when no promotion is pending.
func (m *Machine) PromoteDone(err error) {
	if !m.promoting {
		return
	}
	if err != nil {
		m.promoteIn = m.tm.Retry
		return
	}
	m.promoting, m.files = false, nil
	m.runIfMay()
}

// Unpromoted tells a machine restarted from its record that the node had
// activated the agent here but its promotion never completed (the node
// stopped in between): the promotion is asked for (Ready.Promote) before
// the agent runs.
func (m *Machine) Unpromoted() {
	if m.rec.State != Active || m.promoting {
		return
	}
	m.promoting = true
	m.askPromote()
}

// Promoting reports whether an activation here waits for its promotion.
func (m *Machine) Promoting() bool { return m.promoting }

func (m *Machine) tickTarget() {
	m.tgt.idle++
	if m.tgt.idle >= m.tm.Staging && !m.tgt.preparing {
		m.refuseStaging(errSourceSilent)
	}
}
