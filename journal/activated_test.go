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
		`{"from":{"epoch":1,"peer":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:        true,
		`{"from":{"epoch":1,"peer":"a"},"holder":{"epoch":2,"peer":"b"},"note":"newer"}`: true,
		`{"From":{"epoch":1,"peer":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:        false,
		`{"from":{"epoch":1,"peer":"a","seq":null},"holder":{"epoch":2,"peer":"b"}}`:     false,
		`{"from":{"epoch":1.5,"peer":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:      false,
		`{"from":{"epoch":1,"peer":"a","seq":"5"},"holder":{"epoch":2,"peer":"b"}}`:      false,
		`{"from":{"epoch":1,"PEER":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:        false,
		`{"from":null,"holder":{"epoch":2,"peer":"b"}}`:                                  false,
		`{"from":{"epoch":-1,"peer":"a","seq":5},"holder":{"epoch":2,"peer":"b"}}`:       false,
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
