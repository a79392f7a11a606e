package capsule_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

// vectorNonce is the nonce of the vectors' derived agent id.
const vectorNonce = "000102030405060708090a0b0c0d0e0f"

// withAgent gives the capsule another agent id.
func (e *tarEdit) withAgent(agent string) *tarEdit {
	m, err := capsule.ParseManifest(e.get(capsule.ManifestFile))
	if err != nil {
		e.t.Fatal(err)
	}
	e.set(capsule.ManifestFile, encodeManifest(e.t, *m, func(m *capsule.Manifest) { m.ID = agent }))
	return e
}

// memberVectors are journal vectors of who writes an agent's history
// (docs/FORMAT.md, "Members" and "Custody of epochs"): the small capsule's
// agent, from before members, once machine a names itself its founder and
// adds b; an event of a machine that is not a member; a removal; the last
// member, who cannot be removed; activations with and without the old
// holder's handover; and an agent whose id is derived from a's key.
func memberVectors(t *testing.T, v *vectorSet, a, b, third *vectorKey, c *vectorCapsule) {
	base := c.events(t) // a1, b1, a2, a3
	a3, b1 := eventAt(t, base, a, 3), eventAt(t, base, b, 1)
	event := func(k *vectorKey, seq uint64, prev string, clock, epoch uint64, typ string, body any) *journal.Event {
		t.Helper()
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		e, err := journal.NewEvent(k, journal.Stamp{Seq: seq, Prev: prev, Clock: clock, Epoch: epoch, Time: vectorTime.Add(time.Duration(clock) * time.Second)},
			journal.Draft{Type: typ, Session: "s1", Turn: "t3", Body: data})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	added := func(k *vectorKey, seq uint64, prev string, clock uint64, body journal.MemberBody) *journal.Event {
		return event(k, seq, prev, clock, 0, journal.MemberAddedType, body)
	}
	removed := func(k *vectorKey, seq uint64, prev string, clock uint64, body journal.MemberBody) *journal.Event {
		return event(k, seq, prev, clock, 0, journal.MemberRemovedType, body)
	}
	message := func(k *vectorKey, seq uint64, prev string, clock, epoch uint64, text string) *journal.Event {
		return event(k, seq, prev, clock, epoch, "message", map[string]any{
			"role": "user", "content": []map[string]string{{"type": "text", "text": text}},
		})
	}
	add := func(name string, data []byte, readable, aside int, expect ...string) {
		t.Helper()
		v.addJournal(t, name, data, readable, aside, expect...)
	}
	one := func(es ...*journal.Event) []*journal.Event { return es }

	// a names itself the founder and adds b: every writer is a member.
	founded := added(a, 4, a3.ID, 4, journal.MemberBody{Peer: a.PeerID, Founder: true})
	addsB := added(a, 5, founded.ID, 5, journal.MemberBody{Peer: b.PeerID})
	members := one(founded, addsB)
	add("journal-members-named", c.withJournal(t, base, members), 6, 0, checkOK)
	// a founder alone: b wrote b1, but is no member.
	add("journal-members-b-not-added", c.withJournal(t, base, one(founded)), 5, 0, checkNotMember)
	// A third machine's message; then its claim to be a founder, which a
	// journal read alone cannot tell from a's (a node refuses it: see
	// journal.Log).
	strangers := message(third, 1, "", 6, 0, "A stranger writes.")
	claims := added(third, 2, strangers.ID, 7, journal.MemberBody{Peer: third.PeerID, Founder: true})
	add("journal-members-a-strangers-event", c.withJournal(t, base, members, one(strangers)), 7, 0, checkNotMember)
	add("journal-members-a-stranger-names-itself-a-founder", c.withJournal(t, base, members, one(strangers, claims)), 8, 0, checkOK)

	// a removes b from seq 1 on: b's b2, written after (before b heard of
	// it), is kept and set aside: a note, not a stranger's event.
	removesB := removed(a, 6, addsB.ID, 6, journal.MemberBody{Peer: b.PeerID, Seq: 1})
	b2 := message(b, 2, b1.ID, 7, 0, "Written after the removal.")
	add("journal-members-removed", c.withJournal(t, base, members, one(removesB, b2)), 7, 1, checkOK)
	add("journal-members-removed-before-it-wrote-more", c.withJournal(t, base, members, one(removesB)), 7, 0, checkOK)
	// a, the last member, removes itself: that counts for nothing.
	removesA := removed(a, 7, removesB.ID, 8, journal.MemberBody{Peer: a.PeerID, Seq: 6})
	a8 := message(a, 8, removesA.ID, 9, 0, "Still a member.")
	add("journal-members-the-last-is-not-removed", c.withJournal(t, base, members, one(removesB, removesA, a8)), 9, 0, checkOK)

	// a runs the agent under epoch 1 (a6); b activates it at epoch 2.
	a6 := message(a, 6, addsB.ID, 6, 1, "Run the tests.")
	from := journal.Bound{Peer: a.PeerID, Epoch: 1, Seq: 6, ID: a6.ID}
	activation := func(h *journal.Handover) *journal.Event {
		return event(b, 2, b1.ID, 7, 2, journal.ActivatedType, journal.ActivatedBody{
			Holder: journal.Bound{Peer: b.PeerID, Epoch: 2}, From: from, Handover: h,
		})
	}
	handover := func(k *vectorKey, agent string) *journal.Handover {
		t.Helper()
		h, err := journal.SignHandover(k, agent, 1, b.PeerID, 2)
		if err != nil {
			t.Fatal(err)
		}
		h.From.Peer = a.PeerID // as a, whoever signs
		return &h
	}
	ran := one(a6)
	add("journal-activation-with-a-handover", c.withJournal(t, base, members, ran, one(activation(handover(a, vectorAgentID)))), 8, 0, checkOK)
	add("journal-activation-without-a-handover", c.withJournal(t, base, members, ran, one(activation(nil))), 8, 0, checkNoCustody)
	add("journal-activation-with-a-handover-its-writer-signed", c.withJournal(t, base, members, ran, one(activation(handover(b, vectorAgentID)))), 8, 0, checkNoCustody)
	add("journal-activation-with-a-handover-of-another-agent", c.withJournal(t, base, members, ran, one(activation(handover(a, "8d193db1-0000-4000-8000-000000000000")))), 8, 0, checkNoCustody)
	// An activation written before a named the first members needs none.
	early := event(b, 2, b1.ID, 5, 2, journal.ActivatedType, journal.ActivatedBody{
		Holder: journal.Bound{Peer: b.PeerID, Epoch: 2}, From: journal.Bound{Peer: a.PeerID, Epoch: 1, Seq: 3, ID: a3.ID},
	})
	late := added(a, 4, a3.ID, 6, journal.MemberBody{Peer: a.PeerID, Founder: true})
	lateB := added(a, 5, late.ID, 7, journal.MemberBody{Peer: b.PeerID})
	add("journal-activation-before-the-first-members", c.withJournal(t, base, one(early, late, lateB)), 7, 0, checkOK)

	// An agent whose id is derived from a's peer ID and a nonce: a's
	// member.added with that nonce makes a its first member. The same
	// event from b proves nothing, so nobody is a member.
	derived := journal.AgentIDOf(a.PeerID, vectorNonce)
	genesis := added(a, 4, a3.ID, 4, journal.MemberBody{Peer: a.PeerID, Nonce: vectorNonce})
	genesisAddsB := added(a, 5, genesis.ID, 5, journal.MemberBody{Peer: b.PeerID})
	withID := func(events ...[]*journal.Event) []byte {
		return editTar(t, c.withJournal(t, events...)).withAgent(derived).bytes()
	}
	add("journal-members-derived", withID(base, one(genesis, genesisAddsB)), 6, 0, checkOK)
	byB := added(b, 2, b1.ID, 4, journal.MemberBody{Peer: b.PeerID, Nonce: vectorNonce})
	add("journal-members-derived-claimed-by-another", withID(base, one(byB)), 5, 0, checkNotMember)
	// A founder counts for nothing in a derived id.
	add("journal-members-derived-founder", withID(base, one(founded, addsB)), 6, 0, checkNotMember)
}
