package journal

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// The types of the events that say which machines write an agent's
// history (docs/FORMAT.md, "Members"). Their body is a MemberBody.
const (
	MemberAddedType   = "member.added"
	MemberRemovedType = "member.removed"
)

// MemberBody is the body of a member.added or member.removed event.
type MemberBody struct {
	// Peer is the machine added or removed.
	Peer string `json:"peer"`
	// Nonce, in the member.added with which a machine creates an agent
	// and names itself, is what the agent id is derived from with the
	// machine's peer ID (see AgentIDOf).
	Nonce string `json:"nonce,omitempty"`
	// Founder, in a member.added naming its own writer, makes the writer a
	// first member of an agent whose id was not derived from a key (one
	// written before members existed).
	Founder bool `json:"founder,omitempty"`
	// Seq, in a member.removed, is the last seq of Peer's chain that
	// still counts: Peer's events above it do not.
	Seq uint64 `json:"seq,omitempty"`
}

// Members is who writes an agent's history, as a journal says: for each
// member, the highest seq of its chain that counts (every seq while it is
// a member; the seq its removal names once it is removed).
//
// The zero Members admits nobody. A journal of an agent from before
// members, in which no first member was named yet, is open: it admits
// every machine (see Open).
type Members struct {
	open bool
	cut  map[string]uint64 // member → last seq that counts; math.MaxUint64 while a member
	// since is the clock from which activations must prove their custody
	// (see Custody): 0 for a derived agent; for an agent from before
	// members, the clock of its first founder event (what was written
	// before it knew no custody).
	since uint64
}

// Member is one machine of a member list.
type Member struct {
	Peer    string `json:"peer"`
	Removed bool   `json:"removed,omitempty"`
	Seq     uint64 `json:"seq,omitempty"` // for a removed member, the last seq of its that counts
}

// Admits reports whether e's writer may write it: a member whose events up
// to e's seq count. An open Members admits everything.
func (m Members) Admits(e *Event) bool {
	if m.open {
		return true
	}
	c, ok := m.cut[e.Machine]
	return ok && e.Seq <= c
}

// Knows reports whether e's writer is or was a member: a journal stores
// its events, though those a removal cut off are set aside wherever they
// are read (see Readable), so that copies which stored them before they
// heard of the removal still converge with those that did not. An open
// Members knows every machine.
func (m Members) Knows(e *Event) bool {
	if m.open {
		return true
	}
	_, ok := m.cut[e.Machine]
	return ok
}

// Has reports whether machine is a member now (added, not removed). In an
// open Members every machine is.
func (m Members) Has(machine string) bool {
	return m.open || m.cut[machine] == math.MaxUint64
}

// removed reports whether machine was a member and was removed.
func (m Members) removed(machine string) bool {
	c, ok := m.cut[machine]
	return ok && c != math.MaxUint64
}

// Open reports whether the journal names no members yet (an agent from
// before members, whose first members no node has named): every machine
// is admitted.
func (m Members) Open() bool { return m.open }

// List returns the members, removed ones included, sorted by peer.
func (m Members) List() []Member {
	out := make([]Member, 0, len(m.cut))
	for p, c := range m.cut {
		if c == math.MaxUint64 {
			out = append(out, Member{Peer: p})
		} else {
			out = append(out, Member{Peer: p, Removed: true, Seq: c})
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Peer, b.Peer) })
	return out
}

// cutOf returns the removal cuts: for each removed member, the last seq of
// its that counts (nil when none was removed).
func (m Members) cutOf() map[string]uint64 {
	var out map[string]uint64
	for p, c := range m.cut {
		if c != math.MaxUint64 {
			if out == nil {
				out = map[string]uint64{}
			}
			out[p] = c
		}
	}
	return out
}

// NewAgentID returns a fresh agent id derived from machine's peer ID, and
// the draft of the member.added event with which machine, signing it,
// proves it created the agent: the one event only that machine can write
// for that id (see AgentIDOf).
func NewAgentID(machine string) (id string, genesis Draft) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return GenesisOf(machine, hex.EncodeToString(b[:]))
}

// GenesisOf is NewAgentID with the nonce given (32 lowercase hex digits):
// the simulator makes the same agent in every run of a seed.
func GenesisOf(machine, nonce string) (id string, genesis Draft) {
	body, _ := json.Marshal(MemberBody{Peer: machine, Nonce: nonce})
	return AgentIDOf(machine, nonce), Draft{Type: MemberAddedType, Body: body}
}

