package node

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multihash"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
)

// forgedType would, written unescaped on the "event:" line of a turn's
// stream, end that line and forge an id and a turn.ended: a client that
// believed it would skip every real event up to 999999 and stop.
const forgedType = "message\nid: 999999\nevent: turn.ended"

// An event whose type would forge frames of a turn's server-sent events
// (issue 28) is refused when this node appends it and when a paired peer
// that signed it syncs it, and the turn's stream stays what it was: the
// same five events, numbered 1 to 5, once, as a browser reads the stream
// and as tern's client follows it.
func TestAForgedEventTypeNeverBecomesAFrameOfATurnsStream(t *testing.T) {
	a, b := startNode(t, t.TempDir()), startNode(t, t.TempDir())
	pair(t, a, b)
	agent := heldBy(t, a, withTools(t, a))
	sessionID := newSession(t, a, agent)
	_, turn := startTurn(t, a, sessionID, map[string]any{"text": "hello there"})
	turnID := turn["id"].(string)
	before := durable(follow(t, a, sessionID, turnID, -1, nil)) // without the deltas of the live stream
	if len(before) != 5 || before[4].event != "turn.ended" {
		t.Fatalf("the turn's stream before any forgery: %v", before)
	}

	t.Run("this node refuses to append it", func(t *testing.T) {
		_, err := a.Append(t.Context(), agent, []journal.Draft{{Type: forgedType, Session: sessionID, Turn: turnID}})
		if !errors.Is(err, journal.ErrInvalidDraft) || !strings.Contains(err.Error(), strconv.Quote(forgedType)) {
			t.Fatalf("Append: got %v, want an invalid draft naming the type", err)
		}
		draft, _ := json.Marshal(map[string]string{"type": forgedType, "session": sessionID, "turn": turnID})
		code, body := call(t, a, "POST", "/v1/capsules/"+agent+"/events", bytes.NewReader(draft))
		if code != http.StatusBadRequest || !strings.Contains(errorOf(t, code, body), `byte 8 is '\n'`) {
			t.Fatalf("POST events: %d %s, want 400 naming the line break", code, body)
		}
	})

	t.Run("a peer that signed it cannot bring it in", func(t *testing.T) {
		line := signedByHand(t, b.id, map[string]any{
			"v": 1, "machine": b.info.PeerID, "seq": 1, "prev": "", "clock": 1000, "epoch": 0,
			"time": "2026-01-02T03:04:05Z", "session": sessionID, "turn": turnID, "type": forgedType, "body": map[string]any{},
		})
		held, err := a.store.Events(agent, "")
		if err != nil {
			t.Fatal(err)
		}
		sendEvent(t, b, a, agent, line)
		eventually(t, "a takes or rejects the forged event", func() bool {
			st, err := a.Status()
			if err != nil || len(st.Capsules) != 1 {
				return false
			}
			evs, _ := a.store.Events(agent, "")
			return st.Capsules[0].Rejected == 1 || len(evs) > len(held)
		})
		evs, _ := a.store.Events(agent, "")
		for _, e := range evs {
			if e.Machine == b.info.PeerID {
				t.Errorf("a took the forged event into its journal: %s", e.Line())
			}
		}
	})

	// Whatever came in, the stream (a replay now) read as a browser reads
	// it, and as tern's own client follows it, is the turn's five events.
	after := follow(t, a, sessionID, turnID, -1, nil)
	if len(after) != len(before) {
		var frames []string
		for _, it := range after {
			frames = append(frames, "id "+strconv.Quote(it.id)+" event "+strconv.Quote(it.event))
		}
		t.Fatalf("the stream now has %d frames, before %d: %s", len(after), len(before), strings.Join(frames, ", "))
	}
	for i, it := range after {
		if it != before[i] {
			t.Fatalf("frame %d is now %+v, was %+v", i+1, it, before[i])
		}
	}
	c, err := api.Dial(a.home)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := c.FollowTurn(ctx, sessionID, turnID, 0, func(it api.TurnItem) error {
		seqs = append(seqs, it.Seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 3, 4, 5}; !slices.Equal(seqs, want) {
		t.Fatalf("the client followed items %v, want %v", seqs, want)
	}
}

// signedByHand is the event of fields (all but id and sig) signed by s,
// built without the journal's checks, as a writer that skipped them would.
func signedByHand(t *testing.T, s journal.Signer, fields map[string]any) []byte {
	t.Helper()
	canonical := func(m map[string]any) []byte {
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		c, err := journal.Canonical(raw)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	sig, err := s.Sign(canonical(fields))
	if err != nil {
		t.Fatal(err)
	}
	fields["sig"] = base64.StdEncoding.EncodeToString(sig)
	mh, err := multihash.Sum(canonical(fields), multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	fields["id"] = cid.NewCidV1(0x0200, mh).String()
	return canonical(fields)
}

// sendEvent plays a peer that opens a sync stream from to and offers line
// as an event the receiver lacks.
func sendEvent(t *testing.T, from, to *Node, agent string, line []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := from.host.Connect(ctx, peer.AddrInfo{ID: to.host.ID(), Addrs: to.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, err := from.host.NewStream(ctx, to.host.ID(), protocol.SyncID)
	if err != nil {
		t.Fatal(err)
	}
	hello, _ := json.Marshal(map[string]any{"agent": agent, "vector": map[string]any{}})
	protocol.WriteFrame(s, append([]byte{'H'}, hello...))
	protocol.WriteFrame(s, append([]byte{'E'}, line...))
	protocol.WriteFrame(s, []byte(`D{"vector":{}}`))
	io.Copy(io.Discard, s)
	s.Close()
}
