package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// memberDraft is a member.added or member.removed draft.
func memberDraft(typ string, b MemberBody) Draft {
	raw, _ := json.Marshal(b)
	return Draft{Type: typ, Body: raw}
}

// agentLog opens a journal of a new agent created by creator: its id
// derived from creator's key, its first event creator's member.added.
func agentLog(t *testing.T, creator Signer) (*Log, string) {
	t.Helper()
	id, genesis := NewAgentID(creator.Machine())
	l, err := OpenLog(newJournal(t), LogOptions{Agent: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, err := l.Append(context.Background(), creator, 0, genesis); err != nil {
		t.Fatalf("the creator's own genesis: %v", err)
	}
	return l, id
}

func TestAnAgentIDIsDerivedFromItsCreatorsKey(t *testing.T) {
	a, b := seededSigner(t, 1), seededSigner(t, 2)
	id, genesis := NewAgentID(a.Machine())
	if !Derived(id) || id[14] != '8' {
		t.Fatalf("id %s is not a derived (version 8) UUID", id)
	}
	var body MemberBody
	json.Unmarshal(genesis.Body, &body)
	if genesis.Type != MemberAddedType || body.Peer != a.Machine() || AgentIDOf(a.Machine(), body.Nonce) != id {
		t.Fatalf("genesis %s %s does not derive %s", genesis.Type, genesis.Body, id)
	}
	if AgentIDOf(b.Machine(), body.Nonce) == id {
		t.Fatal("another machine's key derives the same id from the nonce")
	}
	// The genesis names its writer the first member only when its writer
	// is the machine the id derives from: b copying a's genesis is not.
	ga, _ := NewEvent(a, Stamp{Seq: 1, Clock: 1, Time: testTime}, genesis)
	gb, _ := NewEvent(b, Stamp{Seq: 1, Clock: 1, Time: testTime}, memberDraft(MemberAddedType, MemberBody{Peer: b.Machine(), Nonce: body.Nonce}))
	if m := MembersOf(id, []*Event{ga}); !m.Has(a.Machine()) || m.Has(b.Machine()) || m.Open() {
		t.Fatalf("members of a's genesis: %+v", m.List())
	}
	if m := MembersOf(id, []*Event{gb}); m.Has(b.Machine()) || len(m.List()) != 0 {
		t.Fatalf("b's copy of the genesis made it a member: %+v", m.List())
	}
}

func TestOnlyMembersAppend(t *testing.T) {
	a, b, stranger := seededSigner(t, 1), seededSigner(t, 2), seededSigner(t, 3)
	ctx := context.Background()
	l, id := agentLog(t, a)
	_, err := l.Append(ctx, stranger, 0, draft("message", `{"role":"user","content":[{"type":"text","text":"hi"}]}`))
	var nm *NotMemberError
	if !errors.As(err, &nm) || !errors.Is(err, ErrNotMember) || nm.Machine != stranger.Machine() || nm.Agent != id {
		t.Fatalf("a stranger's append: %v, want a NotMemberError naming it", err)
	}
	if len(l.Events()) != 1 {
		t.Fatalf("%d events after a refused append, want the genesis only", len(l.Events()))
	}
	if _, err := l.Append(ctx, a, 0, memberDraft(MemberAddedType, MemberBody{Peer: b.Machine()})); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, b, 0, draft("message", `{"role":"user","content":[{"type":"text","text":"from b"}]}`)); err != nil {
		t.Fatalf("a member's append: %v", err)
	}
	// A stranger cannot make itself a member either.
	if _, err := l.Append(ctx, stranger, 0, memberDraft(MemberAddedType, MemberBody{Peer: stranger.Machine()})); !errors.Is(err, ErrNotMember) {
		t.Fatalf("a stranger adding itself: %v", err)
	}
}

func TestAStrangersEventsAreNeverStoredByAdd(t *testing.T) {
	a, stranger := seededSigner(t, 1), seededSigner(t, 3)
	ctx := context.Background()
	l, id := agentLog(t, a)
	w := &writer{s: stranger}
	forged := []*Event{w.next(t, 2, "message", `{"role":"user","content":[{"type":"text","text":"forged"}]}`),
		w.next(t, 3, MemberAddedType, fmt.Sprintf(`{"peer":%q}`, stranger.Machine()))}
	added, err := l.Add(ctx, forged...)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 0 || len(l.Events()) != 1 || l.Refused() != 2 {
		t.Fatalf("added %d, holds %d, refused %d: want 0, 1, 2", len(added), len(l.Events()), l.Refused())
	}
	// A peer offers them again at its next round: they count once.
	if _, err := l.Add(ctx, forged...); err != nil || l.Refused() != 2 {
		t.Fatalf("offered again: refused %d (%v), want still 2", l.Refused(), err)
	}
	again, err := OpenLog(l.path, LogOptions{Agent: id})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if len(again.Events()) != 1 {
		t.Fatalf("%d events on disk, want the genesis only", len(again.Events()))
	}
	if errs := Strangers(id, append(l.Events(), forged...)); len(errs) != 1 || !errors.Is(errs[0], ErrNotMember) {
		t.Fatalf("Strangers: %v, want one error for the stranger", errs)
	}
}

func TestARemovedMachinesLaterEventsDoNotCount(t *testing.T) {
	a, b := seededSigner(t, 1), seededSigner(t, 2)
	ctx := context.Background()
	l, id := agentLog(t, a)
	l.Append(ctx, a, 0, memberDraft(MemberAddedType, MemberBody{Peer: b.Machine()}))
	kept, _ := l.Append(ctx, b, 0, draft("message", `{"role":"user","content":[{"type":"text","text":"before"}]}`))
	l.Append(ctx, a, 0, memberDraft(MemberRemovedType, MemberBody{Peer: b.Machine(), Seq: kept[0].Seq}))
	if _, err := l.Append(ctx, b, 0, draft("message", `{"role":"user","content":[{"type":"text","text":"after"}]}`)); !errors.Is(err, ErrNotMember) {
		t.Fatalf("a removed machine's append: %v", err)
	}
	// An event b wrote after its cut elsewhere, before it heard of the
	// removal, arriving later, is kept (so the copies that stored it
	// converge with this one) and never read.
	w := &writer{s: b, head: Head{Seq: kept[0].Seq, ID: kept[0].ID}}
	late := w.next(t, 9, "message", `{"role":"user","content":[{"type":"text","text":"late"}]}`)
	if added, _ := l.Add(ctx, late); len(added) != 1 || l.Refused() != 0 {
		t.Fatal("a removed machine's event above its cut was refused")
	}
	if view, aside := Readable(l.Events()); slices.ContainsFunc(view, func(e *Event) bool { return e.ID == late.ID }) ||
		!slices.ContainsFunc(aside, func(e *Event) bool { return e.ID == late.ID }) {
		t.Fatal("a removed machine's event above its cut is read")
	}
	m := MembersOf(id, l.Events())
	if m.Has(b.Machine()) || !m.Admits(kept[0]) || m.Admits(late) {
		t.Fatalf("members %+v: b removed, its event before the cut counts, the late one not", m.List())
	}
	// Neither the last member can be removed, nor b added again.
	l.Append(ctx, a, 0, memberDraft(MemberRemovedType, MemberBody{Peer: a.Machine(), Seq: 99}))
	l.Append(ctx, a, 0, memberDraft(MemberAddedType, MemberBody{Peer: b.Machine()}))
	if m := MembersOf(id, l.Events()); !m.Has(a.Machine()) || m.Has(b.Machine()) {
		t.Fatalf("members %+v: want a alone", m.List())
	}
}

// A journal from before members admits every machine until founders are
// named; then only members, and a later founder claim by a machine that
// is not a member (a usurper) is refused.
func TestAnAgentFromBeforeMembersIsOpenUntilItsFoundersAreNamed(t *testing.T) {
	a, b, stranger := seededSigner(t, 1), seededSigner(t, 2), seededSigner(t, 3)
	ctx := context.Background()
	const legacy = "0f0e0d0c-0b0a-4908-8706-050403020100"
	l, err := OpenLog(newJournal(t), LogOptions{Agent: legacy})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(ctx, b, 0, draft("message", `{"role":"user","content":[{"type":"text","text":"old"}]}`)); err != nil {
		t.Fatalf("an open journal refused an append: %v", err)
	}
	if !MembersOf(legacy, l.Events()).Open() {
		t.Fatal("a journal with no founder is not open")
	}
	if _, err := l.Append(ctx, a, 0, memberDraft(MemberAddedType, MemberBody{Peer: a.Machine(), Founder: true}),
		memberDraft(MemberAddedType, MemberBody{Peer: b.Machine()})); err != nil {
		t.Fatal(err)
	}
	w := &writer{s: stranger}
	usurp := w.next(t, 9, MemberAddedType, fmt.Sprintf(`{"peer":%q,"founder":true}`, stranger.Machine()))
	if added, _ := l.Add(ctx, usurp); len(added) != 0 {
		t.Fatal("a founder claim by a non-member was stored once founders were named")
	}
	m := MembersOf(legacy, l.Events())
	if m.Open() || !m.Has(a.Machine()) || !m.Has(b.Machine()) || m.Has(stranger.Machine()) {
		t.Fatalf("members %+v", m.List())
	}
}