// AgentIDOf derives an agent id from the peer ID of the machine that
// created the agent and a nonce: the first 16 bytes of
// sha256("tern.agent/1\n" ‖ machine ‖ "\n" ‖ nonce), written as a UUID of
// version 8 (RFC 9562: the version and variant bits set, lowercase).
func AgentIDOf(machine, nonce string) string {
	sum := sha256.Sum256([]byte("tern.agent/1\n" + machine + "\n" + nonce))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Derived reports whether an agent id is of the form AgentIDOf writes (a
// UUID whose version digit is 8): its first member is proven by the event
// it was derived from. Other ids are of agents created before members.
func Derived(agent string) bool {
	return len(agent) == 36 && agent[14] == '8'
}

// MembersOf returns the members of agent that events name
// (docs/FORMAT.md, "Members"):
//
//   - the first member: for a derived id (see Derived), the machine whose
//     member.added naming itself carries the nonce the id derives from;
//     for another id, every machine whose member.added names itself as a
//     founder, and, when there is none, every machine (an open Members);
//   - then, in total order, each member.added or member.removed written by
//     a member whose events up to it count adds the machine it names, or
//     removes it from the seq the removal names on; a removal of the last
//     member counts for nothing, and a removed machine is never added
//     again. A removal also voids what the removed machine's membership
//     events above that seq did, wherever they stand in the order.
func MembersOf(agent string, events []*Event) Members {
	ms := membershipEvents(events)
	roots := map[string]bool{}
	founders := false
	for _, e := range ms {
		b, ok := readMember(e)
		if !ok || e.Type != MemberAddedType || b.Peer != e.Machine {
			continue
		}
		if Derived(agent) {
			if b.Nonce != "" && AgentIDOf(e.Machine, b.Nonce) == agent {
				roots[e.Machine] = true
			}
		} else if b.Founder {
			roots[e.Machine] = true
			founders = true
		}
	}
	if !Derived(agent) && !founders {
		return Members{open: true}
	}
	m := foldMembers(roots, ms)
	if !Derived(agent) {
		m.since = foundedAt(ms, roots)
	}
	return m
}

// foundedAt returns the clock of the first founder event of roots among
// ms (in total order).
func foundedAt(ms []*Event, roots map[string]bool) uint64 {
	for _, e := range ms {
		if b, ok := readMember(e); ok && roots[e.Machine] && b.Founder && b.Peer == e.Machine {
			return e.Clock
		}
	}
	return 0
}

// membersClaimed is MembersOf for a journal whose events were admitted
// when they were stored (a capsule's own journal): whichever machine
// names itself first member is taken at its word, since only members'
// events were let in. It is what the readable line applies (removals).
func membersClaimed(events []*Event) Members {
	ms := membershipEvents(events)
	if len(ms) == 0 {
		return Members{open: true}
	}
	roots := map[string]bool{}
	for _, e := range ms {
		if b, ok := readMember(e); ok && e.Type == MemberAddedType && b.Peer == e.Machine && (b.Nonce != "" || b.Founder) {
			roots[e.Machine] = true
		}
	}
	if len(roots) == 0 {
		return Members{open: true}
	}
	m := foldMembers(roots, ms)
	m.since = foundedAt(ms, roots)
	return m
}

// membershipEvents returns the member.added and member.removed events, in
// total order, each once.
func membershipEvents(events []*Event) []*Event {
	var ms []*Event
	for _, e := range events {
		if isMembership(e) {
			ms = append(ms, e)
		}
	}
	return Merge(ms, nil)
}

func isMembership(e *Event) bool {
	return e.Type == MemberAddedType || e.Type == MemberRemovedType
}

// foldMembers applies the membership events ms (in total order) to the
// first members roots. A removal voids the removed machine's membership
// events above its cut; when one of them had already counted (it sorts
// before the removal), the fold starts again without it. What is voided
// only grows, so the fold ends.
func foldMembers(roots map[string]bool, ms []*Event) Members {
	voided := map[string]bool{}
	for {
		cut := make(map[string]uint64, len(roots)+len(ms))
		for r := range roots {
			cut[r] = math.MaxUint64
		}
		live := len(roots)
		counted := map[string][]*Event{} // by machine: its membership events that counted
		again := false
		for _, e := range ms {
			if voided[e.ID] {
				continue
			}
			if c, ok := cut[e.Machine]; !ok || e.Seq > c {
				continue
			}
			b, ok := readMember(e)
			if !ok {
				continue
			}
			c, known := cut[b.Peer]
			switch {
			case e.Type == MemberAddedType && !known:
				cut[b.Peer] = math.MaxUint64
				live++
			case e.Type == MemberRemovedType && known && c == math.MaxUint64 && live > 1:
				cut[b.Peer] = b.Seq
				live--
				for _, x := range counted[b.Peer] {
					if x.Seq > b.Seq {
						voided[x.ID] = true
						again = true
					}
				}
			}
			if again {
				break
			}
			counted[e.Machine] = append(counted[e.Machine], e)
		}
		if !again {
			return Members{cut: cut}
		}
	}
}

// readMember reads a membership event's body strictly: an object whose
// "peer" is a machine peer ID in its one spelling; "nonce", if present, 32
// lowercase hex digits; "founder", if present, true; "seq", if present,
// a whole number (member names exact, other members ignored). ok is false
// for a body of another shape, which counts for nothing.
func readMember(e *Event) (b MemberBody, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(e.Body, &m) != nil || m == nil || !isString(m["peer"]) || json.Unmarshal(m["peer"], &b.Peer) != nil {
		return b, false
	}
	if _, err := MachineKey(b.Peer); err != nil {
		return b, false
	}
	if raw, has := m["nonce"]; has {
		if !isString(raw) || json.Unmarshal(raw, &b.Nonce) != nil || !validNonce(b.Nonce) {
			return b, false
		}
	}
	if raw, has := m["founder"]; has {
		if string(raw) != "true" {
			return b, false
		}
		b.Founder = true
	}
	if raw, has := m["seq"]; has {
		if b.Seq, ok = wholeNumber(raw); !ok {
			return b, false
		}
	}
	return b, true
}

func validNonce(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := range len(s) {
		if !lowerHex(s[i]) {
			return false
		}
	}
	return true
}

func lowerHex(c byte) bool { return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') }

// StrangerError says that a journal holds events written by a machine that
// never was a member of the agent: they are not part of its history. It
// wraps ErrNotMember.
type StrangerError struct {
	Agent   string
	Machine string
	Events  int    // how many
	First   string // the id of the first, in total order
}

func (e *StrangerError) Error() string {
	return fmt.Sprintf("machine %s: %s signed by a machine that is not a member of agent %s (the first %s): only its members write its history",
		e.Machine, plural(e.Events, "event"), e.Agent, e.First)
}

// Unwrap returns ErrNotMember.
func (e *StrangerError) Unwrap() error { return ErrNotMember }

// Strangers returns, for each machine with events that never was a member
// of agent (MembersOf), one *StrangerError, sorted by machine; nil when
// every writer is or was a member. (A removed member's events after its
// cut are set aside, not a stranger's: see Members.Knows.)
func Strangers(agent string, events []*Event) []error {
	m := MembersOf(agent, events)
	if m.open {
		return nil
	}
	by := map[string][]*Event{}
	for _, e := range events {
		if !m.Knows(e) {
			by[e.Machine] = append(by[e.Machine], e)
		}
	}
	var out []error
	for _, k := range slices.Sorted(maps.Keys(by)) {
		es := Merge(by[k], nil)
		out = append(out, &StrangerError{Agent: agent, Machine: k, Events: len(es), First: es[0].ID})
	}
	return out
}

// plural is "1 event" or "n events".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// AsideStranger marks, in QuarantinedOf, an event whose writer never was
// a member of the agent: a journal that takes events never stores one, so
// one is found only in a file written some other way.
const AsideStranger = "not_member"

// ReadableOf is Readable for the journal of agent: the events of machines
// that never were its members (see Strangers) are quarantined too, never
// read.
func ReadableOf(agent string, events []*Event) (view, quarantined []*Event) {
	view, quarantined = Readable(events)
	m := MembersOf(agent, events)
	if m.open {
		return view, quarantined
	}
	kept := view[:0:0]
	for _, e := range view {
		if m.Knows(e) {
			kept = append(kept, e)
		} else {
			quarantined = append(quarantined, e)
		}
	}
	return kept, quarantined
}

// QuarantinedOf is Quarantined for the journal of agent: a stranger's
// events are marked AsideStranger.
func QuarantinedOf(agent string, events []*Event) map[string]string {
	out := Quarantined(events)
	m := MembersOf(agent, events)
	if m.open {
		return out
	}
	for _, e := range events {
		if !m.Knows(e) {
			out[e.ID] = AsideStranger
		}
	}
	return out
}
