package syncpolicy

import "github.com/tern-dev/tern/internal/flaws"

// round asks for a round of scope with p: in the Ready if none runs, or,
// if one does, as one more when it ends, at the widest scope asked.
func (m *Machine[V]) round(p *peerState[V], scope Scope) {
	if p.running {
		p.again = max(p.again, scope)
		return
	}
	p.running = true
	m.rd.Rounds = append(m.rd.Rounds, Round{Peer: p.ID, Scope: scope})
}

// RoundDone tells the machine that the round with peer ended, however it
// went. If rounds were asked for meanwhile, the next Ready starts one more
// with peer, of the widest scope asked.
func (m *Machine[V]) RoundDone(peer string) {
	p := m.peer(peer)
	if p == nil || !p.running {
		return
	}
	if p.again == 0 {
		p.running = false
		return
	}
	m.rd.Rounds = append(m.rd.Rounds, Round{Peer: p.ID, Scope: p.again})
	p.again = 0
}

// RoundsRunning returns how many peers have a round running (or asked for
// in a Ready not yet carried out): zero when the node syncs with no one.
func (m *Machine[V]) RoundsRunning() int {
	n := 0
	for i := range m.peers {
		if m.peers[i].running {
			n++
		}
	}
	return n
}

// Imported tells the machine that a capsule was imported here (new, or
// merged into the copy held): a round of everything with every connected
// peer.
func (m *Machine[V]) Imported() {
	for i := range m.peers {
		if m.peers[i].connected {
			m.round(&m.peers[i], Everything)
		}
	}
}

// Differs tells the machine that peer holds events this node lacks, or
// lacks events it holds (a gap in what gossip brought, an exchange offered
// of a capsule not held here, a sync state that found the peer behind): a
// round of everything with peer, if it is paired, connected or not.
func (m *Machine[V]) Differs(peer string) {
	if p := m.peer(peer); p != nil {
		m.round(p, Everything)
	}
}

// Decide says what a round of scope with peer does with the capsule of
// agent, whose vector here is ours, once the peer's list showed that it
// does not hold it alike. (When it does, the caller records that with
// Exchanged and skips the capsule.) It changes nothing.
func (m *Machine[V]) Decide(peer, agent string, scope Scope, ours V) Action {
	switch {
	case scope == Everything:
		return Exchange
	case scope != ChangedOnly:
		return SkipWantsOnly
	}
	p := m.peer(peer)
	if p == nil {
		return Exchange
	}
	if both, ok := p.synced[agent]; ok && m.same(both, ours) {
		return SkipHeld
	}
	if p.responding[agent] > 0 {
		return SkipResponding
	}
	if m.cfg.Flaw == flaws.FlawFollowerSkips && !Leads(m.cfg.Self, peer) {
		return SkipHeld // "the leader's round brings it": not what it wrote since
	}
	return Exchange
}

// Exchanged records that peer and this node both held both, the vector of
// agent: an exchange ended (started by either side), or the peer's list
// showed that it holds what this node holds. Until this node's vector
// moves, a round of changed capsules skips agent with peer.
func (m *Machine[V]) Exchanged(peer, agent string, both V) {
	p := m.peer(peer)
	if p == nil {
		return
	}
	if p.synced == nil {
		p.synced = map[string]V{}
	}
	p.synced[agent] = both
}

// Synced returns the vector of agent both peer and this node held when
// they last exchanged it, since the peer last connected; ok is false if
// none is known.
func (m *Machine[V]) Synced(peer, agent string) (both V, ok bool) {
	if p := m.peer(peer); p != nil {
		both, ok = p.synced[agent]
	}
	return both, ok
}

// ExchangeStarted tells the machine that peer started an exchange of
// agent with this node. Until the matching ExchangeEnded, rounds of
// changed capsules with peer leave agent to it.
func (m *Machine[V]) ExchangeStarted(peer, agent string) {
	p := m.peer(peer)
	if p == nil {
		return
	}
	if p.responding == nil {
		p.responding = map[string]int{}
	}
	p.responding[agent]++
}

// ExchangeEnded tells the machine that an exchange peer started of agent
// ended, however it went (one that succeeded is also reported with
// Exchanged, before this).
func (m *Machine[V]) ExchangeEnded(peer, agent string) {
	p := m.peer(peer)
	if p == nil || p.responding[agent] == 0 {
		return
	}
	if p.responding[agent]--; p.responding[agent] == 0 {
		delete(p.responding, agent)
	}
}
