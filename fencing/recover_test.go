package fencing

import (
	"errors"
	"testing"
)

func TestANodeThatLostItsRegistry(t *testing.T) {
	t.Run("runs nothing and answers unknown until every peer has answered", func(t *testing.T) {
		n := newNet(t, "a", "b", "c")
		b := n.node("b")
		n.crash(b, true)
		n.drop = func(m *Message) bool { return m.From == "c" || m.To == "c" } // c is out of reach
		n.start(b)
		for i := 0; i < 30; i++ {
			n.tick()
		}
		if !b.m.Lost() || b.running {
			t.Fatalf("lost %v, running %v: want lost and not running", b.m.Lost(), b.running)
		}
		b.m.Step(Message{Type: MsgQuery, From: "a", To: "b", Agent: testAgent, Epoch: 1})
		if rd := b.m.Ready(); rd.Messages[0].Decision != Unknown || rd.Persist {
			t.Fatalf("a lost node answered %v and persisted %v; want unknown, nothing", rd.Messages[0].Decision, rd.Persist)
		}
		b.m.Advance()
		n.drop = nil
		n.settle(50)
		if b.m.Lost() || !n.saw(EvRelearned) {
			t.Fatal("did not relearn once every peer answered")
		}
	})
	t.Run("relearns the highest epoch and refuses older proposals", func(t *testing.T) {
		n := newNet(t, "a", "b", "c")
		n.migrate("a", "c")
		n.settle(100)
		n.migrate("c", "a")
		n.settle(100) // epochs 2 and 3 happened without b
		b := n.node("b")
		n.crash(b, true)
		n.start(b)
		n.settle(50)
		rec := n.record("b")
		if rec.Highest != 3 || rec.Floor != 3 {
			t.Fatalf("relearnt %+v, want highest and floor 3", rec)
		}
		b.m.Step(Message{Type: MsgPropose, From: "c", To: "b", Agent: testAgent, Epoch: 3, Files: testFiles})
		if rd := b.m.Ready(); rd.Messages[0].Type != MsgRefuse || rd.Messages[0].Reason != ReasonStale {
			t.Fatalf("a replayed proposal of epoch 3 got %v", &rd.Messages[0])
		}
	})
	t.Run("takes the agent back when the peers' facts say it held the newest epoch", func(t *testing.T) {
		n := newNet(t, "a", "b", "c")
		n.migrate("a", "b")
		n.settle(100)
		b := n.node("b")
		n.crash(b, true)
		n.start(b)
		n.settle(50)
		if !n.saw(EvRestored) || n.runner() != "b" {
			t.Fatalf("runner %q, events %v: want b restored at epoch 2", n.runner(), n.events)
		}
		if rec := n.record("b"); rec.State != Active || rec.Epoch != 2 || rec.Decision(2) != Activated {
			t.Fatalf("restored record %+v", rec)
		}
	})
	t.Run("does not take it back when a peer that lost its registry may have activated a newer epoch", func(t *testing.T) {
		n := newNet(t, "a", "b", "c")
		n.drop = func(m *Message) bool { return m.Type == MsgDecision && m.To == "a" }
		n.migrate("a", "b") // b activates 2, a never hears it
		for i := 0; i < 8; i++ {
			n.tick()
		}
		n.crash(n.node("b"), true)
		n.start(n.node("b")) // b relearns: floor 2, facts say a holds 1
		n.settle(30)
		n.drop = nil
		if rec := n.record("b"); rec.Floor < 2 || rec.State != None {
			t.Fatalf("b relearnt %+v", rec)
		}
		// a crashes and loses its registry too: its facts say it held
		// epoch 1, but b may have activated 2 and forgotten it.
		n.crash(n.node("a"), true)
		n.start(n.node("a"))
		n.settle(30)
		if rec := n.record("a"); rec.State != None || n.runner() != "" {
			t.Fatalf("a relearnt %+v and runner is %q: want nobody to run", rec, n.runner())
		}
	})
}

// Two operators overriding on two machines at once: the last fence wins,
// and never do both activate.
func TestTwoOverridesAtOnceNeverBothActivate(t *testing.T) {
	n := newNet(t, "a", "b", "c")
	n.crash(n.node("a"), false) // gone for good
	for _, id := range []string{"b", "c"} {
		if err := n.node(id).m.Override("a"); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"b", "c"} {
		n.apply(n.node(id))
	}
	n.settle(200) // apply fails the test if two ever run
	if r := n.runner(); r != "b" && r != "c" {
		t.Fatalf("runner %q: want one of the two", r)
	}
}

