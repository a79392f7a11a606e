package fencing

import (
	"errors"
	"slices"
	"testing"

	"github.com/tern-dev/tern/internal/flaws"
)

func TestAMigrationCommits(t *testing.T) {
	n := newNet(t, "a", "b")
	n.migrate("a", "b")
	if !n.settle(100) {
		t.Fatal("did not settle")
	}
	if n.runner() != "b" {
		t.Fatalf("runner %q, want b", n.runner())
	}
	a, b := n.record("a"), n.record("b")
	if a.State != Retired || a.Epoch != 1 || a.Peer != "b" || a.Holder != (Holder{"b", 2}) {
		t.Errorf("source record %+v: want retired from epoch 1, handed to b at 2", a)
	}
	if b.State != Active || b.Epoch != 2 || b.Decision(2) != Activated {
		t.Errorf("target record %+v: want active at 2 with activated(2)", b)
	}
	if !n.saw(EvCommit) || !n.saw(EvActivated) {
		t.Errorf("events %v: want commit and activated", n.events)
	}
	if len(n.node("b").staged) != 0 {
		t.Error("the target's staging area is not empty after promote")
	}
}

func TestTheTargetReceivesOnlyWhatItLacks(t *testing.T) {
	n := newNet(t, "a", "b")
	b := n.node("b")
	has := testFiles[1]
	cfg := n.config("b")
	cfg.Have = func(f File) bool { return f == has }
	m, err := New(cfg, n.record("b"))
	if err != nil {
		t.Fatal(err)
	}
	b.m = m
	n.apply(b)
	n.settle(20)
	var sent []int
	n.drop = func(m *Message) bool {
		if m.Type == MsgTransfer {
			sent = append(sent, m.Index)
		}
		return false
	}
	n.migrate("a", "b")
	n.settle(100)
	if n.runner() != "b" {
		t.Fatalf("runner %q, want b", n.runner())
	}
	if len(sent) != 2 || sent[0] != 0 || sent[1] != 2 {
		t.Errorf("files sent %v, want [0 2] (the target had file 1)", sent)
	}
}

// TestPersistBeforeReply checks every answer a node sends that depends on
// its record goes out in the same Ready that persists the record, which
// the caller applies before sending.
func TestPersistBeforeReply(t *testing.T) {
	n := newNet(t, "a", "b")
	n.migrate("a", "b")
	n.settle(100)
	checked := map[string]bool{}
	for _, nd := range n.nodes {
		for _, rd := range nd.readies {
			for _, msg := range rd.Messages {
				var ok bool
				var what string
				switch {
				case msg.Type == MsgPropose:
					what = "a proposal persists frozen with the next epoch, and stops the runtime"
					ok = rd.Persist && rd.Record.State == Frozen && rd.Record.Next == msg.Epoch && rd.Stop
				case msg.Type == MsgAccept:
					what = "an accept persists staging of that epoch"
					ok = rd.Persist && rd.Record.State == Staging && rd.Record.Epoch == msg.Epoch
				case msg.Type == MsgPrepared:
					what = "prepared persists prepared"
					ok = rd.Persist && rd.Record.Prepared
				case msg.Type == MsgActivate:
					what = "an activate persists the point of no return"
					ok = rd.Persist && rd.Record.Committing
				case msg.Type == MsgDecision && msg.Decision == Activated:
					what = "an activated answer persists activated(n) and asks for the promotion, before anything runs"
					ok = rd.Persist && rd.Record.Decision(msg.Epoch) == Activated && rd.Promote && !rd.Run
				default:
					continue
				}
				checked[what] = true
				if !ok {
					t.Errorf("%s: %s sent without it (Ready %+v)", nd.id, &msg, rd)
				}
			}
		}
	}
	if len(checked) != 5 {
		t.Errorf("checked %d kinds of answer, want 5: %v", len(checked), checked)
	}
}

func TestAProposalNotNewerThanTheHighestSeenIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		epoch uint64
	}{
		{"an epoch equal to the highest", 5},
		{"an older epoch", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := Record{Highest: 5, Holder: Holder{"a", 4}}
			m, err := New(Config{Self: "b", Agent: testAgent, Peers: []string{"a"}, Incarnation: 1}, rec)
			if err != nil {
				t.Fatal(err)
			}
			m.Advance()
			if err := m.Step(Message{Type: MsgPropose, From: "a", To: "b", Agent: testAgent, Epoch: tc.epoch, Files: testFiles}); err != nil {
				t.Fatal(err)
			}
			rd := m.Ready()
			if rd.Persist {
				t.Errorf("a refusal persisted %+v", rd.Record)
			}
			if len(rd.Messages) != 1 || rd.Messages[0].Type != MsgRefuse || rd.Messages[0].Reason.Err() != ErrStaleEpoch || rd.Messages[0].Highest != 5 {
				t.Fatalf("answer %v: want one refuse, stale, highest 5", rd.Messages)
			}
			if len(rd.Events) != 1 || rd.Events[0].Kind != EvStaleRefused || !errors.Is(rd.Events[0].Err, ErrStaleEpoch) {
				t.Errorf("events %v: want stale_refused", rd.Events)
			}
		})
	}
}

