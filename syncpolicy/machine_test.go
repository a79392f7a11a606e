package syncpolicy

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/tern-dev/tern/internal/flaws"
)

func TestANewMachineWaitsToBeToldToDial(t *testing.T) {
	m, err := New(Config{Self: "b", Peers: []Peer{dialable("a"), reachable("c"), dialable("d")}}, sameVec)
	if err != nil {
		t.Fatal(err)
	}
	if m.HasReady() {
		t.Fatalf("a new machine asks for %+v", m.Ready())
	}
	m.DialAll()
	got := take(m)
	want := taken{Dials: []string{"a", "d"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DialAll's Ready %+v, want %+v: the peers with addresses", got, want)
	}
	if m.HasReady() {
		t.Fatalf("a Ready left after Advance: %+v", m.Ready())
	}
	m.DialAll()
	if m.HasReady() {
		t.Fatalf("peers being dialed are dialed again: %+v", m.Ready())
	}
}

func TestABadConfigIsRefused(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		same func(a, b vec) bool
	}{
		{"no self", Config{Peers: []Peer{dialable("a")}}, sameVec},
		{"self among the peers", Config{Self: "a", Peers: []Peer{dialable("a")}}, sameVec},
		{"a peer twice", Config{Self: "a", Peers: []Peer{dialable("b"), reachable("b")}}, sameVec},
		{"a peer with no id", Config{Self: "a", Peers: []Peer{{}}}, sameVec},
		{"a negative interval", Config{Self: "a", Interval: -1}, sameVec},
		{"no way to compare vectors", Config{Self: "a"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg, tc.same); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestAnAntiEntropyPassComesEveryInterval(t *testing.T) {
	cases := []struct {
		name     string
		interval int
		ticks    int
		passes   int
	}{
		{"interval 0 is one tick", 0, 5, 5},
		{"interval 1: every tick", 1, 5, 5},
		{"interval 3: the third tick, and every third after", 3, 8, 2},
		{"nothing before the interval has gone by", 4, 3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Config{Self: "a", Interval: tc.interval}, sameVec)
			if err != nil {
				t.Fatal(err)
			}
			passes := 0
			for range tc.ticks {
				if d := m.Deadline(); d < 1 {
					t.Fatalf("Deadline %d", d)
				}
				m.Tick()
				if take(m).CloseIdle {
					passes++
				}
			}
			if passes != tc.passes {
				t.Fatalf("%d passes in %d ticks, want %d", passes, tc.ticks, tc.passes)
			}
		})
	}
	t.Run("Deadline is the tick of the next pass", func(t *testing.T) {
		m := newMachine(t, "a")
		for want := 3; want > 0; want-- {
			if d := m.Deadline(); d != want {
				t.Fatalf("Deadline %d, want %d", d, want)
			}
			if m.Tick(); m.HasReady() != (want == 1) {
				t.Fatalf("Ready after a tick with Deadline %d: %v", want, m.HasReady())
			}
		}
	})
}

func TestAPassRoundsWithTheConnectedAndDialsTheOthers(t *testing.T) {
	m := newMachine(t, "c", dialable("a"), dialable("b"), reachable("d"), dialable("e"), reachable("f"))
	for _, p := range []string{"a", "b", "d", "e", "f"} {
		m.Dialed(p, errors.New("unreachable"))
	}
	connect(m, "b", "d")
	got := pass(m)
	want := taken{
		Rounds:    rounds(Round{"b", ChangedOnly}, Round{"d", ChangedOnly}),
		Dials:     []string{"a", "e"}, // f cannot be dialed: it dials this node
		CloseIdle: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pass %+v, want %+v", got, want)
	}
	t.Run("a peer being dialed is not dialed again", func(t *testing.T) {
		if got := pass(m); len(got.Dials) != 0 {
			t.Fatalf("dials %v while both dials run", got.Dials)
		}
		m.Dialed("a", errors.New("unreachable"))
		m.RoundDone("b")
		m.RoundDone("d")
		if got := pass(m); !slices.Equal(got.Dials, []string{"a"}) {
			t.Fatalf("dials %v, want [a], whose dial ended", got.Dials)
		}
	})
	t.Run("a peer that disconnects is dialed at the next pass, not rounded with", func(t *testing.T) {
		m.Disconnected("b")
		finish(m, "b")
		got := pass(m)
		if !slices.Equal(got.Dials, []string{"b"}) || slices.ContainsFunc(got.Rounds, func(r Round) bool { return r.Peer == "b" }) {
			t.Fatalf("pass after b left: %+v", got)
		}
		if m.IsConnected("b") || !m.IsConnected("d") {
			t.Fatal("IsConnected does not follow the connections")
		}
	})
}

func TestOnAConnectionTheLowerIDLeads(t *testing.T) {
	cases := []struct {
		name       string
		self, peer string
		want       Scope
	}{
		{"the lower side runs a round of everything", "a", "b", Everything},
		{"the higher side only fetches its wants", "b", "a", WantsOnly},
		{"IDs compare as bytes, not as numbers", "n10", "n9", Everything},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if Leads(tc.self, tc.peer) == Leads(tc.peer, tc.self) {
				t.Fatal("both or neither lead")
			}
			m := newMachine(t, tc.self, reachable(tc.peer))
			m.Connected(tc.peer)
			if got := take(m); !reflect.DeepEqual(got.Rounds, rounds(Round{tc.peer, tc.want})) || len(got.Dials) > 0 || got.CloseIdle {
				t.Fatalf("Ready %+v, want one round of %v", got, tc.want)
			}
		})
	}
	t.Run("a connection forgets what the peer held and its failed dial", func(t *testing.T) {
		m := newMachine(t, "a", dialable("b"))
		m.Exchanged("b", "x", vec{1, 1})
		m.Dialed("b", errors.New("refused"))
		m.Connected("b")
		if _, ok := m.Synced("b", "x"); ok {
			t.Error("the vector of the last exchange survived a new connection")
		}
		if err := m.DialFailure("b"); err != nil {
			t.Errorf("DialFailure %v after the peer connected", err)
		}
		if got := m.Decide("b", "x", ChangedOnly, vec{1, 1}); got != Exchange {
			t.Errorf("Decide %v after a new connection, want exchange", got)
		}
	})
	t.Run("a peer that is not paired gets nothing", func(t *testing.T) {
		m := newMachine(t, "a", dialable("b"))
		m.Connected("z")
		m.Differs("z")
		m.Exchanged("z", "x", vec{1})
		m.ExchangeStarted("z", "x")
		m.Dialed("z", errors.New("no"))
		m.RoundDone("z")
		if m.HasReady() || m.IsConnected("z") || m.DialFailure("z") != nil {
			t.Fatalf("an unpaired peer changed the machine: %+v", m.Ready())
		}
		if got := pass(m); len(got.Rounds) > 0 {
			t.Fatalf("the pass rounds with %v", got.Rounds)
		}
	})
}