func TestTwoNodesThatLostTheirRegistriesAtOnce(t *testing.T) {
	t.Run("relearn as copies when another node holds the agent", func(t *testing.T) {
		n := newNet(t, "a", "b", "c")
		n.migrate("a", "b")
		n.settle(100) // b holds epoch 2
		for _, id := range []string{"a", "c"} {
			n.crash(n.node(id), true)
		}
		for _, id := range []string{"a", "c"} {
			n.start(n.node(id))
		}
		n.settle(50)
		for _, id := range []string{"a", "c"} {
			if nd := n.node(id); nd.m.Lost() || nd.m.State() != None {
				t.Fatalf("%s: lost %v, state %v: want relearnt, a copy", id, nd.m.Lost(), nd.m.State())
			}
		}
		if n.runner() != "b" {
			t.Fatalf("runner %q, want b", n.runner())
		}
	})
	t.Run("wait, say for whom, and give way to the operator when nobody holds it", func(t *testing.T) {
		n := newNet(t, "a", "b", "c")
		n.migrate("a", "b")
		n.settle(100) // b holds epoch 2
		for _, id := range []string{"a", "b"} {
			n.crash(n.node(id), true)
		}
		for _, id := range []string{"a", "b"} {
			n.start(n.node(id))
		}
		n.settle(50)
		a, b := n.node("a"), n.node("b")
		if !a.m.Lost() || !b.m.Lost() || n.runner() != "" {
			t.Fatalf("lost %v and %v, runner %q: want both lost, nobody running", a.m.Lost(), b.m.Lost(), n.runner())
		}
		silent, lost := b.m.Relearning()
		if len(silent) != 0 || len(lost) != 1 || lost[0] != "a" {
			t.Fatalf("b waits for silent %v, lost %v: want a, lost", silent, lost)
		}
		if err := a.m.Override(""); !errors.Is(err, ErrRegistryLost) {
			t.Fatalf("Override on a lost node: %v, want ErrRegistryLost", err)
		}
		if err := n.node("c").m.OverrideLost(0); !errors.Is(err, ErrBusy) {
			t.Fatalf("OverrideLost where the registry is not lost: %v, want ErrBusy", err)
		}
		// The operator resumes on b, whose journal holds epoch 2.
		if err := b.m.OverrideLost(2); err != nil {
			t.Fatal(err)
		}
		n.apply(b)
		n.settle(50)
		rec := n.record("b")
		if n.runner() != "b" || rec.Epoch <= 2 || rec.Floor < rec.Epoch-1 {
			t.Fatalf("runner %q, b's record %+v: want b running at a fresh epoch above 2", n.runner(), rec)
		}
		if a.m.Lost() || a.m.State() != None || n.record("a").Holder != (Holder{"b", rec.Epoch}) {
			t.Fatalf("a: lost %v, record %+v: want relearnt, knowing b holds epoch %d", a.m.Lost(), n.record("a"), rec.Epoch)
		}
	})
}

func TestANodeStartingWhileHoldingActive(t *testing.T) {
	t.Run("asks its peers first and runs when none knows a newer holder", func(t *testing.T) {
		n := newNet(t, "a", "b")
		a := n.node("a")
		n.crash(a, false)
		n.start(a)
		if a.running {
			t.Fatal("ran before asking its peers")
		}
		n.settle(20)
		if !a.running {
			t.Fatal("did not run after its peers answered")
		}
	})
	t.Run("steps down without running when a peer knows a newer activation", func(t *testing.T) {
		n := newNet(t, "a", "b")
		backup := n.record("a") // the disk as it was
		n.migrate("a", "b")
		n.settle(100)
		a := n.node("a")
		n.crash(a, false)
		a.reg.Save(testAgent, backup) // restored from an old backup
		n.start(a)
		n.settle(20)
		if a.running || !n.saw(EvSteppedDown) || n.record("a").State != Retired {
			t.Fatalf("running %v, record %+v: want a to step down", a.running, n.record("a"))
		}
	})
	t.Run("runs offline after the startup wait when no peer answers", func(t *testing.T) {
		n := newNet(t, "a", "b")
		n.crash(n.node("b"), false)
		a := n.node("a")
		n.crash(a, false)
		n.start(a)
		for i := 0; i < 3; i++ {
			n.tick()
		}
		if a.running {
			t.Fatal("ran before the startup wait")
		}
		n.settle(20)
		if !a.running {
			t.Fatal("did not run offline")
		}
	})
	t.Run("with Strict, waits for a peer however long", func(t *testing.T) {
		rec := Created("a")
		m, err := New(Config{Self: "a", Agent: testAgent, Peers: []string{"b"}, Incarnation: 1, Strict: true}, rec)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 1000; i++ {
			m.Tick()
			m.Advance()
		}
		if m.Running() {
			t.Fatal("ran without reaching a peer")
		}
		m.Step(Message{Type: MsgTell, From: "b", To: "a", Agent: testAgent, Nonce: 1, Highest: 1, Info: Info{Known: true, Holder: Holder{"a", 1}}})
		if !m.Running() {
			t.Fatal("did not run once a peer answered")
		}
	})
	t.Run("ignores answers to an earlier incarnation's question", func(t *testing.T) {
		m, err := New(Config{Self: "a", Agent: testAgent, Peers: []string{"b"}, Incarnation: 7, Strict: true}, Created("a"))
		if err != nil {
			t.Fatal(err)
		}
		m.Step(Message{Type: MsgTell, From: "b", To: "a", Agent: testAgent, Nonce: 6, Highest: 1, Info: Info{Known: true}})
		if m.Running() {
			t.Fatal("an old answer counted")
		}
	})
}

