package fencing

import "fmt"

// override is an operator override in progress.
type override struct {
	on       bool
	epoch    uint64 // the fence: every peer refuses anything older
	gone     string // the peer the operator declared gone for good
	answered []bool
	count    int
	held     Holder // the newest peer found holding the agent
	retryIn  int
	// lost: the override of a node that lost its registry (OverrideLost).
	// Peers that lost theirs too count as answered, holding nothing.
	lost bool
}

// Override is the explicit way out for an operator whose target is gone
// for good (a dead disk, a lost laptop), which leaves a source frozen, or
// leaves no node holding the agent. It must be logged by the caller
// (EvOverride carries what it did). The node fences every peer at a fresh
// epoch f (each records it as its highest and refuses the epoch it was
// staging), waits for an answer from every peer but gone, and then:
//
//   - if a peer holds the agent (active or frozen) at an epoch newer than
//     the one frozen here, the agent moved on: a frozen node retires;
//   - if a peer holds it otherwise, nothing changes (EvOverrideRefused);
//   - else this node activates f and runs the agent.
//
// Safety rests on the operator's word that gone does not run the agent and
// never will; everything else is checked. It fails with ErrRegistryLost
// while relearning, ErrBusy if the agent is active or staging here or an
// override is in progress, ErrUnknownPeer if gone is not a peer.
func (m *Machine) Override(gone string) error {
	r := &m.rec
	switch {
	case m.lost:
		return fmt.Errorf("override %s: %w", m.cfg.Agent, ErrRegistryLost)
	case r.State == Active || r.State == Staging || m.ovr.on:
		return fmt.Errorf("override %s: the agent is %v here: %w", m.cfg.Agent, r.State, ErrBusy)
	case gone != "" && m.peerIndex(gone) < 0:
		return fmt.Errorf("override %s: gone peer %s: %w", m.cfg.Agent, gone, ErrUnknownPeer)
	}
	m.ovr = override{on: true, gone: gone, answered: resize(m.ovr.answered, len(m.cfg.Peers))}
	m.fenceAll(r.Highest + 1)
	return nil
}

// OverrideLost is the operator's way out when this node lost its registry
// and cannot relearn it because a peer lost its own too: each waits for
// the other's answer, and no machine knows any more who last held the
// agent. The node gives up relearning and overrides as Override does,
// with nobody gone, fencing every peer above seen (the newest epoch the
// caller knows from elsewhere, its journal) and above every answer it
// got; from then on it treats every epoch up to the fence as one it may
// have decided (its floor), so no peer relearning from it takes back an
// older epoch. A peer that answers that it lost its registry too counts as
// holding nothing: it runs nothing, and cannot run again before it
// relearns, which waits for this node's answer and its floor.
//
// What it risks, on the operator's word: decisions the lost registries
// held that no other machine knows are forgotten. Run it on the machine
// whose copy of the agent is newest (its journal holds the newest
// holder.activated event), and on one machine only. It fails with ErrBusy
// unless the registry is lost here.
func (m *Machine) OverrideLost(seen uint64) error {
	if !m.lost || m.ovr.on {
		return fmt.Errorf("override %s: the holder registry is not lost here (use Override): %w", m.cfg.Agent, ErrBusy)
	}
	for i := range m.ask.tells {
		if m.ask.answered[i] {
			seen = max(seen, m.ask.tells[i].Highest)
		}
	}
	m.lost = false
	m.ask = asking{answered: m.ask.answered[:0], tells: m.ask.tells[:0], lost: m.ask.lost[:0]}
	m.rec = Record{Decisions: m.rec.Decisions[:0]}
	m.ovr = override{on: true, lost: true, answered: resize(m.ovr.answered, len(m.cfg.Peers))}
	m.fenceAll(seen + 1)
	return nil
}

// fenceAll starts (or restarts) the override with fence epoch f.
func (m *Machine) fenceAll(f uint64) {
	m.rec.Highest = f
	if m.ovr.lost {
		m.rec.Floor = f
	}
	m.save()
	o := &m.ovr
	o.epoch, o.count, o.held, o.retryIn = f, 0, Holder{}, m.tm.Retry
	clear(o.answered)
	for _, p := range m.cfg.Peers {
		m.send(Message{Type: MsgFence, To: p, Epoch: f})
	}
	m.checkOverride()
}

func (m *Machine) tickOverride() {
	o := &m.ovr
	o.retryIn--
	if o.retryIn > 0 {
		return
	}
	o.retryIn = m.tm.Retry
	for i, p := range m.cfg.Peers {
		if !o.answered[i] {
			m.send(Message{Type: MsgFence, To: p, Epoch: o.epoch})
		}
	}
}