// Requests for rounds with a peer whose round runs are one more round when
// it ends, of the widest scope asked: bursts never pile up.
func TestRoundsWithOnePeerRunOneAtATime(t *testing.T) {
	type step struct {
		do   string // connect, differs, imported, pass, done
		want []Round
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a round asked for while one runs waits for it", []step{
			{"connect", rounds(Round{"b", Everything})},
			{"pass", nil},
			{"done", rounds(Round{"b", ChangedOnly})},
			{"done", nil},
		}},
		{"many asked for meanwhile are one, of the widest scope", []step{
			{"pass", nil}, // not connected: no round
			{"connect", rounds(Round{"b", Everything})},
			{"pass", nil},
			{"differs", nil},
			{"pass", nil},
			{"done", rounds(Round{"b", Everything})},
			{"done", nil},
		}},
		{"a round that ends with nothing asked frees the peer", []step{
			{"connect", rounds(Round{"b", Everything})},
			{"done", nil},
			{"imported", rounds(Round{"b", Everything})},
		}},
		{"an end reported twice starts nothing", []step{
			{"connect", rounds(Round{"b", Everything})},
			{"done", nil},
			{"done", nil},
			{"pass", rounds(Round{"b", ChangedOnly})},
		}},
		{"a second connection is asked for as a round too", []step{
			{"connect", rounds(Round{"b", Everything})},
			{"connect", nil},
			{"done", rounds(Round{"b", Everything})},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t, "a", reachable("b"))
			for i, s := range tc.steps {
				var got []Round
				switch s.do {
				case "connect":
					m.Connected("b")
					got = take(m).Rounds
				case "differs":
					m.Differs("b")
					got = take(m).Rounds
				case "imported":
					m.Imported()
					got = take(m).Rounds
				case "pass":
					got = pass(m).Rounds
				case "done":
					m.RoundDone("b")
					got = take(m).Rounds
				}
				if !slices.Equal(got, s.want) {
					t.Fatalf("step %d (%s): rounds %v, want %v", i, s.do, got, s.want)
				}
			}
		})
	}
}