func TestEveryFailureBeforeThePointOfNoReturnAborts(t *testing.T) {
	cases := []struct {
		name    string
		arrange func(n *testNet)
		err     error // in the source's abort event
	}{
		{"a proposal refused as stale, and again under a newer epoch", func(n *testNet) {
			b := n.node("b")
			r := n.record("b")
			r.Highest = 9
			b.reg.Save(testAgent, r)
			n.start(b)
			n.settle(20)
			n.drop = func(m *Message) bool {
				if m.Type == MsgRefuse && m.Reason == ReasonStale && m.Epoch == 2 {
					// Meanwhile b hears of a newer epoch still.
					n.queue = append(n.queue, Message{Type: MsgTell, From: "a", To: "b", Agent: testAgent,
						Nonce: b.m.cfg.Incarnation, Highest: 30, Info: Info{Known: true}})
				}
				return false
			}
		}, ErrStaleEpoch},
		{"a corrupt file", func(n *testNet) {
			n.drop = func(m *Message) bool {
				if m.Type == MsgTransfer && m.Index == 1 {
					m.Data = []byte("fil3")
				}
				return false
			}
		}, ErrHashMismatch},
		{"a cut link", func(n *testNet) { n.drop = func(m *Message) bool { return m.To == "b" || m.From == "b" } }, ErrTimeout},
		{"a target whose registry is lost", func(n *testNet) {
			n.crash(n.node("b"), true)
			n.start(n.node("b"))
			n.drop = dropType(MsgAsk, MsgTell) // it cannot relearn yet
		}, ErrRegistryLost},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNet(t, "a", "b")
			tc.arrange(n)
			n.migrate("a", "b")
			for i := 0; i < 40 && !n.saw(EvAbort); i++ {
				n.tick()
			}
			if n.runner() != "a" {
				t.Fatalf("runner %q, want the source to resume", n.runner())
			}
			var abort *Event
			for i := range n.events {
				if n.events[i].Kind == EvAbort {
					abort = &n.events[i]
				}
			}
			if abort == nil || !errors.Is(abort.Err, tc.err) {
				t.Fatalf("abort event %v, want one because of %v", abort, tc.err)
			}
			if a := n.record("a"); a.State != Active || a.Epoch != 1 || a.Highest < 2 {
				t.Errorf("source record %+v: want active at 1, having seen 2", a)
			}
			n.drop = nil
			n.settle(100)
			if st := n.node("b").m.State(); st == Staging || len(n.node("b").staged) > 0 {
				t.Errorf("the target is left %v with %d staged files", st, len(n.node("b").staged))
			}
		})
	}
}

