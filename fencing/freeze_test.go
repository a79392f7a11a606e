package fencing

import (
	"errors"
	"testing"
)

// The tail of a migration is a state of the machine: frozen, the runtime
// stopped and appends refused, nothing durable yet.
func TestTheTailFreezesTheAgentAndEndsInAProposalOrAnUnfreeze(t *testing.T) {
	t.Run("a freeze stops the runtime and refuses appends, and persists nothing", func(t *testing.T) {
		n := newNet(t, "a", "b")
		a := n.node("a")
		before := len(a.readies)
		if err := a.m.Freeze("b"); err != nil {
			t.Fatal(err)
		}
		rd := a.m.Ready()
		if !rd.Stop || rd.Persist || len(rd.Messages) != 0 {
			t.Fatalf("the freeze's Ready: %+v, want a stop and nothing else", rd)
		}
		n.apply(a)
		if _, err := a.m.Appends(); !errors.Is(err, ErrFrozen) {
			t.Fatalf("an append during the tail: %v, want ErrFrozen", err)
		}
		if a.running || !a.m.Tailing() || a.m.Idle() || len(a.readies) != before+1 {
			t.Fatalf("running %v, tailing %v, idle %v", a.running, a.m.Tailing(), a.m.Idle())
		}
		if err := a.m.Freeze("b"); !errors.Is(err, ErrBusy) {
			t.Fatalf("a second freeze: %v, want ErrBusy", err)
		}
	})
	t.Run("the proposal after the tail stops nothing twice, and the move commits", func(t *testing.T) {
		n := newNet(t, "a", "b")
		a := n.node("a")
		a.m.Freeze("b")
		n.apply(a)
		if err := a.m.Migrate("b", testFiles); err != nil {
			t.Fatal(err)
		}
		if rd := a.m.Ready(); rd.Stop || !rd.Persist || rd.Record.State != Frozen {
			t.Fatalf("the proposal's Ready: %+v", rd)
		}
		n.apply(a)
		n.settle(100)
		if n.runner() != "b" || !n.saw(EvCommit) {
			t.Fatalf("runner %q after the move", n.runner())
		}
	})
	t.Run("an unfreeze runs the agent again at its epoch", func(t *testing.T) {
		n := newNet(t, "a", "b")
		a := n.node("a")
		a.m.Freeze("b")
		n.apply(a)
		a.m.Unfreeze(errors.New("b could not take the last events"))
		n.apply(a)
		if epoch, err := a.m.Appends(); !a.running || err != nil || epoch != 1 {
			t.Fatalf("after the unfreeze: running %v, appends at %d (%v)", a.running, epoch, err)
		}
		if !n.saw(EvAbort) {
			t.Fatal("no abort event")
		}
	})
	t.Run("a tail nobody ends is given up by the machine", func(t *testing.T) {
		n := newNet(t, "a", "b")
		a := n.node("a")
		a.m.Freeze("b")
		n.apply(a)
		if !n.settle(50) || !a.running {
			t.Fatalf("after the tail's timeout: running %v, tailing %v", a.running, a.m.Tailing())
		}
	})
	t.Run("a node that restarts in the tail holds the agent, checks, and runs", func(t *testing.T) {
		n := newNet(t, "a", "b")
		a := n.node("a")
		a.m.Freeze("b")
		n.apply(a)
		n.crash(a, false)
		n.start(a)
		n.settle(50)
		if n.runner() != "a" {
			t.Fatalf("runner %q after a restart in the tail", n.runner())
		}
	})
}

// A node that holds the agent active asks a peer that connects what it
// knows, and steps down within that one exchange if the peer knows a newer
// activation: a home restored from a backup stops as soon as it meets the
// machine the agent moved to.
func TestANodeStepsDownWhenAConnectedPeerKnowsANewerActivation(t *testing.T) {
	n := newNet(t, "a", "b")
	a := n.node("a")
	backup := n.record("a")
	n.migrate("a", "b")
	n.settle(100)
	if n.runner() != "b" {
		t.Fatalf("runner %q after the move", n.runner())
	}
	// a's home is restored from the backup while b is cut off: a runs
	// alone at epoch 1.
	n.crash(a, false)
	if err := a.reg.Save(testAgent, backup); err != nil {
		t.Fatal(err)
	}
	n.drop = func(*Message) bool { return true }
	n.crash(n.node("b"), false) // b is down
	n.restored = true
	n.start(a)
	n.settle(50)
	if !a.running {
		t.Fatal("the restored node does not run alone (not strict)")
	}
	b := n.node("b")
	n.start(b)
	n.drop = func(m *Message) bool { return m.Type == MsgAsk && m.From == "b" } // b's startup check gets no answer from a
	n.settle(50)
	n.drop = nil
	// The connection: one ask, one answer.
	a.m.Connected("b")
	n.apply(a)
	n.deliver()
	if a.running {
		t.Fatal("the restored node still runs after one exchange with the holder")
	}
	rec := n.record("a")
	if rec.State != Retired || rec.Peer != "b" || rec.Holder != (Holder{"b", 2}) {
		t.Fatalf("a's record after stepping down: %+v", rec)
	}
	if !n.saw(EvSteppedDown) {
		t.Fatal("no stepped-down event")
	}
	n.restored = false

	t.Run("a peer that knows nothing newer changes nothing", func(t *testing.T) {
		steps := len(b.readies)
		b.m.Connected("a")
		n.apply(b)
		n.deliver()
		if !b.running || len(b.readies) < steps {
			t.Fatal("the holder stopped after asking a peer that knows nothing newer")
		}
		if rec := n.record("b"); rec.State != Active || rec.Epoch != 2 {
			t.Fatalf("b's record: %+v", rec)
		}
	})
	t.Run("a node that does not hold the agent asks nothing", func(t *testing.T) {
		a.m.Connected("b")
		if a.m.HasReady() {
			t.Fatalf("a retired node asked: %+v", a.m.Ready())
		}
	})
}

