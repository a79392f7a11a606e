package fencing

import "fmt"

// What a node asks its peers for.
const (
	askRelearn = iota + 1 // the registry is lost: relearn everything
	askStartup            // starting while holding active: is there a newer holder?
)

// asking is a round of Ask messages and the Tells collected for it.
type asking struct {
	on       bool
	purpose  int
	answered []bool
	tells    []Message // by peer index
	lost     []bool    // by peer index: the peer answered that it lost its registry too
	count    int
	elapsed  int
	retryIn  int
}

// startAsking asks every peer what it knows, with the incarnation as nonce
// so that answers to an earlier life of this node are ignored.
func (m *Machine) startAsking(purpose int) {
	if len(m.cfg.Peers) == 0 {
		m.ask = asking{purpose: purpose}
		m.finishAsking()
		return
	}
	n := len(m.cfg.Peers)
	a := &m.ask
	*a = asking{on: true, purpose: purpose, retryIn: m.tm.Retry,
		answered: resize(a.answered, n), tells: resize(a.tells, n), lost: resize(a.lost, n)}
	for _, p := range m.cfg.Peers {
		m.send(Message{Type: MsgAsk, To: p, Nonce: m.cfg.Incarnation})
	}
}

// Relearning returns, while the registry is lost, the peers that have not
// yet told this node what they know: silent ones have not answered, lost
// ones answered that they lost their registries too. While any peer is
// lost, neither can relearn from the other: see OverrideLost.
func (m *Machine) Relearning() (silent, lost []string) {
	a := &m.ask
	if !m.lost || !a.on {
		return nil, nil
	}
	for i, p := range m.cfg.Peers {
		switch {
		case a.lost[i]:
			lost = append(lost, p)
		case !a.answered[i]:
			silent = append(silent, p)
		}
	}
	return silent, lost
}

// Checking reports whether the machine is in its startup check (asking
// its peers before it runs an agent it held when it stopped), and for how
// many ticks it has been.
func (m *Machine) Checking() (ticks int, ok bool) {
	if !m.ask.on || m.ask.purpose != askStartup {
		return 0, false
	}
	return m.ask.elapsed, true
}

// startupCheck is what a node that starts holding active does before it
// runs: ask every peer for its records, and step down if any knows a newer
// holder. With no peer it runs at once.
func (m *Machine) startupCheck() {
	m.startAsking(askStartup)
}

func (m *Machine) info() Info {
	if m.lost {
		return Info{}
	}
	r := &m.rec
	return Info{Known: true, State: r.State, Epoch: r.Epoch, Peer: r.Peer, Holder: r.Holder,
		Decided: r.Decision(r.Highest), Floor: r.Floor}
}

func (m *Machine) onAsk(msg *Message) {
	m.send(Message{Type: MsgTell, To: msg.From, Nonce: msg.Nonce, Highest: m.rec.Highest, Info: m.info()})
}

func (m *Machine) onTell(msg *Message) {
	a := &m.ask
	if !m.lost && msg.Nonce == m.cfg.Incarnation && m.rolledBack(msg) {
		m.forget(fmt.Errorf("%s knows of epoch %d, which this node activated or proposed and its registry does not hold: the registry was restored from an older copy; relearning it: %w",
			msg.From, max(msg.Info.Holder.Epoch, msg.Info.Epoch), ErrRegistryLost))
		return
	}
	if !a.on {
		m.learn(msg) // the answer to Connected's question
		return
	}
	if msg.Nonce != m.cfg.Incarnation {
		return // an old question
	}
	i := m.peerIndex(msg.From)
	if a.lost[i] = !msg.Info.Known; !a.lost[i] {
		if !a.answered[i] {
			a.answered[i] = true
			a.count++
		}
		a.tells[i] = *msg
	}
	switch {
	case a.count == len(m.cfg.Peers):
		m.finishAsking()
	case a.purpose == askRelearn && heldDespiteLost(a):
		m.finishAsking()
	}
}

// rolledBack reports whether a peer's answer shows that this node's record
// has seen less than it had: the peer knows it as the holder of an epoch
// above its highest, or stages such an epoch from it. A record only moves
// forward, so this node's registry was restored from an older copy (a home
// restored from a backup; see signed.go).
func (m *Machine) rolledBack(t *Message) bool {
	r, self := &m.rec, m.cfg.Self
	i := &t.Info
	return i.Known && (i.Holder.Peer == self && i.Holder.Epoch > r.Highest ||
		i.State == Staging && i.Peer == self && i.Epoch > r.Highest)
}

// forget makes a node whose registry turned out older than what it had
// decided relearn it from every peer, as a node that lost its registry
// does: it stops, runs nothing and answers unknown until every peer has
// answered (EvRegistryLost, then EvRelearned).
func (m *Machine) forget(why error) {
	m.setRunning(false)
	m.tl, m.src, m.tgt, m.ovr = tail{}, migration{}, staging{have: m.tgt.have}, override{answered: m.ovr.answered[:0]}
	m.promoting, m.files = false, nil
	m.lost = true
	m.clearStaging()
	m.event(EvRegistryLost, 0, "", why)
	m.startAsking(askRelearn)
}

