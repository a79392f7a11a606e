package syncpolicy

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tern-dev/tern/internal/flaws"
)

// Peer is a paired peer as the policy sees it.
type Peer struct {
	ID string
	// Dialable: the node knows addresses to dial the peer at (static
	// ones). Any peer is synced with once connected, whoever dialed.
	Dialable bool
}

// Config is what a Machine knows of its node.
type Config struct {
	// Self is this node's ID, in the encoding its peers' IDs are given in
	// (the order of IDs decides who leads; see Leads).
	Self string
	// Peers are the paired peers, none of them Self, none twice.
	Peers []Peer
	// Interval is the number of ticks from one anti-entropy pass to the
	// next; 0 means 1 (a node that ticks the machine once per sync
	// interval).
	Interval int
	// Flaw is zero (the sound policy) everywhere but in tern's own tests
	// and tern simnet --flaw.
	Flaw flaws.Flaw
}

func (c *Config) check() error {
	if c.Self == "" {
		return errors.New("syncpolicy: config needs Self")
	}
	if c.Interval < 0 {
		return fmt.Errorf("syncpolicy: interval %d, want 0 or more ticks", c.Interval)
	}
	for i, p := range c.Peers {
		if p.ID == "" || p.ID == c.Self || slices.ContainsFunc(c.Peers[:i], func(q Peer) bool { return q.ID == p.ID }) {
			return fmt.Errorf("syncpolicy: peer %q is empty, this node, or listed twice", p.ID)
		}
	}
	return nil
}

// Leads reports whether self is the side of a new connection with other
// that runs the exchanges: the lower ID, so that both sides agree whoever
// dialed. Both must compare IDs in one encoding (the node passes raw peer
// IDs, whose order is not that of their base58 text).
func Leads(self, other string) bool { return self < other }

// Machine is the sync policy of one node. V is the caller's version
// vector of a capsule. It is not safe for concurrent use.
type Machine[V any] struct {
	cfg   Config
	same  func(a, b V) bool
	peers []peerState[V]
	wait  int // ticks until the next anti-entropy pass
	rd    Ready
}

// peerState is what the machine knows of one paired peer.
type peerState[V any] struct {
	Peer
	connected bool
	dialing   bool  // a dial asked for has not been reported
	failure   error // the last failed dial, until the peer connects
	running   bool  // a round runs (or was asked for in a Ready)
	again     Scope // asked for while it runs: one more round when it ends
	// synced holds, by agent, a vector both sides held when their last
	// exchange ended (or when the peer's list showed it holds alike).
	synced map[string]V
	// responding counts the exchanges the peer started that run, by agent.
	responding map[string]int
}

// New returns the machine of a node that starts: it is connected to no
// one and knows nothing of its peers' capsules; its first Ready is empty
// (call DialAll for the dials a start makes). same reports whether two
// vectors are equal.
func New[V any](cfg Config, same func(a, b V) bool) (*Machine[V], error) {
	m := new(Machine[V])
	if err := m.Restart(cfg, same); err != nil {
		return nil, err
	}
	return m, nil
}

// Restart is New on an existing machine, reusing its memory (simulators
// start machines by the million): what m knew is gone, as after a crash.
// Earlier Readies of m are invalid afterwards. On error m is unchanged.
func (m *Machine[V]) Restart(cfg Config, same func(a, b V) bool) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if same == nil {
		return errors.New("syncpolicy: New needs a function that compares vectors")
	}
	peers, old := cfg.Peers, m.peers
	cfg.Peers = nil // the peers' states hold them
	clear(m.rd.Rounds)
	clear(m.rd.Dials)
	*m = Machine[V]{cfg: cfg, same: same, wait: cfg.interval(),
		rd: Ready{Rounds: m.rd.Rounds[:0], Dials: m.rd.Dials[:0]}}
	m.peers = m.fresh(old, peers, false)
	return nil
}

func (c *Config) interval() int { return max(1, c.Interval) }

// fresh returns the states of peers, reusing the memory of old; with
// keep, a peer found in old keeps what the machine knew of it.
func (m *Machine[V]) fresh(old []peerState[V], peers []Peer, keep bool) []peerState[V] {
	if !keep && sameIDs(old, peers) { // a restart: reset in place
		for i := range old {
			s := &old[i]
			synced, responding := s.synced, s.responding
			clear(synced)
			clear(responding)
			*s = peerState[V]{Peer: peers[i], synced: synced, responding: responding}
		}
		return old
	}
	next := make([]peerState[V], len(peers))
	for i, p := range peers {
		j := slices.IndexFunc(old, func(s peerState[V]) bool { return s.ID == p.ID })
		switch {
		case j >= 0 && keep:
			next[i] = old[j]
			next[i].Peer = p
		case j >= 0: // its maps, emptied
			next[i] = peerState[V]{Peer: p, synced: old[j].synced, responding: old[j].responding}
			clear(next[i].synced)
			clear(next[i].responding)
		default:
			next[i].Peer = p
		}
	}
	return next
}