func TestARestartingNode(t *testing.T) {
	cases := []struct {
		name  string
		rec   Record
		check func(t *testing.T, m *Machine, rd Ready)
	}{
		{"staging empties staging, and refuses the staged epoch once the peers have answered",
			Record{Highest: 2, State: Staging, Epoch: 2, Peer: "a", Prepared: true, Holder: Holder{"a", 1}},
			func(t *testing.T, m *Machine, rd Ready) {
				if !rd.ClearStaging || rd.Persist || len(rd.Messages) != 1 || rd.Messages[0].Type != MsgAsk {
					t.Errorf("Ready %+v: want staging cleared and the startup ask, nothing persisted yet", rd)
				}
				m.Advance()
				m.Step(Message{Type: MsgQuery, From: "a", To: "b", Agent: testAgent, Epoch: 2})
				if rd := m.Ready(); rd.Persist || rd.Messages[0].Decision != Unknown {
					t.Errorf("a query during the startup check: Ready %+v, want unknown and nothing recorded", rd)
				}
				m.Advance()
				m.Step(Message{Type: MsgTell, From: "a", To: "b", Agent: testAgent, Nonce: 1, Highest: 2, Info: Info{Known: true, State: Frozen, Epoch: 1, Holder: Holder{"a", 1}}})
				if rd := m.Ready(); !rd.Persist || rd.Record.Decision(2) != Refused || rd.Record.State != None {
					t.Errorf("after the peers answered: Ready %+v, want refused(2) persisted", rd)
				}
			}},
		{"frozen before the point of no return aborts, then asks before running",
			Record{Highest: 2, State: Frozen, Epoch: 1, Peer: "a", Next: 2, Holder: Holder{"b", 1}, Decisions: []Decided{{1, Activated}}},
			func(t *testing.T, m *Machine, rd Ready) {
				if rd.Record.State != Active || rd.Run || rd.Messages[0].Type != MsgAbort {
					t.Errorf("Ready %+v: want active persisted, abort sent, not yet running", rd)
				}
			}},
		{"frozen after the point of no return asks the target, and what every peer knows",
			Record{Highest: 2, State: Frozen, Epoch: 1, Peer: "a", Next: 2, Committing: true, Holder: Holder{"b", 1}, Decisions: []Decided{{1, Activated}}},
			func(t *testing.T, m *Machine, rd Ready) {
				if rd.Persist || len(rd.Messages) != 2 || rd.Messages[0].Type != MsgQuery || rd.Messages[0].Epoch != 2 || rd.Messages[1].Type != MsgAsk {
					t.Errorf("Ready %+v: want a query for epoch 2, the startup ask, and nothing else", rd)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Config{Self: "b", Agent: testAgent, Peers: []string{"a"}, Incarnation: 1}, tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, m, m.Ready())
		})
	}
}

