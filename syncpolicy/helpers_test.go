package syncpolicy

import (
	"slices"
	"testing"
)

// vec is the tests' version vector: events held of each of two writers.
type vec [2]int

func sameVec(a, b vec) bool { return a == b }

// taken is a Ready copied out of the machine.
type taken struct {
	Rounds    []Round
	Dials     []string
	CloseIdle bool
}

// take copies the machine's Ready and advances it, as a caller does.
func take(m *Machine[vec]) taken {
	rd := m.Ready()
	var t taken
	if len(rd.Rounds) > 0 {
		t.Rounds = slices.Clone(rd.Rounds)
	}
	if len(rd.Dials) > 0 {
		t.Dials = slices.Clone(rd.Dials)
	}
	t.CloseIdle = rd.CloseIdle
	m.Advance()
	return t
}

// finish ends every round with peer, those asked for meanwhile included.
func finish(m *Machine[vec], peer string) {
	for {
		m.RoundDone(peer)
		if len(take(m).Rounds) == 0 {
			return
		}
	}
}

// newMachine returns a machine of self with peers, its first Ready (the
// dials at start) taken.
func newMachine(t *testing.T, self string, peers ...Peer) *Machine[vec] {
	t.Helper()
	m, err := New(Config{Self: self, Peers: peers, Interval: 3}, sameVec)
	if err != nil {
		t.Fatal(err)
	}
	take(m)
	return m
}

// dialable and reachable are peers with and without addresses to dial.
func dialable(id string) Peer  { return Peer{ID: id, Dialable: true} }
func reachable(id string) Peer { return Peer{ID: id} }

// connect connects m with each peer, ends the round each connection
// starts, and takes the Ready.
func connect(m *Machine[vec], peers ...string) {
	for _, p := range peers {
		m.Connected(p)
		take(m)
		m.RoundDone(p)
	}
	take(m)
}

// pass ticks m until its next anti-entropy pass and returns its Ready.
func pass(m *Machine[vec]) taken {
	for range m.Deadline() {
		m.Tick()
	}
	return take(m)
}

func rounds(rs ...Round) []Round { return rs }