// heldDespiteLost reports whether a relearning node may finish although
// some peers lost their registries too (and so wait for it as it waits
// for them): every other peer answered, and one of them holds the agent
// (active or frozen). The node then takes nothing back (see relearn):
// another machine holds the agent, and what the lost peers forgot cannot
// make this one its holder.
func heldDespiteLost(a *asking) bool {
	held := false
	for i := range a.tells {
		switch {
		case !a.answered[i] && !a.lost[i]:
			return false // still silent
		case a.answered[i] && (a.tells[i].Info.State == Active || a.tells[i].Info.State == Frozen):
			held = true
		}
	}
	return held
}

func (m *Machine) tickAsking() {
	a := &m.ask
	a.elapsed++
	if a.purpose == askStartup && a.elapsed >= m.tm.Startup && (a.count > 0 || !m.cfg.Strict) {
		m.finishAsking()
		return
	}
	a.retryIn--
	if a.retryIn > 0 {
		return
	}
	a.retryIn = m.tm.Retry
	for i, p := range m.cfg.Peers {
		if !a.answered[i] {
			m.send(Message{Type: MsgAsk, To: p, Nonce: m.cfg.Incarnation})
		}
	}
}

// newestFact returns the latest activation any answer shows: a peer's own
// active or frozen state, its decision for its highest epoch, or the
// holder it knows of.
func newestFact(tells []Message, answered []bool) (h Holder, highest uint64) {
	for i := range tells {
		if !answered[i] {
			continue
		}
		t := &tells[i]
		highest = max(highest, t.Highest)
		facts := [3]Holder{t.Info.Holder}
		if t.Info.State == Active || t.Info.State == Frozen {
			facts[1] = Holder{t.From, t.Info.Epoch}
		}
		if t.Info.Decided == Activated {
			facts[2] = Holder{t.From, t.Highest}
		}
		for _, f := range facts {
			if f.Epoch > h.Epoch {
				h = f
			}
		}
	}
	return h, highest
}

func (m *Machine) finishAsking() {
	a := m.ask
	m.ask = asking{answered: a.answered[:0], tells: a.tells[:0], lost: a.lost[:0]}
	fact, highest := newestFact(a.tells, a.answered)
	if m.signed > 0 {
		// This node signed events under that epoch: it held it.
		highest = max(highest, m.signed)
		if m.signed > fact.Epoch {
			fact = Holder{m.cfg.Self, m.signed}
		}
	}
	r := &m.rec
	if a.purpose == askStartup {
		if r.State == Staging && !m.tgt.on {
			m.refuseStaging(errRestartedStaging) // restarted while staging
		}
		r.Highest = max(r.Highest, highest)
		if fact.Epoch > r.Holder.Epoch {
			r.Holder = fact
		}
		m.save()
		if fact.Epoch > r.Epoch && r.State == Active {
			r.State, r.Peer = Retired, fact.Peer
			m.event(EvSteppedDown, r.Epoch, fact.Peer,
				fmt.Errorf("%s activated epoch %d, newer than the held %d: %w", fact.Peer, fact.Epoch, r.Epoch, ErrStaleEpoch))
			return
		}
		m.runIfMay()
		return
	}
	m.relearn(a, fact, highest)
}

// relearn rebuilds the record of a node that lost its registry from every
// peer's answer (or every answer but those of peers that lost theirs too,
// when another holds the agent: see heldDespiteLost). Every epoch up to the highest any peer has seen becomes
// unknown (the floor) unless a fact proves what this node decided: the
// peers' facts say it held epoch k, and no peer that once lost its own
// registry may have decided an epoch after k (its floor is at most k).
// Then it holds k again: frozen on the newest proposal if a peer still
// stages it (so that the usual query fences it), active if nothing newer
// was proposed or the newest proposal was refused or never arrived.
func (m *Machine) relearn(a asking, fact Holder, highest uint64) {
	m.lost = false
	m.rec = Record{Highest: highest, Floor: highest, Holder: fact, Decisions: m.rec.Decisions[:0]}
	r := &m.rec
	m.save()
	m.event(EvRelearned, highest, "", nil)
	if fact.Peer != m.cfg.Self || fact.Epoch == 0 {
		return
	}
	k := fact.Epoch
	for i := range a.tells {
		if a.tells[i].Info.Floor > k || (a.lost[i] && !a.answered[i]) {
			return // a peer may have activated a newer epoch and forgotten it
		}
	}
	r.decide(k, Activated)
	r.State, r.Epoch = Active, k
	if highest > k {
		for i := range a.tells {
			t := &a.tells[i]
			if t.Info.State == Staging && t.Info.Epoch == highest && t.Info.Peer == m.cfg.Self {
				r.State, r.Peer, r.Next, r.Committing = Frozen, t.From, highest, true
				m.src = migration{on: true, committing: true, retryIn: m.tm.Retry}
				m.sendRequest(MsgQuery)
				m.event(EvRestored, k, t.From, fmt.Errorf("frozen: %s stages epoch %d", t.From, highest))
				return
			}
		}
	}
	m.runIfMay()
	m.event(EvRestored, k, "", nil)
}

// resize returns s with length n and every element zero, reusing its
// memory when it can.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}
