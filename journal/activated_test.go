package journal

import (
	"encoding/json"
	"slices"
	"testing"
)

// activation is the holder.activated event target writes at epoch, saying
// that source's epoch from ends at seq.
func activation(t *testing.T, target Signer, seq, clock, epoch uint64, source string, from, fromSeq uint64) *Event {
	t.Helper()
	body, _ := json.Marshal(ActivatedBody{Holder: Bound{Peer: target.Machine(), Epoch: epoch}, From: Bound{Peer: source, Epoch: from, Seq: fromSeq}})
	e, err := NewEvent(target, Stamp{Seq: seq, Clock: clock, Epoch: epoch, Time: testTime}, Draft{Type: ActivatedType, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEventsAnOldHolderWritesUnderAnEpochThatEndedAreSetAside(t *testing.T) {
	s, b := newSigner(t), newSigner(t)
	w := &writer{s: s}
	at := func(clock, epoch uint64, body string) *Event {
		e, err := NewEvent(s, Stamp{Seq: w.head.Seq + 1, Prev: w.head.ID, Clock: clock, Epoch: epoch, Time: testTime}, Draft{Type: "note", Body: json.RawMessage(body)})
		if err != nil {
			t.Fatal(err)
		}
		w.head = Head{Seq: e.Seq, ID: e.ID}
		return e
	}
	s1, s2 := at(1, 1, `{"n":1}`), at(2, 1, `{"n":2}`)
	act := activation(t, b, 1, 3, 2, s.Machine(), 1, 2) // b activated 2; s's epoch 1 ends at seq 2
	s3 := at(4, 1, `{"stale":true}`)                    // s ran on under epoch 1
	all := []*Event{s1, s2, act, s3}

	view, aside := Readable(all)
	if !slices.Equal(ids(aside), ids([]*Event{s3})) {
		t.Fatalf("set aside %v, want the stale event", ids(aside))
	}
	if why := Quarantined(all); len(why) != 1 || why[s3.ID] != AsideStaleEpoch {
		t.Fatalf("Quarantined = %v, want the stale event as %s", why, AsideStaleEpoch)
	}
	if len(view) != 3 || VectorOf(all)[s.Machine()].Seq != 2 {
		t.Fatalf("view %v, vector %v", ids(view), VectorOf(all))
	}
	if again, _ := Readable([]*Event{s3, s1, act, s2}); len(again) != 3 {
		t.Fatal("the order the events arrived in changed what is read")
	}

	t.Run("an offline edit of the old holder (epoch 0) stands", func(t *testing.T) {
		w.head = Head{Seq: s2.Seq, ID: s2.ID}
		edit := at(4, 0, `{"offline":true}`)
		if _, aside := Readable([]*Event{s1, s2, act, edit}); len(aside) != 0 {
			t.Fatalf("set aside %v", ids(aside))
		}
	})
	t.Run("an activation written by another than the holder it names counts for nothing", func(t *testing.T) {
		c := newSigner(t) // c signs an activation naming b as the holder
		body, _ := json.Marshal(ActivatedBody{Holder: Bound{Peer: b.Machine(), Epoch: 2}, From: Bound{Peer: s.Machine(), Epoch: 1, Seq: 0}})
		byC, err := NewEvent(c, Stamp{Seq: 1, Clock: 5, Epoch: 2, Time: testTime}, Draft{Type: ActivatedType, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if _, aside := Readable([]*Event{s1, s2, byC}); len(aside) != 0 {
			t.Fatalf("a forged activation set aside %v", ids(aside))
		}
	})
	t.Run("a log sets stale events aside as they arrive, in either order", func(t *testing.T) {
		for _, order := range [][]*Event{{s1, s2, act, s3}, {s1, s2, s3, act}} {
			l := mustOpen(t, newJournal(t))
			for _, e := range order {
				if _, err := l.Add(t.Context(), e); err != nil {
					t.Fatal(err)
				}
			}
			if v := l.Vector(); v[s.Machine()] != VectorOf(all)[s.Machine()] {
				t.Fatalf("the log's vector %v, VectorOf %v", v, VectorOf(all))
			}
		}
	})
}

func TestAnActivationBodyIsReadStrictly(t *testing.T) {
	for body, want := range map[string]bool{
		`{"from":{"epoch":1,"peer":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:             true,
		`{"from":{"epoch":1,"peer":"a"},"holder":{"epoch":2,"peer":"b"},"note":"newer"}`:      true,
		`{"From":{"epoch":1,"peer":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:             false,
		`{"from":{"epoch":1,"peer":"a","seq":null},"holder":{"epoch":2,"peer":"b"}}`:          false,
		`{"from":{"epoch":1.5,"peer":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:           false,
		`{"from":{"epoch":1,"peer":"a","seq":"5"},"holder":{"epoch":2,"peer":"b"}}`:           false,
		`{"from":{"epoch":1,"PEER":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:             false,
		`{"from":null,"holder":{"epoch":2,"peer":"b"}}`:                                       false,
		`{"from":{"epoch":-1,"peer":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:            false,
		`{"from":{"epoch":1,"id":"bafy","peer":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`: true,
		`{"from":{"epoch":1,"id":5,"peer":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:      false,
		`{"from":{"epoch":1,"id":null,"peer":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:   false,
	} {
		canon, err := Canonical([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := readActivated(canon); ok != want {
			t.Errorf("%s: read %v, want %v", body, ok, want)
		}
	}
}

// A node restored from a backup made before it wrote its last events of an
// epoch writes again from its old chain position, under that epoch: a
// branch beside the events it had written before it handed the agent on.
// The activation names the head the old holder froze at by id, so the
// restored branch is stale, not a fork: the events it wrote before the
// move read on, and so does what it writes next at epoch 0.
func TestARestoredHoldersBranchIsStaleAndTheEventsItHadWrittenReadOn(t *testing.T) {
	s, b := newSigner(t), newSigner(t)
	note := func(prev *Event, clock, epoch uint64, body string) *Event {
		st := Stamp{Seq: 1, Clock: clock, Epoch: epoch, Time: testTime}
		if prev != nil {
			st.Seq, st.Prev = prev.Seq+1, prev.ID
		}
		e, err := NewEvent(s, st, Draft{Type: "note", Body: json.RawMessage(body)})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	s1 := note(nil, 1, 1, `{"n":1}`)                       // in the backup
	a2, a3 := note(s1, 2, 1, `{"acked":2}`), (*Event)(nil) // acknowledged after the backup, before the move
	a3 = note(a2, 3, 1, `{"acked":3}`)
	body, _ := json.Marshal(ActivatedBody{Holder: Bound{Peer: b.Machine(), Epoch: 2}, From: Bound{Peer: s.Machine(), Epoch: 1, Seq: 3, ID: a3.ID}})
	act, err := NewEvent(b, Stamp{Seq: 1, Clock: 4, Epoch: 2, Time: testTime}, Draft{Type: ActivatedType, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	r2 := note(s1, 2, 1, `{"restored":2}`) // the restored home runs on alone under epoch 1
	r3 := note(r2, 3, 1, `{"restored":3}`)
	r4 := note(r3, 5, 1, `{"restored":4}`)
	all := []*Event{s1, a2, a3, act, r2, r3, r4}

	view, aside := Readable(all)
	if want := ids([]*Event{r2, r3, r4}); !slices.Equal(sortedIDs(aside), sortedIDs([]*Event{r2, r3, r4})) {
		t.Fatalf("set aside %v, want the restored branch %v", ids(aside), want)
	}
	if h := VectorOf(all)[s.Machine()]; len(view) != 4 || h.Seq != 3 || h.ID != a3.ID {
		t.Fatalf("view %v, vector %v: the events written before the move must read on", ids(view), VectorOf(all))
	}
	for id, why := range Quarantined(all) {
		if why != AsideStaleEpoch {
			t.Errorf("%s is aside as %s, want %s", id, why, AsideStaleEpoch)
		}
	}
	if probs := Check(all); len(probs) != 0 {
		t.Fatalf("Check: %v", probs)
	}

	t.Run("without the head it names, only the seq says", func(t *testing.T) {
		part := []*Event{s1, act, r2, r3, r4}
		_, aside := Readable(part)
		if !slices.Equal(ids(aside), ids([]*Event{r4})) {
			t.Fatalf("set aside %v, want only the event above seq 3", ids(aside))
		}
	})
	t.Run("a copy missing an ancestor of the head judges nothing below it", func(t *testing.T) {
		part := []*Event{s1, a3, act, r2, r3, r4} // a2 has not arrived
		why := Quarantined(part)
		if why[s1.ID] != "" {
			t.Fatalf("s1, below the missing a2, is set aside as %s", why[s1.ID])
		}
		for _, e := range []*Event{r3, r4} {
			if why[e.ID] != AsideStaleEpoch {
				t.Fatalf("%s is %q, want %s", e.Body, why[e.ID], AsideStaleEpoch)
			}
		}
	})
	t.Run("what the old holder writes next at epoch 0 reads on", func(t *testing.T) {
		edit := note(a3, 6, 0, `{"offline":true}`)
		view, _ := Readable(append(slices.Clone(all), edit))
		if !slices.Contains(ids(view), edit.ID) {
			t.Fatal("the next offline edit is not read")
		}
	})
	// Before the activation reached it, the old holder healed the fork of
	// its own chain (a third machine brought it the events it had written
	// before the move). The heal keeps the longer branch and signs the
	// other's content again after it; once the activation arrives, the
	// restored branch's content is set aside, wherever the heal put it, and
	// the events written before the move read on. A heal after that makes
	// the chain whole again.
	readsAfterHeals := func(t *testing.T, events []*Event) {
		t.Helper()
		healed, err := Heal(events, s, testTime)
		if err != nil {
			t.Fatal(err)
		}
		with := append(slices.Clone(events), act)
		with = append(with, healed...)
		check := func(view []*Event) {
			t.Helper()
			for _, e := range view {
				if e.Type == "note" && slices.Contains([]string{`{"restored":2}`, `{"restored":3}`, `{"restored":4}`}, string(e.Body)) {
					t.Fatalf("the restored branch's content is read: %s (%s)", e.Body, e.ID)
				}
			}
			var bodies []string
			for _, e := range view {
				bodies = append(bodies, string(e.Body))
			}
			for _, want := range []string{`{"n":1}`, `{"acked":2}`, `{"acked":3}`} {
				if !slices.Contains(bodies, want) {
					t.Fatalf("%s is not read: %v", want, bodies)
				}
			}
		}
		view, _ := Readable(with)
		check(view)
		again, err := Heal(with, s, testTime) // what follows the stale events is a broken chain until then
		if err != nil {
			t.Fatal(err)
		}
		with = append(with, again...)
		view, _ = Readable(with)
		check(view)
		if probs := Check(with); len(probs) != 0 {
			t.Fatalf("after the second heal: %v", probs)
		}
	}
	t.Run("a heal that kept the restored branch", func(t *testing.T) {
		readsAfterHeals(t, []*Event{s1, a2, a3, r2, r3, r4}) // the restored branch is the longer
	})
	t.Run("a heal that signed the restored branch's content again", func(t *testing.T) {
		readsAfterHeals(t, []*Event{s1, a2, a3, r2}) // the branch written before the move is the longer
	})
	t.Run("a log agrees in any order of arrival", func(t *testing.T) {
		want := VectorOf(all)[s.Machine()]
		for _, order := range [][]*Event{all, {s1, r2, r3, r4, a2, a3, act}, {act, r4, r3, r2, s1, a3, a2}} {
			l := mustOpen(t, newJournal(t))
			for _, e := range order {
				if _, err := l.Add(t.Context(), e); err != nil {
					t.Fatal(err)
				}
			}
			if v := l.Vector(); v[s.Machine()] != want {
				t.Fatalf("the log's vector %v, want %v", v[s.Machine()], want)
			}
		}
	})
}

func sortedIDs(evs []*Event) []string {
	out := ids(evs)
	slices.Sort(out)
	return out
}