func TestImportedRoundsEverythingWithEveryConnectedPeer(t *testing.T) {
	m := newMachine(t, "b", reachable("a"), reachable("c"), reachable("d"))
	connect(m, "a", "c")
	if n := m.RoundsRunning(); n != 0 {
		t.Fatalf("%d rounds run after every round ended", n)
	}
	m.Imported()
	if got := take(m); !reflect.DeepEqual(got.Rounds, rounds(Round{"a", Everything}, Round{"c", Everything})) {
		t.Fatalf("rounds %v", got.Rounds)
	}
	if n := m.RoundsRunning(); n != 2 {
		t.Fatalf("RoundsRunning = %d, want 2", n)
	}
}

func TestDiffersRoundsEverythingWithThatPeerConnectedOrNot(t *testing.T) {
	m := newMachine(t, "b", reachable("a"), reachable("c"))
	m.Differs("c")
	if got := take(m); !reflect.DeepEqual(got.Rounds, rounds(Round{"c", Everything})) {
		t.Fatalf("rounds %v", got.Rounds)
	}
}

// Decide is the rule a round applies to each capsule the peer's list did
// not show alike.
func TestDecideWhatARoundDoesWithACapsule(t *testing.T) {
	ours := vec{3, 2}
	cases := []struct {
		name       string
		self       string // the peer is "b"
		scope      Scope
		synced     *vec // what both held after the last exchange
		responding int  // exchanges the peer started, running
		flaw       flaws.Flaw
		want       Action
	}{
		{"a round of everything exchanges", "a", Everything, &ours, 1, 0, Exchange},
		{"a round of wants exchanges nothing", "a", WantsOnly, nil, 0, 0, SkipWantsOnly},
		{"no round exchanges nothing", "a", 0, nil, 0, 0, SkipWantsOnly},
		{"a changed capsule never exchanged is exchanged", "a", ChangedOnly, nil, 0, 0, Exchange},
		{"a capsule unchanged since the last exchange is skipped", "a", ChangedOnly, &ours, 0, 0, SkipHeld},
		{"a capsule changed since the last exchange is exchanged", "a", ChangedOnly, &vec{3, 1}, 0, 0, Exchange},
		{"a capsule the peer is exchanging is left to it", "a", ChangedOnly, &vec{3, 1}, 1, 0, SkipResponding},
		{"the follower exchanges what it changed too", "c", ChangedOnly, &vec{3, 1}, 0, 0, Exchange},
		{"flawed: the follower leaves what it changed to the leader", "c", ChangedOnly, &vec{3, 1}, 0, flaws.FlawFollowerSkips, SkipHeld},
		{"flawed: the leader still exchanges", "a", ChangedOnly, &vec{3, 1}, 0, flaws.FlawFollowerSkips, Exchange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Config{Self: tc.self, Peers: []Peer{reachable("b")}, Flaw: tc.flaw}, sameVec)
			if err != nil {
				t.Fatal(err)
			}
			if tc.synced != nil {
				m.Exchanged("b", "x", *tc.synced)
			}
			for range tc.responding {
				m.ExchangeStarted("b", "x")
			}
			take(m)
			if got := m.Decide("b", "x", tc.scope, ours); got != tc.want {
				t.Fatalf("Decide = %v, want %v", got, tc.want)
			}
			if m.HasReady() {
				t.Fatal("Decide changed the machine")
			}
			if got := m.Decide("b", "other agent", ChangedOnly, ours); got != Exchange && tc.flaw == 0 {
				t.Fatalf("another agent's capsule: %v, want exchange", got)
			}
		})
	}
	t.Run("a peer that is not paired is exchanged with as asked", func(t *testing.T) {
		m := newMachine(t, "a")
		if got := m.Decide("z", "x", ChangedOnly, ours); got != Exchange {
			t.Fatalf("Decide = %v", got)
		}
	})
}