func TestTheOperatorOverride(t *testing.T) {
	// a froze for b, passed the point of no return; b then lost its
	// registry, so its decision is unknown forever.
	stuck := func(t *testing.T) *testNet {
		n := newNet(t, "a", "b", "c")
		n.drop = func(m *Message) bool { return m.Type == MsgActivate }
		n.migrate("a", "b")
		n.deliver() // b prepared; the activate is lost
		n.crash(n.node("b"), true)
		n.drop = nil
		n.start(n.node("b"))
		for i := 0; i < 40; i++ {
			n.tick()
		}
		if rec := n.record("a"); rec.State != Frozen || !rec.Committing {
			t.Fatalf("a is %+v, want frozen past the point of no return", rec)
		}
		return n
	}
	t.Run("activates a fresh epoch when no peer holds the agent", func(t *testing.T) {
		n := stuck(t)
		a := n.node("a")
		if err := a.m.Override("b"); err != nil {
			t.Fatal(err)
		}
		n.apply(a)
		n.settle(30)
		rec := n.record("a")
		if n.runner() != "a" || rec.Epoch <= 2 || rec.Decision(rec.Epoch) != Activated || !n.saw(EvOverride) {
			t.Fatalf("runner %q, record %+v", n.runner(), rec)
		}
		for _, id := range []string{"b", "c"} {
			if r := n.record(id); r.Highest < rec.Epoch {
				t.Errorf("%s was not fenced: highest %d < %d", id, r.Highest, rec.Epoch)
			}
		}
	})
	t.Run("changes nothing when a peer holds the agent", func(t *testing.T) {
		n := newNet(t, "a", "b", "c")
		c := n.node("c")
		if err := c.m.Override("b"); err != nil {
			t.Fatal(err)
		}
		n.apply(c)
		n.settle(30)
		if n.runner() != "a" || !n.saw(EvOverrideRefused) {
			t.Fatalf("runner %q, events %v: want a to keep running and the override refused", n.runner(), n.events)
		}
	})
	t.Run("is refused where the agent is active", func(t *testing.T) {
		n := newNet(t, "a", "b")
		if err := n.node("a").m.Override("b"); !errors.Is(err, ErrBusy) {
			t.Fatalf("err %v, want ErrBusy", err)
		}
	})
	t.Run("fences a staging peer so that a late activate cannot win", func(t *testing.T) {
		n := stuck(t)
		// c stages epoch 9 from someone who will send activate later.
		c := n.node("c")
		c.m.Step(Message{Type: MsgPropose, From: "b", To: "c", Agent: testAgent, Epoch: 9, Files: testFiles})
		n.apply(c)
		n.queue = nil
		a := n.node("a")
		a.m.Override("b")
		n.apply(a)
		n.settle(30)
		if d := n.decision("c", 9); d != Refused {
			t.Fatalf("c's decision for 9 is %v, want refused by the fence", d)
		}
	})
}

func TestDeadlineSaysWhenTheMachineActsOnItsOwn(t *testing.T) {
	n := newNet(t, "a", "b")
	n.drop = func(*Message) bool { return true }
	n.migrate("a", "b")
	a := n.node("a").m
	for step := 0; step < 5; step++ {
		d := a.Deadline()
		if d == 0 {
			t.Fatal("a frozen source has no deadline")
		}
		for i := 1; i < d; i++ {
			a.Tick()
			if a.HasReady() {
				t.Fatalf("acted after %d ticks, before its deadline of %d", i, d)
			}
		}
		a.Tick()
		if !a.HasReady() {
			t.Fatalf("did nothing at its deadline of %d ticks", d)
		}
		n.apply(n.node("a"))
		n.queue = nil
	}
}

func TestStepRefusesMessagesNotForIt(t *testing.T) {
	m, err := New(Config{Self: "a", Agent: testAgent, Peers: []string{"b"}, Incarnation: 1}, Created("a"))
	if err != nil {
		t.Fatal(err)
	}
	m.Advance()
	cases := []struct {
		name string
		msg  Message
		err  error
	}{
		{"another agent", Message{Type: MsgQuery, From: "b", To: "a", Agent: "11111111-2222-4333-8444-555555555555"}, ErrWrongAgent},
		{"an unknown peer", Message{Type: MsgQuery, From: "z", To: "a", Agent: testAgent}, ErrUnknownPeer},
		{"another node", Message{Type: MsgQuery, From: "b", To: "c", Agent: testAgent}, ErrUnknownPeer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := m.Step(tc.msg); !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if m.HasReady() {
				t.Fatal("a refused message changed something")
			}
		})
	}
}

func TestMigrateNeedsARunningAgentAndAPeer(t *testing.T) {
	n := newNet(t, "a", "b")
	if err := n.node("b").m.Migrate("a", testFiles); !errors.Is(err, ErrNotRunning) {
		t.Errorf("from a node that does not run it: %v, want ErrNotRunning", err)
	}
	if err := n.node("a").m.Migrate("z", testFiles); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("to a stranger: %v, want ErrUnknownPeer", err)
	}
}