func TestTheLostActivateReply(t *testing.T) {
	t.Run("a lost activate: the query fences, the source resumes and a late activate is refused", func(t *testing.T) {
		n := newNet(t, "a", "b")
		var lost []Message
		n.drop = func(m *Message) bool {
			if m.Type == MsgActivate && len(lost) == 0 {
				lost = append(lost, *m)
				return true
			}
			return false
		}
		n.migrate("a", "b")
		n.settle(100)
		if n.runner() != "a" || !n.saw(EvResumeByQuery) {
			t.Fatalf("runner %q, events %v: want a to resume by query", n.runner(), n.events)
		}
		if d := n.decision("b", 2); d != Refused {
			t.Fatalf("the target's decision for 2 is %v, want refused (the query fences)", d)
		}
		n.queue = append(n.queue, lost...) // the activate arrives, late
		n.settle(20)
		if n.runner() != "a" {
			t.Fatalf("a late activate won: runner %q", n.runner())
		}
	})
	t.Run("a lost activate answer: the query answers activated and the source retires", func(t *testing.T) {
		n := newNet(t, "a", "b")
		dropped := false
		n.drop = func(m *Message) bool {
			if m.Type == MsgDecision && m.Re == MsgActivate && !dropped {
				dropped = true
				return true
			}
			return false
		}
		n.migrate("a", "b")
		n.settle(100)
		if n.runner() != "b" || !n.saw(EvRetireByQuery) {
			t.Fatalf("runner %q, events %v: want b to run and a to retire by query", n.runner(), n.events)
		}
	})
	t.Run("an unreachable target: the source stays frozen and keeps asking", func(t *testing.T) {
		n := newNet(t, "a", "b")
		n.drop = func(m *Message) bool { return m.Type == MsgDecision || (m.Type == MsgActivate) }
		n.migrate("a", "b")
		queries := 0
		n.drop = func(m *Message) bool {
			if m.Type == MsgQuery {
				queries++
				return true
			}
			return m.Type == MsgDecision || m.Type == MsgActivate
		}
		for i := 0; i < 200; i++ {
			n.tick()
		}
		if a := n.record("a"); a.State != Frozen || !a.Committing {
			t.Fatalf("source %+v: want frozen past the point of no return", a)
		}
		if n.runner() != "" || queries < 50 {
			t.Fatalf("runner %q, %d queries in 200 ticks: want nobody running and the source asking", n.runner(), queries)
		}
	})
	t.Run("unknown never lets a source resume", func(t *testing.T) {
		n := newNet(t, "a", "b", "c")
		n.drop = dropType(MsgDecision) // b activates; a never hears it
		n.migrate("a", "b")
		for i := 0; i < 10; i++ {
			n.tick()
		}
		n.crash(n.node("b"), true) // and b forgets it
		n.start(n.node("b"))
		n.drop = nil
		for i := 0; i < 200; i++ {
			n.tick()
		}
		if a := n.record("a"); a.State != Frozen {
			t.Fatalf("source %+v resumed on unknown", a)
		}
		if b := n.record("b"); b.Floor < 2 || n.decision("b", 2) != Undecided {
			t.Fatalf("relearnt target %+v: want epoch 2 below its floor and undecided", b)
		}
		if n.runner() != "" {
			t.Fatalf("runner %q, want nobody", n.runner())
		}
	})
}

// TestRetireIsCompareAndClear is the third historical bug: an activated
// answer retires a source only while it is frozen on that epoch.
func TestRetireIsCompareAndClear(t *testing.T) {
	stale := Message{Type: MsgDecision, From: "b", To: "a", Agent: testAgent, Epoch: 2, Re: MsgQuery, Decision: Activated}
	for _, tc := range []struct {
		name    string
		flaw    flaws.Flaw
		retires bool
	}{
		{"a stale activated answer does not retire a node that holds a newer epoch", flaws.Sound, false},
		{"the flawed variant retires it, losing the agent", flaws.FlawRetireWithoutCompare, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := Record{Highest: 3, State: Active, Epoch: 3, Holder: Holder{"a", 3},
				Decisions: []Decided{{3, Activated}}}
			m, err := New(Config{Self: "a", Agent: testAgent, Peers: []string{"b"}, Incarnation: 1, Flaw: tc.flaw}, rec)
			if err != nil {
				t.Fatal(err)
			}
			m.Step(Message{Type: MsgTell, From: "b", To: "a", Agent: testAgent, Nonce: 1, Highest: 3, Info: Info{Known: true, Holder: Holder{"a", 3}}})
			if !m.Running() {
				t.Fatal("a does not run after its startup check")
			}
			m.Advance()
			m.Step(stale)
			if retired := m.State() == Retired; retired != tc.retires {
				t.Fatalf("retired: %v, want %v (record %+v)", retired, tc.retires, m.Record())
			}
		})
	}
}

// TestTheQueryFences is the first historical bug: asked about an epoch it
// has no decision for, the target records refused before it answers.
func TestTheQueryFences(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flaw      flaws.Flaw
		activates bool
	}{
		{"after a query, a late activate is refused", flaws.Sound, false},
		{"the flawed query does not fence and the late activate wins", flaws.FlawQueryWithoutFence, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := preparedTarget(t, tc.flaw)
			m.Step(Message{Type: MsgQuery, From: "a", To: "b", Agent: testAgent, Epoch: 2})
			if rd := m.Ready(); rd.Messages[0].Decision != Refused {
				t.Fatalf("query answered %v, want refused", rd.Messages[0].Decision)
			}
			m.Advance()
			m.Step(Message{Type: MsgActivate, From: "a", To: "b", Agent: testAgent, Epoch: 2})
			rec := m.Record()
			if activated := rec.Decision(2) == Activated; activated != tc.activates {
				t.Fatalf("activated after the late activate: %v, want %v", activated, tc.activates)
			}
		})
	}
}