// An activation completes before the agent runs: the promotion is asked
// for with the activation, the runtime waits for it, a failed promotion is
// asked for again every Retry ticks, and appends wait meanwhile.
func TestTheAgentRunsOnlyOnceItsPromotionSucceeded(t *testing.T) {
	n := newNet(t, "a", "b")
	failures := 3
	n.promote = func(nd *testNode) error {
		if failures > 0 {
			failures--
			return errors.New("no space left on device")
		}
		return nil
	}
	n.migrate("a", "b")
	b := n.node("b")
	for range 100 {
		n.tick()
		if b.m.Promoting() {
			break
		}
	}
	if !b.m.Promoting() || b.running {
		t.Fatalf("b after activating with a failing promotion: promoting %v, running %v", b.m.Promoting(), b.running)
	}
	if _, err := b.m.Appends(); !errors.Is(err, ErrActivating) {
		t.Fatalf("an append while activating: %v, want ErrActivating", err)
	}
	n.settle(100)
	if failures != 0 || !b.running || b.m.Promoting() {
		t.Fatalf("after the promotion was retried: %d failures left, running %v", failures, b.running)
	}
	promotes := 0
	for _, rd := range b.readies {
		if rd.Promote {
			promotes++
		}
	}
	if promotes != 4 {
		t.Fatalf("the promotion was asked for %d times, want 4 (three failures, then success)", promotes)
	}

	t.Run("a node restarted before its promotion completed promotes before it runs", func(t *testing.T) {
		n.crash(b, false)
		n.start(b)
		b.m.Unpromoted()
		failures = 1
		n.apply(b)
		if b.running {
			t.Fatal("b runs before its promotion completed")
		}
		n.settle(100)
		if !b.running {
			t.Fatal("b does not run once its promotion completed")
		}
	})
}

// A node whose registry is restored from a copy older than what it
// decided learns so from the first peer that knows: that peer knows it as
// the holder of an epoch above its highest. It relearns its registry from
// every peer, as after a lost one, and takes the agent back as the holder
// it was.
func TestARegistryRestoredFromAnOlderCopyIsRelearntFromThePeers(t *testing.T) {
	n := newNet(t, "a", "b")
	b := n.node("b")
	backup := n.record("b") // b knows of the agent, held by a
	n.migrate("a", "b")
	n.settle(100)
	if n.runner() != "b" {
		t.Fatalf("runner %q after the move", n.runner())
	}
	n.crash(b, false)
	if err := b.reg.Save(testAgent, backup); err != nil {
		t.Fatal(err)
	}
	n.start(b)
	b.m.Connected("a")
	n.apply(b)
	n.settle(100)
	if !n.saw(EvRegistryLost) || !n.saw(EvRelearned) {
		t.Fatal("b did not learn that its registry was behind")
	}
	if rec := n.record("b"); n.runner() != "b" || rec.State != Active || rec.Epoch != 2 {
		t.Fatalf("after relearning: runner %q, b's record %+v", n.runner(), rec)
	}
}

// A caller that cannot write the record that froze the agent for a
// proposal gives the migration up: the agent runs again, the proposal is
// never sent, and an abort fences the target.
func TestAMigrationGivenUpBeforeItsProposalWasSentSendsOnlyAnAbort(t *testing.T) {
	n := newNet(t, "a", "b")
	a := n.node("a")
	if err := a.m.Migrate("b", testFiles); err != nil {
		t.Fatal(err)
	}
	if !a.m.GiveUp(errors.New("the disk is full")) {
		t.Fatal("GiveUp before the point of no return did nothing")
	}
	rd := a.m.Ready()
	for _, msg := range rd.Messages {
		if msg.Type == MsgPropose {
			t.Fatalf("the proposal is still to be sent: %+v", rd.Messages)
		}
	}
	if !rd.Persist || rd.Record.State != Active || rd.Messages[len(rd.Messages)-1].Type != MsgAbort {
		t.Fatalf("Ready %+v: want active persisted and an abort", rd)
	}
	n.apply(a)
	n.settle(50)
	if n.runner() != "a" || !n.saw(EvAbort) {
		t.Fatalf("runner %q after giving up", n.runner())
	}
	if a.m.GiveUp(errors.New("again")) {
		t.Fatal("GiveUp with no migration did something")
	}
}