func TestExchangesThePeerStartedAreCountedUntilEachEnds(t *testing.T) {
	m := newMachine(t, "a", reachable("b"))
	m.ExchangeStarted("b", "x")
	m.ExchangeStarted("b", "x")
	m.ExchangeEnded("b", "x")
	if got := m.Decide("b", "x", ChangedOnly, vec{}); got != SkipResponding {
		t.Fatalf("one of two still runs: %v", got)
	}
	m.ExchangeEnded("b", "x")
	m.ExchangeEnded("b", "x") // one end too many
	m.ExchangeStarted("b", "x")
	m.ExchangeEnded("b", "x")
	if got := m.Decide("b", "x", ChangedOnly, vec{}); got != Exchange {
		t.Fatalf("all ended: %v", got)
	}
}

func TestExchangedRecordsWhatBothHeld(t *testing.T) {
	m := newMachine(t, "a", reachable("b"))
	if _, ok := m.Synced("b", "x"); ok {
		t.Fatal("a vector before any exchange")
	}
	m.Exchanged("b", "x", vec{1, 2})
	m.Exchanged("b", "x", vec{2, 2})
	if got, ok := m.Synced("b", "x"); !ok || got != (vec{2, 2}) {
		t.Fatalf("Synced = %v, %v; want the last", got, ok)
	}
	if _, ok := m.Synced("b", "y"); ok {
		t.Fatal("another agent's vector")
	}
}

func TestAFailedDialIsRememberedUntilThePeerConnects(t *testing.T) {
	m := newMachine(t, "a", dialable("b"))
	refused := errors.New("refused")
	m.Dialed("b", refused)
	if err := m.DialFailure("b"); err != refused {
		t.Fatalf("DialFailure %v", err)
	}
	if got := pass(m); !slices.Equal(got.Dials, []string{"b"}) {
		t.Fatalf("a failed peer is dialed at the next pass as any other: dials %v", got.Dials)
	}
	m.Dialed("b", nil)
	if err := m.DialFailure("b"); err != refused {
		t.Fatalf("a dial that went through keeps the failure until the connection: %v", err)
	}
	m.Connected("b")
	if err := m.DialFailure("b"); err != nil {
		t.Fatalf("DialFailure %v after connecting", err)
	}
}

func TestSetPeersKeepsWhatStaysAndDialsWhatComes(t *testing.T) {
	m := newMachine(t, "a", dialable("b"), reachable("c"))
	connect(m, "c")
	m.Exchanged("c", "x", vec{1})
	m.Dialed("b", errors.New("refused"))
	m.Connected("b") // its round runs
	take(m)
	if err := m.SetPeers([]Peer{dialable("c"), dialable("d")}); err != nil {
		t.Fatal(err)
	}
	if m.HasReady() {
		t.Fatalf("SetPeers asks for %+v", m.Ready())
	}
	m.DialAll()
	if got := take(m); !slices.Equal(got.Dials, []string{"d"}) || len(got.Rounds) > 0 {
		t.Fatalf("after pairing d: %+v, want a dial of d only (c is connected)", got)
	}
	if got, ok := m.Synced("c", "x"); !ok || got != (vec{1}) || !m.IsConnected("c") {
		t.Fatal("c, which stays, lost what the machine knew of it")
	}
	m.RoundDone("b")
	m.Differs("b")
	if m.HasReady() || m.IsConnected("b") {
		t.Fatalf("b, unpaired, is still asked for: %+v", m.Ready())
	}
	if err := m.SetPeers([]Peer{dialable("a")}); err == nil {
		t.Fatal("pairing the node with itself was accepted")
	}
	if !m.IsConnected("c") {
		t.Fatal("a refused SetPeers changed the peers")
	}
}

func TestRestartForgetsEverything(t *testing.T) {
	m := newMachine(t, "a", dialable("b"))
	connect(m, "b")
	m.Exchanged("b", "x", vec{1})
	m.ExchangeStarted("b", "x")
	m.Connected("b") // a round runs
	if err := m.Restart(Config{Self: "a", Peers: []Peer{dialable("b")}, Interval: 3}, sameVec); err != nil {
		t.Fatal(err)
	}
	if m.HasReady() {
		t.Fatalf("first Ready after a restart %+v", m.Ready())
	}
	if m.DialAll(); !reflect.DeepEqual(take(m), taken{Dials: []string{"b"}}) {
		t.Fatal("the restarted machine does not dial b: it thinks it connected or dialing")
	}
	if _, ok := m.Synced("b", "x"); ok || m.IsConnected("b") {
		t.Fatal("the restarted machine remembers the peer")
	}
	if got := m.Decide("b", "x", ChangedOnly, vec{1}); got != Exchange {
		t.Fatalf("Decide %v: the restarted machine remembers an exchange", got)
	}
	m.Connected("b")
	if got := take(m); len(got.Rounds) != 1 {
		t.Fatalf("the round before the restart still counts as running: %+v", got)
	}
	if err := m.Restart(Config{}, sameVec); err == nil || !m.IsConnected("b") {
		t.Fatal("a bad restart was accepted or changed the machine")
	}
}