// TestTheQueryAsksWhatWasDecided is the second historical bug: the answer
// comes from the decision record, not from what the target holds now.
func TestTheQueryAsksWhatWasDecided(t *testing.T) {
	for _, tc := range []struct {
		name string
		flaw flaws.Flaw
		want Decision
	}{
		{"a target that activated the epoch and moved on answers activated", flaws.Sound, Activated},
		{"the flawed query asks what the target holds and answers refused", flaws.FlawQueryHeldEpoch, Refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := Record{Highest: 3, State: Retired, Epoch: 2, Peer: "c", Holder: Holder{"c", 3},
				Decisions: []Decided{{2, Activated}}}
			m, err := New(Config{Self: "b", Agent: testAgent, Peers: []string{"a", "c"}, Incarnation: 1, Flaw: tc.flaw}, rec)
			if err != nil {
				t.Fatal(err)
			}
			m.Advance() // its startup ask
			m.Step(Message{Type: MsgQuery, From: "a", To: "b", Agent: testAgent, Epoch: 2})
			if d := m.Ready().Messages[0].Decision; d != tc.want {
				t.Fatalf("answered %v, want %v", d, tc.want)
			}
		})
	}
}

// preparedTarget returns b staging epoch 2 from a, prepared.
func preparedTarget(t *testing.T, flaw flaws.Flaw) *Machine {
	t.Helper()
	rec := Record{Highest: 2, State: Staging, Epoch: 2, Peer: "a", Prepared: true, Holder: Holder{"a", 1}}
	m := &Machine{cfg: Config{Self: "b", Agent: testAgent, Peers: []string{"a"}, Incarnation: 1, Flaw: flaw}, tm: DefaultTiming, rec: rec}
	m.tgt = staging{on: true, files: testFiles, have: []bool{true, true, true}}
	return m
}

func TestSetPeersTakesEffectOnlyOnAnIdleMachine(t *testing.T) {
	m, err := New(Config{Self: "a", Agent: testAgent, Incarnation: 1}, Created("a"))
	if err != nil {
		t.Fatal(err)
	}
	for m.HasReady() {
		m.Ready()
		m.Advance()
	}
	if err := m.Migrate("b", nil); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("migrate to an unknown peer: %v", err)
	}
	if err := m.SetPeers([]string{"b", "c"}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetPeers([]string{"a"}); err == nil {
		t.Fatal("a machine took itself as a peer")
	}
	if err := m.Migrate("b", nil); err != nil {
		t.Fatalf("migrate to a newly paired peer: %v", err)
	}
	if err := m.SetPeers([]string{"c"}); !errors.Is(err, ErrBusy) {
		t.Fatalf("set peers while migrating: %v, want ErrBusy", err)
	}
}

func TestAnOperatorRetiresAFrozenSourceWithoutTheTargetsAnswer(t *testing.T) {
	m, err := New(Config{Self: "a", Agent: testAgent, Peers: []string{"b"}, Incarnation: 1}, Created("a"))
	if err != nil {
		t.Fatal(err)
	}
	m.Step(Message{Type: MsgTell, From: "b", To: "a", Agent: testAgent, Nonce: 1, Info: Info{Known: true}})
	for m.HasReady() {
		m.Ready()
		m.Advance()
	}
	if err := m.Retire(); !errors.Is(err, ErrBusy) {
		t.Fatalf("retire while active: %v", err)
	}
	if err := m.Migrate("b", nil); err != nil {
		t.Fatal(err)
	}
	for m.HasReady() {
		m.Ready()
		m.Advance()
	}
	if err := m.Retire(); err != nil {
		t.Fatal(err)
	}
	rd := m.Ready()
	if !rd.Persist || rd.Record.State != Retired || rd.Record.Validate() != nil || m.Running() {
		t.Fatalf("after retire: %+v", rd.Record)
	}
	if len(rd.Events) != 1 || rd.Events[0].Kind != EvOverride {
		t.Fatalf("events %v", rd.Events)
	}
}

