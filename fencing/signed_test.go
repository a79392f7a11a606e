package fencing

import "testing"

// A node whose registry was restored from a copy made before it
// activated an epoch, but whose journal holds an event it signed under that
// epoch (its peers gave its own chain back), relearns its registry and
// takes the agent back at that epoch: nobody else knows better.
func TestARegistryBehindTheNodesOwnJournalIsRelearnt(t *testing.T) {
	n := newNet(t, "a", "b")
	b := n.node("b")
	backup := n.record("b") // b knows of the agent, held by a
	n.migrate("a", "b")
	n.settle(100)
	n.crash(b, false)
	if err := b.reg.Save(testAgent, backup); err != nil {
		t.Fatal(err)
	}
	n.crash(n.node("a"), false) // a, which also knows, is away
	n.start(b)
	b.m.Signed(2) // b's journal: its holder.activated event at epoch 2
	n.apply(b)
	if b.running || !n.saw(EvRegistryLost) {
		t.Fatalf("b, behind its own journal, runs %v and did not start relearning", b.running)
	}
	n.start(n.node("a"))
	n.settle(100)
	if rec := n.record("b"); n.runner() != "b" || rec.State != Active || rec.Epoch != 2 {
		t.Fatalf("after relearning: runner %q, b's record %+v", n.runner(), rec)
	}

	t.Run("a journal that says no more than the record changes nothing", func(t *testing.T) {
		before := len(b.readies)
		b.m.Signed(2)
		n.apply(b)
		if len(b.readies) != before || !b.running {
			t.Fatal("a signed epoch the record holds as activated made the node act")
		}
	})
}

// A source past the point of no return that knows of an activation newer
// than the epoch it holds does not resume on a refusal: only it could have
// proposed after its epoch, so the newer one descends from its migration.
// (The refusal came from a target whose registry is behind.)
func TestACommittingSourceThatKnowsANewerActivationRetiresOnARefusal(t *testing.T) {
	rec := Record{Highest: 3, State: Frozen, Epoch: 1, Peer: "b", Next: 2, Committing: true,
		Holder: Holder{"c", 3}, Decisions: []Decided{{1, Activated}}}
	m, err := New(Config{Self: "a", Agent: testAgent, Peers: []string{"b", "c"}, Incarnation: 1}, rec)
	if err != nil {
		t.Fatal(err)
	}
	m.Advance()
	m.Step(Message{Type: MsgDecision, From: "b", To: "a", Agent: testAgent, Epoch: 2, Re: MsgQuery, Decision: Refused,
		Info: Info{Known: true}})
	if m.Running() || m.State() != Retired {
		t.Fatalf("running %v, state %v: want retired", m.Running(), m.State())
	}
}
