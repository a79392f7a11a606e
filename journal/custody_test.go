package journal

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// handedActivation is b's holder.activated at epoch 2 after a's epoch 1,
// carrying ho, after prev in b's chain (nil: b's first event).
func handedActivation(t *testing.T, b Signer, prev *Event, clock uint64, a string, ho *Handover) *Event {
	t.Helper()
	body, _ := json.Marshal(ActivatedBody{Holder: Bound{Peer: b.Machine(), Epoch: 2}, From: Bound{Peer: a, Epoch: 1, Seq: 1}, Handover: ho})
	st := Stamp{Seq: 1, Clock: clock, Epoch: 2, Time: testTime}
	if prev != nil {
		st.Seq, st.Prev = prev.Seq+1, prev.ID
	}
	e, err := NewEvent(b, st, Draft{Type: ActivatedType, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestAnActivationCountsOnlyWithTheOldHoldersHandover(t *testing.T) {
	a, b, c := seededSigner(t, 1), seededSigner(t, 2), seededSigner(t, 3)
	ctx := context.Background()
	l, id := agentLog(t, a)
	for _, p := range []Signer{b, c} {
		if _, err := l.Append(ctx, a, 0, memberDraft(MemberAddedType, MemberBody{Peer: p.Machine()})); err != nil {
			t.Fatal(err)
		}
	}
	good, err := SignHandover(a, id, 1, b.Machine(), 2)
	if err != nil {
		t.Fatal(err)
	}
	toC, _ := SignHandover(a, id, 1, c.Machine(), 2)
	byC, _ := SignHandover(c, id, 1, b.Machine(), 2)
	otherAgent, _ := SignHandover(a, "0f0e0d0c-0b0a-4908-8706-050403020100", 1, b.Machine(), 2)
	forgedSig := good
	forgedSig.Sig = byC.Sig
	for _, tc := range []struct {
		name string
		ho   *Handover
		ok   bool
	}{
		{"the old holder's handover to the writer", &good, true},
		{"no handover", nil, false},
		{"a handover to another machine", &toC, false},
		{"a handover signed by a machine that did not hold it", &byC, false},
		{"a handover of another agent", &otherAgent, false},
		{"a signature that is not the old holder's", &forgedSig, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := handedActivation(t, b, nil, 10, a.Machine(), tc.ho)
			err := Custody(id, e, MembersOf(id, l.Events()))
			if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, ErrNoCustody) {
				t.Fatalf("Custody: %v, want ok %v", err, tc.ok)
			}
			// A log takes from elsewhere only what Custody takes.
			fresh, ferr := OpenLog(newJournal(t), LogOptions{Agent: id})
			if ferr != nil {
				t.Fatal(ferr)
			}
			defer fresh.Close()
			added, _ := fresh.Add(ctx, append(l.Events(), e)...)
			if stored := len(added) == len(l.Events())+1; stored != tc.ok {
				t.Fatalf("stored %d of %d events, want the activation stored: %v", len(added), len(l.Events())+1, tc.ok)
			}
			if errs := Uncustodied(id, append(l.Events(), e)); len(errs) == 0 != tc.ok {
				t.Fatalf("Uncustodied: %v", errs)
			}
		})
	}
	// The writer itself cannot append one without the handover either.
	body, _ := json.Marshal(ActivatedBody{Holder: Bound{Peer: b.Machine(), Epoch: 2}, From: Bound{Peer: a.Machine(), Epoch: 1, Seq: 1}})
	if _, err := l.Append(ctx, b, 2, Draft{Type: ActivatedType, Body: body}); !errors.Is(err, ErrNoCustody) {
		t.Fatalf("an append of an activation without a handover: %v", err)
	}
}

// Activations written before an agent from before members named its
// first members knew no custody: they still count.
func TestActivationsFromBeforeMembersStillCount(t *testing.T) {
	a, b := seededSigner(t, 1), seededSigner(t, 2)
	const legacy = "0f0e0d0c-0b0a-4908-8706-050403020100"
	old := handedActivation(t, b, nil, 5, a.Machine(), nil)
	w := &writer{s: a}
	founder := w.next(t, 9, MemberAddedType, `{"peer":"`+a.Machine()+`","founder":true}`)
	added := w.next(t, 10, MemberAddedType, `{"peer":"`+b.Machine()+`"}`)
	evs := []*Event{old, founder, added}
	if errs := Uncustodied(legacy, evs); len(errs) != 0 {
		t.Fatalf("an activation from before members: %v", errs)
	}
	late := handedActivation(t, b, old, 11, a.Machine(), nil)
	if errs := Uncustodied(legacy, append(evs, late)); len(errs) != 1 {
		t.Fatalf("an activation after the founders without a handover: %v", errs)
	}
}