// Under any sequence of inputs the machine never runs two rounds with one
// peer at once, never loses a round asked for, never asks for one with a
// peer that is not paired, and gives the same Readies to the same inputs.
func TestRoundsAreNeverDoubledNorLostWhateverComes(t *testing.T) {
	peers := []Peer{dialable("a"), reachable("c"), dialable("d")}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		m1, _ := New(Config{Self: "b", Peers: peers, Interval: 2}, sameVec)
		m2, _ := New(Config{Self: "b", Peers: peers, Interval: 2}, sameVec)
		running := map[string]bool{}
		owed := map[string]bool{} // asked for while one ran
		for step := range 300 {
			p := peers[rng.IntN(len(peers))].ID
			if rng.IntN(8) == 0 {
				p = "z"
			}
			in := rng.IntN(8)
			asked := false
			for _, m := range []*Machine[vec]{m1, m2} {
				switch in {
				case 0:
					m.Connected(p)
					asked = true
				case 1:
					m.Disconnected(p)
				case 2:
					asked = m.IsConnected(p) && m.Deadline() == 1
					m.Tick()
				case 3:
					m.Differs(p)
					asked = true
				case 4:
					if running[p] {
						m.RoundDone(p)
					}
				case 5:
					m.Imported()
					asked = m.IsConnected(p)
				case 6:
					m.Dialed(p, nil)
				case 7:
					m.DialAll()
				}
			}
			r1, r2 := take(m1), take(m2)
			if !reflect.DeepEqual(r1, r2) {
				t.Fatalf("seed %d step %d: the same inputs gave %+v and %+v", seed, step, r1, r2)
			}
			if in == 4 && running[p] {
				running[p] = false
			}
			for _, r := range r1.Rounds {
				if r.Peer == "z" {
					t.Fatalf("seed %d step %d: a round with an unpaired peer", seed, step)
				}
				if running[r.Peer] {
					t.Fatalf("seed %d step %d: a second round with %s", seed, step, r.Peer)
				}
				running[r.Peer] = true
				owed[r.Peer] = false
			}
			if asked && p != "z" && running[p] && !slices.ContainsFunc(r1.Rounds, func(r Round) bool { return r.Peer == p }) {
				owed[p] = true
			}
			for q, o := range owed {
				if o && !running[q] {
					t.Fatalf("seed %d step %d: a round asked for with %s was lost", seed, step, q)
				}
			}
		}
	}
}

func TestARestartWithOtherPeersKnowsOnlyThose(t *testing.T) {
	m := newMachine(t, "a", reachable("b"), reachable("c"))
	connect(m, "b", "c")
	m.Exchanged("c", "x", vec{1})
	if err := m.Restart(Config{Self: "a", Peers: []Peer{reachable("c"), dialable("d")}}, sameVec); err != nil {
		t.Fatal(err)
	}
	if m.DialAll(); !reflect.DeepEqual(take(m), taken{Dials: []string{"d"}}) {
		t.Fatal("DialAll after the restart dials other than d")
	}
	if _, ok := m.Synced("c", "x"); ok || m.IsConnected("b") || m.IsConnected("c") {
		t.Fatal("the restarted machine remembers its old peers")
	}
}

func TestNamesOfScopesAndActions(t *testing.T) {
	cases := []struct {
		got, want string
	}{
		{WantsOnly.String(), "wants-only"},
		{ChangedOnly.String(), "changed-only"},
		{Everything.String(), "everything"},
		{Scope(9).String(), "scope(9)"},
		{Exchange.String(), "exchange"},
		{SkipHeld.String(), "skip-held"},
		{SkipResponding.String(), "skip-responding"},
		{SkipWantsOnly.String(), "skip-wants-only"},
		{Action(9).String(), "action(9)"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}
