package node

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
)

// strangerEvents signs, as a machine that is no member of the agent, a
// message and a holder.activated naming itself the holder: the two
// forgeries of issue 28.
func strangerEvents(t *testing.T, agent string, holder string) (stranger *Identity, evs []*journal.Event) {
	t.Helper()
	stranger, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": "forged by a stranger"}}})
	act, _ := json.Marshal(journal.ActivatedBody{Holder: journal.Bound{Peer: stranger.Machine(), Epoch: 9}, From: journal.Bound{Peer: holder, Epoch: 1, Seq: 1}})
	prev := ""
	for i, d := range []journal.Draft{{Type: "message", Session: "s", Body: msg}, {Type: journal.ActivatedType, Body: act}} {
		epoch := uint64(0)
		if d.Type == journal.ActivatedType {
			epoch = 9
		}
		e, err := journal.NewEvent(stranger, journal.Stamp{Seq: uint64(i + 1), Prev: prev, Clock: 100 + uint64(i), Epoch: epoch, Time: time.Now()}, d)
		if err != nil {
			t.Fatal(err)
		}
		prev = e.ID
		evs = append(evs, e)
	}
	return stranger, evs
}

// A paired peer that relays events signed by a machine that is not a
// member (a forged holder.activated among them) has them refused: never
// stored, counted in the status, and the agent runs where it ran.
func TestAStrangersEventsFromAPairedPeerAreNeverStored(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		connectAll(t, a, b)
		agent := heldBy(t, a, nil)
		before, _ := a.store.Events(agent, "")
		stranger, forged := strangerEvents(t, agent, a.info.PeerID)

		sendBySync(t, b, a, agent, forged)
		eventually(t, "a counts the two refused events", func() bool {
			st, err := a.Status()
			return err == nil && len(st.Capsules) == 1 && st.Capsules[0].Refused == 2
		})
		after, _ := a.store.Events(agent, "")
		for _, e := range after {
			if e.Machine == stranger.Machine() {
				t.Fatalf("a stored the stranger's %s", e.Type)
			}
		}
		if len(after) < len(before) {
			t.Fatalf("a holds %d events, had %d", len(after), len(before))
		}
		if st, e := holderState(t, a, agent); st != "active" || e != 1 || !a.runs(agent) {
			t.Fatalf("a is %s at %d after the forged activation", st, e)
		}
	})
}

// sendBySync has from play a peer that lies: it opens a sync exchange of
// agent with to and sends evs as events to lacks.
func sendBySync(t *testing.T, from, to *Node, agent string, evs []*journal.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := from.host.NewStream(ctx, to.host.ID(), protocol.SyncID)
	if err != nil {
		t.Fatal(err)
	}
	hello, _ := json.Marshal(map[string]any{"agent": agent, "vector": map[string]any{}})
	protocol.WriteFrame(s, append([]byte{'H'}, hello...))
	for _, e := range evs {
		protocol.WriteFrame(s, append([]byte{'E'}, e.Line()...))
	}
	protocol.WriteFrame(s, []byte(`D{"vector":{}}`))
	io.Copy(io.Discard, s)
	s.Close()
}

// A member that was not handed the agent (b, paired, a member, never
// migrated to) signs a holder.activated naming itself the holder: every
// copy refuses it, and the agent runs where it ran.
func TestAnActivationWithoutTheHoldersHandoverIsRefused(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		connectAll(t, a, b)
		agent := heldBy(t, a, nil)
		eventually(t, "b is a member", func() bool {
			m, err := b.store.Members(agent)
			return err == nil && m.Has(b.info.PeerID)
		})
		v, _ := b.store.Vector(agent)
		body, _ := json.Marshal(journal.ActivatedBody{Holder: journal.Bound{Peer: b.info.PeerID, Epoch: 7}, From: journal.Bound{Peer: a.info.PeerID, Epoch: 1, Seq: v[a.info.PeerID].Seq}})
		forged, err := journal.NewEvent(b.id, journal.Stamp{Seq: v[b.info.PeerID].Seq + 1, Prev: v[b.info.PeerID].ID, Clock: 1000, Epoch: 7, Time: time.Now()},
			journal.Draft{Type: journal.ActivatedType, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.AppendReserved(context.Background(), agent, b.id, 7, []journal.Draft{{Type: journal.ActivatedType, Body: body}}); !errors.Is(err, journal.ErrNoCustody) {
			t.Fatalf("b's own append of it: %v", err)
		}
		sendBySync(t, b, a, agent, []*journal.Event{forged})
		eventually(t, "a refuses it", func() bool {
			st, err := a.Status()
			return err == nil && len(st.Capsules) == 1 && st.Capsules[0].Refused == 1
		})
		if st, e := holderState(t, a, agent); st != "active" || e != 1 || !a.runs(agent) {
			t.Fatalf("a is %s at %d after the forged activation", st, e)
		}
	})
}