// A target that has just started asks its peers what they know before it
// takes a proposal. The source does not give up on that refusal: it
// proposes again until the target has its answers, and aborts, saying why,
// only if the target is still asking when the source would abort anyway.
func TestAProposalToATargetStillAskingItsPeersIsMadeAgain(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answerIn   int  // ticks until b's peers' answers reach it; 0: never
		strict     bool // b waits for an answer however long it takes
		wantRunner string
	}{
		{"the target's peers answer: the move commits", 4, false, "b"},
		{"they never answer: the startup check ends on its own and the move commits", 0, false, "b"},
		{"they never answer a strict target: the move aborts as busy", 0, true, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNet(t, "a", "b", "c")
			n.crash(n.node("c"), false)
			n.drop = func(m *Message) bool { return m.Type == MsgTell && m.To == "b" }
			b := n.node("b")
			n.start(b) // asks a and c; neither answer arrives yet
			if tc.strict {
				cfg := n.config("b")
				cfg.Strict = true
				m, err := New(cfg, n.record("b"))
				if err != nil {
					t.Fatal(err)
				}
				b.m = m
				n.apply(b)
			}
			n.migrate("a", "b")
			n.deliver()
			refused := false
			for _, rd := range b.readies {
				for _, m := range rd.Messages {
					refused = refused || m.Type == MsgRefuse && m.Reason == ReasonStarting
				}
			}
			if !refused {
				t.Fatal("b did not refuse the proposal as still starting")
			}
			if n.saw(EvAbort) {
				t.Fatal("a aborted on the first refusal")
			}
			for i := 0; i < 40 && n.node("a").m.Resolving(); i++ {
				if i == tc.answerIn && tc.answerIn > 0 {
					n.drop = nil
				}
				n.tick()
			}
			if n.runner() != tc.wantRunner {
				t.Fatalf("runner %q, want %s", n.runner(), tc.wantRunner)
			}
			if tc.wantRunner == "a" {
				i := slices.IndexFunc(n.events, func(e Event) bool { return e.Kind == EvAbort })
				if i < 0 || !errors.Is(n.events[i].Err, ErrBusy) {
					t.Fatalf("events %v: want an abort for busy", n.events)
				}
			}
		})
	}
}

// A source that restarts past its point of no return stays frozen until
// the target tells it what it decided. A move proposed to it meanwhile (by
// that target, which runs the agent now) is not refused as busy: the node
// will know soon, so the proposer proposes again, and the move commits
// once the restarted node has retired; if the answer never comes, the
// move aborts as busy when it would have anyway.
func TestAProposalToANodeResolvingItsCommitIsMadeAgain(t *testing.T) {
	for _, tc := range []struct {
		name       string
		answerIn   int // ticks until the decision reaches a; 0: never
		wantRunner string
	}{
		{"the decision reaches it: the move back commits", 4, "a"},
		{"it never does: the move back aborts as busy", 0, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNet(t, "a", "b")
			n.drop = func(m *Message) bool { return m.Type == MsgDecision && m.To == "a" }
			n.migrate("a", "b")
			for range 3 {
				n.tick()
			}
			if n.runner() != "b" {
				t.Fatalf("runner %q, want b to run after activating", n.runner())
			}
			a := n.node("a")
			n.crash(a, false)
			n.start(a)
			if rec := n.record("a"); rec.State != Frozen || !rec.Committing {
				t.Fatalf("a restarted as %+v, want frozen past the point of no return", rec)
			}
			n.migrate("b", "a")
			n.deliver()
			refused := false
			for _, rd := range a.readies {
				for _, m := range rd.Messages {
					refused = refused || m.Type == MsgRefuse && m.Reason == ReasonStarting
				}
			}
			if !refused || n.saw(EvAbort) {
				t.Fatalf("a did not refuse the proposal as one it will answer soon (events %v)", n.events)
			}
			for i := 0; i < 40 && n.node("b").m.Resolving(); i++ {
				if i == tc.answerIn && tc.answerIn > 0 {
					n.drop = nil
				}
				n.tick()
			}
			if n.runner() != tc.wantRunner {
				t.Fatalf("runner %q, want %s", n.runner(), tc.wantRunner)
			}
			if tc.wantRunner == "b" {
				i := slices.IndexFunc(n.events, func(e Event) bool { return e.Kind == EvAbort })
				if i < 0 || !errors.Is(n.events[i].Err, ErrBusy) {
					t.Fatalf("events %v: want an abort for busy", n.events)
				}
			}
		})
	}
}

// A target that has seen the epoch proposed (a peer told it while it
// started) refuses it as stale and takes nothing; the source proposes
// again, once, above everything either has seen, and the move commits.
func TestAStaleRefusalIsProposedAgainUnderANewerEpoch(t *testing.T) {
	n := newNet(t, "a", "b")
	b := n.node("b")
	r := n.record("b")
	r.Highest = 9
	b.reg.Save(testAgent, r)
	n.start(b)
	n.settle(20)
	n.migrate("a", "b")
	n.settle(100)
	if !n.saw(EvStaleRefused) || n.saw(EvAbort) {
		t.Fatalf("events %v: want a stale refusal and no abort", n.events)
	}
	if n.runner() != "b" {
		t.Fatalf("runner %q, want b", n.runner())
	}
	if rec := n.record("b"); rec.Epoch != 10 || rec.Decision(2) == Activated {
		t.Errorf("target record %+v: want active at 10, epoch 2 never activated", rec)
	}
}
