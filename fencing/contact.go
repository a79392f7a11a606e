package fencing

import "fmt"

// Connected tells the machine that a paired peer is reachable again (a
// connection opened). A machine that holds the agent active asks the peer
// what it knows (one Ask); if the answer shows an activation newer than
// the epoch held here, the node steps down at once (EvSteppedDown): it
// stops the runtime and records the agent as retired to that holder. So a
// node that ran the agent alone under an epoch that had ended (a home
// restored from an old backup) stops within one exchange of meeting any
// peer that knows better, not only at its next start. A machine in any
// other state asks too, once per peer in each life: an answer that shows
// an epoch this node decided and its record lacks means its registry was
// restored from an older copy, and it relearns it (see Step, MsgTell).
func (m *Machine) Connected(peer string) {
	i := m.peerIndex(peer)
	if m.lost || m.ask.on || i < 0 {
		return // relearning or checking at start ask every peer anyway
	}
	for len(m.contacted) < len(m.cfg.Peers) {
		m.contacted = append(m.contacted, false)
	}
	if m.rec.State != Active && m.contacted[i] {
		return
	}
	m.contacted[i] = true
	m.send(Message{Type: MsgAsk, To: peer, Nonce: m.cfg.Incarnation})
}

// learn takes what one peer told this node outside an asking round (an
// answer to Connected's Ask): the newest activation it shows, and the
// highest epoch it has seen.
func (m *Machine) learn(msg *Message) {
	if msg.Nonce != m.cfg.Incarnation || !msg.Info.Known || m.lost {
		return
	}
	fact, highest := newestFact([]Message{*msg}, []bool{true})
	r := &m.rec
	changed := false
	if highest > r.Highest {
		r.Highest, changed = highest, true
	}
	if fact.Epoch > r.Holder.Epoch {
		r.Holder, changed = fact, true
	}
	if fact.Epoch > r.Epoch && r.State == Active {
		m.stepDown(fact)
		return
	}
	if changed {
		m.save()
	}
}

// stepDown retires the agent here because fact shows a newer activation
// than the epoch held: the runtime stops, any tail is given up, and the
// record says who holds it now.
func (m *Machine) stepDown(fact Holder) {
	r := &m.rec
	held := r.Epoch
	r.Highest = max(r.Highest, fact.Epoch)
	if fact.Epoch > r.Holder.Epoch {
		r.Holder = fact
	}
	r.State, r.Peer = Retired, fact.Peer
	m.save()
	m.tl = tail{}
	m.promoting, m.files = false, nil
	m.setRunning(false)
	m.event(EvSteppedDown, held, fact.Peer,
		fmt.Errorf("%s activated epoch %d, newer than the held %d: %w", fact.Peer, fact.Epoch, held, ErrStaleEpoch))
}