// onFence makes this node refuse everything older than the fence.
func (m *Machine) onFence(msg *Message) {
	r := &m.rec
	f := msg.Epoch
	reply := Message{Type: MsgFenced, To: msg.From, Epoch: f}
	switch {
	case m.lost:
	case m.lastFence == Holder{msg.From, f}: // a duplicate
		reply.Highest, reply.Info = r.Highest, m.info()
	case f < r.Highest || (f == r.Highest && !(m.ovr.on && m.ovr.epoch == f && msg.From < m.cfg.Self)):
		reply.Reason, reply.Highest, reply.Info = ReasonStale, r.Highest, m.info()
	default:
		// A newer fence, or another override at this node's own fence
		// epoch from a peer whose ID sorts first: it takes over.
		if r.State == Staging {
			m.refuseStaging(errFenced)
		}
		if m.ovr.on {
			m.yieldOverride(msg.From, f)
		}
		r.Highest = f
		m.save()
		m.lastFence = Holder{msg.From, f}
		reply.Highest, reply.Info = r.Highest, m.info()
	}
	m.send(reply)
}

// yieldOverride ends this node's override because another node's override
// fenced it: two operators at once. Only one of them goes on, so the two
// can never both activate, nor outbid each other forever.
func (m *Machine) yieldOverride(other string, f uint64) {
	m.event(EvOverrideRefused, m.ovr.epoch, other,
		fmt.Errorf("override: %s overrides too, at epoch %d: this one gives way", other, f))
	m.ovr = override{answered: m.ovr.answered[:0]}
}

func (m *Machine) onFenced(msg *Message) {
	o := &m.ovr
	if !o.on || msg.Epoch != o.epoch || (!msg.Info.Known && !o.lost) {
		return
	}
	if msg.Reason == ReasonStale {
		m.fenceAll(max(m.rec.Highest, msg.Highest) + 1)
		return
	}
	i := m.peerIndex(msg.From)
	if o.answered[i] {
		return
	}
	o.answered[i] = true
	o.count++
	if (msg.Info.State == Active || msg.Info.State == Frozen) && msg.Info.Epoch >= o.held.Epoch {
		o.held = Holder{msg.From, msg.Info.Epoch}
	}
	m.checkOverride()
}

// checkOverride finishes the override once every peer but the gone one
// has answered.
func (m *Machine) checkOverride() {
	o := &m.ovr
	need := len(m.cfg.Peers)
	if g := m.peerIndex(o.gone); g >= 0 && !o.answered[g] {
		need--
	}
	if o.count < need {
		return
	}
	r := &m.rec
	done := *o
	m.ovr = override{answered: o.answered[:0]}
	if done.held.Peer != "" {
		if r.State == Frozen && done.held.Epoch > r.Epoch {
			n := r.Next
			m.src = migration{}
			r.State, r.Peer, r.Next, r.Committing = Retired, done.held.Peer, 0, false
			if done.held.Epoch > r.Holder.Epoch {
				r.Holder = done.held
			}
			m.save()
			m.event(EvOverride, n, done.gone, fmt.Errorf("override: %s holds epoch %d: retired", done.held.Peer, done.held.Epoch))
			return
		}
		m.event(EvOverrideRefused, done.epoch, done.held.Peer,
			fmt.Errorf("override: %s holds epoch %d: %w", done.held.Peer, done.held.Epoch, ErrHeld))
		return
	}
	f := done.epoch
	m.src = migration{}
	r.decide(f, Activated)
	r.State, r.Epoch, r.Peer, r.Next, r.Committing = Active, f, "", 0, false
	r.Holder = Holder{m.cfg.Self, f}
	m.save()
	m.setRunning(true)
	m.event(EvOverride, f, done.gone, fmt.Errorf("override: %s declared gone for good; activated epoch %d here", done.gone, f))
}

// cancelOverride ends an override whose frozen migration the target
// resolved after all: its answer is the truth the override stood in for.
func (m *Machine) cancelOverride(n uint64) {
	if !m.ovr.on {
		return
	}
	m.event(EvOverrideRefused, m.ovr.epoch, m.rec.Peer,
		fmt.Errorf("override: the target decided epoch %d after all", n))
	m.ovr = override{answered: m.ovr.answered[:0]}
}

// Retire is the operator's way out for a frozen source whose target the
// operator knows took the agent (it activated, but its answer cannot come:
// the machine is unreachable for good, or the link will not come back):
// the source retires without the target's decision. It never makes a
// second runner; its risk is to availability: if the target never
// activated, no node runs the agent until an Override elsewhere. It must be logged by
// the caller (EvOverride says what it did). It fails with ErrBusy unless
// the agent is frozen here.
func (m *Machine) Retire() error {
	r := &m.rec
	if m.lost || r.State != Frozen {
		return fmt.Errorf("retire %s: the agent is %v here, not frozen: %w", m.cfg.Agent, r.State, ErrBusy)
	}
	n, target := r.Next, r.Peer
	m.src = migration{}
	m.ovr = override{answered: m.ovr.answered[:0]}
	r.State, r.Next, r.Committing = Retired, 0, false
	m.save()
	m.event(EvOverride, n, target, fmt.Errorf("override: retired without %s's decision for epoch %d, on the operator's word that it took the agent", target, n))
	return nil
}
