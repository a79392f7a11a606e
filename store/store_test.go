package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

// newTestStore opens a store in a new home, and the home's identity.
func newTestStore(t *testing.T) (home string, id *journal.KeySigner, s *Store) {
	t.Helper()
	home = t.TempDir()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	if id, err = journal.NewKeySigner(k); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(home, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return home, id, s
}

// importNew imports into s a new, empty capsule held by id, and returns
// its agent id and the folder it was imported from.
func importNew(t *testing.T, s *Store, id *journal.KeySigner, name string) (agent, dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "c")
	c, err := capsule.New(dir, name, id)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if agent, _, err = s.Import(dir); err != nil {
		t.Fatal(err)
	}
	return agent, dir
}

func TestIdleCapsulesAreClosedAndStillAnswerForTheirVectorAndWants(t *testing.T) {
	home, id, s := newTestStore(t)
	var agents []string
	for i := range 3 {
		agent, _ := importNew(t, s, id, "idle")
		body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hi"}, map[string]any{"type": "image", "cid": capsule.BlobCID(sha256Of(i)), "media_type": "image/png"}}})
		if _, err := s.Append(context.Background(), agent, id, 0, []journal.Draft{{Type: "message", Session: "s", Body: body}}); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, agent)
	}
	want := map[string]journal.Vector{}
	wants := map[string][]string{}
	for _, a := range agents {
		want[a], _ = s.Vector(a)
		wants[a], _ = s.Wanted(a)
		if len(wants[a]) != 1 {
			t.Fatalf("capsule %s wants %v, want the image's blob", a, wants[a])
		}
	}

	// One capsule is in use: it stays open.
	_, done, err := s.Use(agents[0])
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.CloseIdle(0); err != nil || n != 2 {
		t.Fatalf("closed %d (%v), want the 2 not in use", n, err)
	}
	done()
	if n, _ := s.CloseIdle(0); n != 1 {
		t.Fatalf("closed %d once the last one was done with, want 1", n)
	}
	for _, a := range agents {
		v, err := s.Vector(a)
		w, werr := s.Wanted(a)
		if err != nil || werr != nil || !maps.Equal(v, want[a]) || !slices.Equal(w, wants[a]) {
			t.Fatalf("closed capsule %s answers %v %v (%v %v), want %v %v", a, v, w, err, werr, want[a], wants[a])
		}
	}
	if len(s.open) != 0 {
		t.Fatalf("asking for vectors and wants opened %d capsules", len(s.open))
	}

	// Writing to a closed capsule opens it, and its answers follow.
	evs, err := s.Append(context.Background(), agents[1], id, 0, []journal.Draft{{Type: "message", Session: "s", Body: json.RawMessage(`{"role":"user","content":[{"type":"text","text":"hi"}]}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Vector(agents[1]); v[id.Machine()].ID != evs[0].ID {
		t.Fatalf("after an append the vector is %v", v)
	}
	if n, _ := s.CloseIdle(0); n != 1 {
		t.Fatalf("closed %d, want the one reopened", n)
	}
	if v, _ := s.Vector(agents[1]); v[id.Machine()].ID != evs[0].ID {
		t.Fatalf("closed again, the vector is %v", v)
	}

	// A tool writing to a closed capsule behind the store's back: the
	// store sees the files changed and reads them again.
	d, err := capsule.OpenDir(context.Background(), filepath.Join(home, CapsulesDir, agents[2]), nil)
	if err != nil {
		t.Fatal(err)
	}
	behind, err := d.Append(context.Background(), id, 0, journal.Draft{Type: "message", Session: "s", Body: json.RawMessage(`{"role":"user","content":[{"type":"text","text":"hi"}]}`)})
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Vector(agents[2]); v[id.Machine()].ID != behind[0].ID {
		t.Fatalf("after a write behind the store's back, the vector is %v, want head %s", v, behind[0].ID)
	}

	// A capsule opened only to serve a blob closes without reading its
	// journal, and keeps no summary.
	s.CloseIdle(0)
	s.HeldBlobs(agents[0], "", []string{sha256Of(0)})
	if n, _ := s.CloseIdle(0); n != 1 {
		t.Fatalf("closed %d, want the one opened for a blob", n)
	}
	if _, ok := s.closed[agents[0]]; ok {
		t.Fatal("closing a capsule whose journal was never read kept a summary (it read the journal to make one)")
	}
}

// sha256Of returns a made-up sha256 hex name, one per i below 16.
func sha256Of(i int) string { return strings.Repeat("0123456789abcdef"[i:i+1], 64) }

func TestAClosedStoreWaitsForUsesInProgressThenOpensNothing(t *testing.T) {
	home, id, s := newTestStore(t)
	agent, dir := importNew(t, s, id, "closing")
	_, done, err := s.Use(agent) // a sync storing what a peer sent, say
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Close waits for the uses in progress at the store's gate. Once it
	// does, a new use would queue behind it (TryRLock fails): from then on
	// it cannot return before done.
	eventually(t, "Close waits for the use in progress", func() bool {
		select {
		case <-closed:
			t.Fatal("Close returned while a use was in progress")
		default:
		}
		if s.gate.TryRLock() {
			s.gate.RUnlock()
			return false
		}
		return true
	})
	select {
	case <-closed:
		t.Fatal("Close returned while a use was in progress")
	default:
	}
	done()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	journalPath := filepath.Join(home, CapsulesDir, agent, capsule.JournalFile)
	before, _ := os.ReadFile(journalPath)
	draft := journal.Draft{Type: "message", Session: "s", Body: json.RawMessage(`{"role":"user","content":[{"type":"text","text":"hi"}]}`)}
	if _, err := s.Append(context.Background(), agent, id, 0, []journal.Draft{draft}); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("append after close: %v, want ErrStoreClosed", err)
	}
	if _, _, err := s.Import(dir); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("import after close: %v, want ErrStoreClosed", err)
	}
	if after, _ := os.ReadFile(journalPath); !bytes.Equal(before, after) {
		t.Fatal("the journal changed after the store was closed")
	}
}

// A disk that is slow for one agent's capsule holds up that agent only:
// the store opens and closes a capsule outside the lock every other
// agent's use takes.
func TestASlowCapsuleHoldsUpNoOtherAgent(t *testing.T) {
	for _, op := range []string{"open", "close"} {
		t.Run("while it does not "+op, func(t *testing.T) {
			_, id, s := newTestStore(t)
			slow, _ := importNew(t, s, id, "slow")
			other, _ := importNew(t, s, id, "other")
			if _, err := s.CloseIdle(0); err != nil { // both closed: the next use opens them
				t.Fatal(err)
			}
			if op == "close" {
				for _, agent := range []string{slow, other} {
					if _, err := s.Vector(agent); err != nil {
						t.Fatal(err)
					}
				}
			}
			stuck, release := make(chan struct{}), make(chan struct{})
			s.slowDisk = func(o, agent string) {
				if o == op && agent == slow {
					close(stuck)
					<-release
				}
			}
			finished := make(chan error, 1)
			go func() {
				if op == "open" {
					_, err := s.Vector(slow)
					finished <- err
					return
				}
				_, err := s.CloseIdle(0)
				finished <- err
			}()
			<-stuck // the slow capsule's disk is busy now
			returnsWithin(t, "a use of another agent's capsule", 10*time.Second, func() error {
				_, err := s.Vector(other)
				return err
			})
			close(release)
			if err := <-finished; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// eventually fails the test unless cond holds within 10 s, polled on a
// ticker.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}