// A tar carrying a forged event (issue 28's attack: a stranger's message,
// a stranger's holder.activated, a member's activation no old holder
// handed over) is refused whole at import, naming the key; the node's
// copy is as it was and the agent runs on.
func TestATarWithAForgedEventIsRefusedAtImport(t *testing.T) {
	n := tcp.start(t, t.TempDir())
	agent := heldBy(t, n, nil)
	before, _ := n.store.Events(agent, "")
	stranger, forged := strangerEvents(t, agent, n.info.PeerID)
	// A member of the agent that never was handed it writes an activation
	// without the old holder's handover.
	member, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.AddMember(context.Background(), agent, member.Machine()); err != nil {
		t.Fatal(err)
	}
	before, _ = n.store.Events(agent, "")
	body, _ := json.Marshal(journal.ActivatedBody{Holder: journal.Bound{Peer: member.Machine(), Epoch: 9}, From: journal.Bound{Peer: n.info.PeerID, Epoch: 1, Seq: 1}})
	usurp, err := journal.NewEvent(member, journal.Stamp{Seq: 1, Clock: 500, Epoch: 9, Time: time.Now()}, journal.Draft{Type: journal.ActivatedType, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		events []*journal.Event
		want   error
		key    string
	}{
		{"a stranger's message", forged[:1], journal.ErrNotMember, stranger.Machine()},
		{"a stranger's holder.activated", forged, journal.ErrNotMember, stranger.Machine()},
		{"a member's holder.activated without a handover", []*journal.Event{usurp}, journal.ErrNoCustody, member.Machine()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The node's own export, unpacked, the stranger's event added
			// to its journal, packed again: a tar as an attacker hands it.
			dir := filepath.Join(t.TempDir(), "copy")
			if err := n.store.ExportFile(agent, dir+".tar"); err != nil {
				t.Fatal(err)
			}
			if err := capsule.Unpack(dir+".tar", dir, capsule.Limits{}); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(filepath.Join(dir, capsule.JournalFile), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range tc.events {
				f.Write(append(e.Line(), '\n'))
			}
			f.Close()
			tar := filepath.Join(t.TempDir(), "forged.tar")
			c, err := capsule.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := os.Create(tar)
			err = capsule.Pack(c, out, capsule.PackOptions{})
			c.Close()
			out.Close()
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = n.Import(tar)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("import of the tar: %v, want %v naming %s", err, tc.want, tc.key)
			}
			after, _ := n.store.Events(agent, "")
			if len(after) != len(before) {
				t.Fatalf("the node holds %d events, had %d", len(after), len(before))
			}
			if !n.runs(agent) {
				t.Fatal("the node no longer runs the agent")
			}
		})
	}
}

// A node makes a paired peer a member as it gives it the agent, and what
// the peer then writes reaches the giver; a member list through the API
// names both.
func TestAPairedPeerBecomesAMemberWhenGivenTheAgent(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		connectAll(t, a, b)
		agent := heldBy(t, a, nil)
		eventually(t, "b holds the agent", func() bool { return b.store.Holds(agent) })
		var rep api.MembersReport
		if code := callAPI(t, a, "GET", "/v1/capsules/"+agent+"/members", nil, &rep); code != 200 {
			t.Fatalf("members: %d", code)
		}
		if rep.Open || len(rep.Members) != 2 {
			t.Fatalf("members of a's copy: %+v", rep)
		}
		appendN(t, b, agent, 1)
		eventually(t, "b's event reaches a", func() bool {
			evs, _ := a.store.Events(agent, "")
			for _, e := range evs {
				if e.Machine == b.info.PeerID && e.Type == "message" {
					return true
				}
			}
			return false
		})
		p, _ := peer.Decode(b.info.PeerID)
		if !a.knownMember(agent, p) {
			t.Fatal("a does not know b as a member")
		}
	})
}

// A migration's target must be a member: a paired peer is made one as
// the move starts; a machine removed from the members is refused.
func TestAMigrationTargetMustBeAMember(t *testing.T) {
	a, b := tcp.start(t, t.TempDir()), tcp.start(t, t.TempDir())
	connectAll(t, a, b)
	agent := heldBy(t, a, nil)
	eventually(t, "b is a member", func() bool {
		m, err := a.store.Members(agent)
		return err == nil && m.Has(b.info.PeerID)
	})
	if _, err := a.RemoveMember(context.Background(), agent, b.info.PeerID); err != nil {
		t.Fatal(err)
	}
	out, err := a.Migrate(context.Background(), agent, b.host.ID())
	if !errors.Is(err, journal.ErrNotMember) || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("a move to a removed member: %+v %v", out, err)
	}
	if !a.runs(agent) {
		t.Fatal("a stopped running the agent")
	}
}

// Pairing alone makes no member: a machine paired at an address where
// nothing answers never took the agent, and is none of its members (a
// typo in tern peer add must not cost that key the agent for good).
func TestPairingAloneMakesNoMember(t *testing.T) {
	n := tcp.start(t, t.TempDir())
	agent := heldBy(t, n, nil)
	ghost, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Pair(Peer{ID: ghost.Machine(), Name: "ghost", Addrs: []string{"/ip4/127.0.0.1/tcp/9/p2p/" + ghost.Machine()}}); err != nil {
		t.Fatal(err)
	}
	// The node restarts its view of the capsules as an import does.
	if _, _, err := n.imported(agent, false, nil); err != nil {
		t.Fatal(err)
	}
	if m, _ := n.store.Members(agent); m.Has(ghost.Machine()) {
		t.Fatal("a paired machine that never took the agent is a member")
	}
}
