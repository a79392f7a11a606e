package capsule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/tern-dev/tern/journal"
)

// Errors of a change of members.
var (
	// ErrLastMember: a removal would leave an agent without members.
	ErrLastMember = errors.New("the last member of an agent cannot be removed")
	// ErrBadPeer: what names the machine to add or remove is not a peer ID.
	ErrBadPeer = errors.New("not a peer ID")
	// ErrMembership: the change is not one the members allow (a removed
	// machine added again; a machine that is not a member removed).
	ErrMembership = errors.New("not a change of members this agent allows")
)

// Members returns the agent's members as this copy's journal names them
// (journal.MembersOf).
func (d *Dir) Members() (journal.Members, error) {
	jl, err := d.journalLog()
	if err != nil {
		return journal.Members{}, err
	}
	return jl.Members(), nil
}

// Refused returns how many events from machines that are not members this
// copy has refused since it was opened (journal.Log.Refused).
func (d *Dir) Refused() uint64 {
	d.jlMu.Lock()
	defer d.jlMu.Unlock()
	if d.jl == nil {
		return 0
	}
	return d.jl.Refused()
}

// AddMember has by, a member, add peer to the agent's members with a
// member.added event, which it returns; nil when peer is a member already.
// A machine once removed is not added again.
func (d *Dir) AddMember(ctx context.Context, by journal.Signer, peer string) (*journal.Event, error) {
	d.memberMu.Lock()
	defer d.memberMu.Unlock()
	if _, err := journal.MachineKey(peer); err != nil {
		return nil, fmt.Errorf("add member %q: %w (%v)", peer, ErrBadPeer, err)
	}
	m, err := d.Members()
	if err != nil {
		return nil, err
	}
	if m.Has(peer) && !m.Open() {
		return nil, nil
	}
	if slices.ContainsFunc(m.List(), func(x journal.Member) bool { return x.Peer == peer && x.Removed }) {
		return nil, fmt.Errorf("add member: machine %s was removed from agent %s, and a removed machine is never added again (%w): the machine can join only as a new machine, with a new key", peer, d.ID(), ErrMembership)
	}
	evs, err := d.appendMember(ctx, by, journal.MemberAddedType, journal.MemberBody{Peer: peer})
	if err != nil {
		return nil, err
	}
	return evs[0], nil
}

// RemoveMember has by, a member, remove peer from the agent's members with
// a member.removed event, which it returns. peer's events this copy holds
// on its chain's readable line still count; those it writes after them do
// not, here or anywhere the removal reaches. The last member cannot be
// removed (ErrLastMember).
func (d *Dir) RemoveMember(ctx context.Context, by journal.Signer, peer string) (*journal.Event, error) {
	d.memberMu.Lock()
	defer d.memberMu.Unlock()
	m, err := d.Members()
	if err != nil {
		return nil, err
	}
	if _, err := journal.MachineKey(peer); err != nil {
		return nil, fmt.Errorf("remove member %q: %w (%v)", peer, ErrBadPeer, err)
	}
	if m.Open() {
		return nil, fmt.Errorf("remove member: agent %s names no members yet (a capsule from before members; a node that holds it names them when it opens it): %w", d.ID(), ErrMembership)
	}
	if !m.Has(peer) {
		return nil, fmt.Errorf("remove member: machine %s is not a member of agent %s (tern member list %s): %w", peer, d.ID(), d.ID(), ErrMembership)
	}
	live := 0
	for _, x := range m.List() {
		if !x.Removed {
			live++
		}
	}
	if live == 1 {
		return nil, fmt.Errorf("remove member: machine %s: %w", peer, ErrLastMember)
	}
	v, err := d.Vector()
	if err != nil {
		return nil, err
	}
	evs, err := d.appendMember(ctx, by, journal.MemberRemovedType, journal.MemberBody{Peer: peer, Seq: v[peer].Seq})
	if err != nil {
		return nil, err
	}
	return evs[0], nil
}

// NameFirstMembers names the first members of an agent from before
// members (whose journal names none): by, as a founder, then every machine
// whose events the copy holds and each of also. It returns the events, or
// nil when the journal names members already. tern's nodes do it once,
// when they first open such a capsule.
func (d *Dir) NameFirstMembers(ctx context.Context, by journal.Signer, also []string) ([]*journal.Event, error) {
	d.memberMu.Lock()
	defer d.memberMu.Unlock()
	m, err := d.Members()
	if err != nil || !m.Open() {
		return nil, err
	}
	v, err := d.Vector()
	if err != nil {
		return nil, err
	}
	peers := map[string]bool{}
	for p := range v {
		peers[p] = true
	}
	for _, p := range also {
		peers[p] = true
	}
	delete(peers, by.Machine())
	bodies := []journal.MemberBody{{Peer: by.Machine(), Founder: true}}
	for _, p := range slices.Sorted(maps.Keys(peers)) {
		if _, err := journal.MachineKey(p); err == nil {
			bodies = append(bodies, journal.MemberBody{Peer: p})
		}
	}
	return d.appendMember(ctx, by, journal.MemberAddedType, bodies...)
}

// appendMember appends membership events of one type, at epoch 0 (they
// are no part of a run).
func (d *Dir) appendMember(ctx context.Context, by journal.Signer, typ string, bodies ...journal.MemberBody) ([]*journal.Event, error) {
	drafts := make([]journal.Draft, len(bodies))
	for i, b := range bodies {
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		drafts[i] = journal.Draft{Type: typ, Body: raw}
	}
	return d.AppendReserved(ctx, by, 0, drafts...)
}