func sameIDs[V any](states []peerState[V], peers []Peer) bool {
	if len(states) != len(peers) {
		return false
	}
	for i := range states {
		if states[i].ID != peers[i].ID {
			return false
		}
	}
	return true
}

// SetPeers replaces the paired peers (a pairing changed). A peer that
// stays keeps what the machine knew of it; one that goes is forgotten, and
// asked for no more rounds. It dials no one (see DialAll). On error
// nothing changes.
func (m *Machine[V]) SetPeers(peers []Peer) error {
	cfg := m.cfg
	cfg.Peers = peers
	if err := cfg.check(); err != nil {
		return err
	}
	m.peers = m.fresh(m.peers, peers, true)
	return nil
}

func (m *Machine[V]) peer(id string) *peerState[V] {
	for i := range m.peers {
		if m.peers[i].ID == id {
			return &m.peers[i]
		}
	}
	return nil
}

// HasReady reports whether there is anything in Ready.
func (m *Machine[V]) HasReady() bool {
	return len(m.rd.Rounds) > 0 || len(m.rd.Dials) > 0 || m.rd.CloseIdle
}

// Ready returns what the caller must do now (see Ready).
func (m *Machine[V]) Ready() Ready { return m.rd }

// Advance tells the machine that the caller took the last Ready.
func (m *Machine[V]) Advance() {
	clear(m.rd.Rounds)
	clear(m.rd.Dials)
	m.rd = Ready{Rounds: m.rd.Rounds[:0], Dials: m.rd.Dials[:0]}
}

// Tick advances the machine's clock by one tick. Every Interval ticks it
// runs an anti-entropy pass: a round of changed capsules with every
// connected peer (in the order of Config.Peers), a dial of every dialable
// peer that is neither connected nor being dialed, and idle capsules
// closed.
func (m *Machine[V]) Tick() {
	if m.wait--; m.wait > 0 {
		return
	}
	m.wait = m.cfg.interval()
	for i := range m.peers {
		if m.peers[i].connected {
			m.round(&m.peers[i], ChangedOnly)
		}
	}
	m.DialAll()
	m.rd.CloseIdle = true
}

// Deadline returns after how many Ticks the next anti-entropy pass runs
// (at least 1). A simulator may skip the Ticks before it (they only count)
// and must not skip that one.
func (m *Machine[V]) Deadline() int { return m.wait }

// DialAll asks for a dial, now, of every dialable peer that is neither
// connected nor being dialed: what a node does as it starts, when a peer
// is paired and when the paired peers are reloaded, besides every pass.
func (m *Machine[V]) DialAll() {
	for i := range m.peers {
		if p := &m.peers[i]; p.Dialable && !p.connected && !p.dialing {
			p.dialing = true
			m.rd.Dials = append(m.rd.Dials, p.ID)
		}
	}
}

// Dialed reports how a dial the machine asked for went: err is nil once
// connected (Connected may come before or after), or why it failed, which
// DialFailure returns until the peer connects. A dial of a peer found on
// the LAN, which the machine did not ask for, is reported the same way.
func (m *Machine[V]) Dialed(peer string, err error) {
	p := m.peer(peer)
	if p == nil {
		return
	}
	p.dialing = false
	if err != nil {
		p.failure = err
	}
}

// DialFailure returns why the last dial of peer failed, or nil if it has
// connected since (or was never dialed).
func (m *Machine[V]) DialFailure(peer string) error {
	if p := m.peer(peer); p != nil {
		return p.failure
	}
	return nil
}

// Connected tells the machine that a connection with a paired peer opened
// (each one, also a second to a peer already connected). What it knew of
// the peer's capsules is forgotten, the last failed dial too, and the side
// that leads (Leads) runs a round of everything; the other fetches the
// blobs it wants. A peer that is not paired is ignored.
func (m *Machine[V]) Connected(peer string) {
	p := m.peer(peer)
	if p == nil {
		return
	}
	p.connected, p.failure = true, nil
	clear(p.synced)
	if Leads(m.cfg.Self, peer) {
		m.round(p, Everything)
	} else {
		m.round(p, WantsOnly)
	}
}

// Disconnected tells the machine that the last connection with peer
// ended: no anti-entropy rounds with it until it connects again, and a
// dial at each pass if it is dialable. A round running is left to end on
// its own (it fails: it never dials).
func (m *Machine[V]) Disconnected(peer string) {
	if p := m.peer(peer); p != nil {
		p.connected = false
	}
}

// IsConnected reports whether the machine counts peer as connected.
func (m *Machine[V]) IsConnected(peer string) bool {
	p := m.peer(peer)
	return p != nil && p.connected
}
