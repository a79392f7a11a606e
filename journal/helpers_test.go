package journal

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// testSigner signs with a fresh or seeded ed25519 key.
type testSigner struct {
	key     crypto.PrivKey
	machine string
	fail    error // when set, Sign returns it
}

var _ Signer = (*testSigner)(nil)

func (s *testSigner) Machine() string { return s.machine }

func (s *testSigner) Sign(msg []byte) ([]byte, error) {
	if s.fail != nil {
		return nil, s.fail
	}
	return s.key.Sign(msg)
}

func signerFromKey(tb testing.TB, k crypto.PrivKey) *testSigner {
	tb.Helper()
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	return &testSigner{key: k, machine: id.String()}
}

// newSigner returns a signer with a freshly generated key.
func newSigner(tb testing.TB) *testSigner {
	tb.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return signerFromKey(tb, k)
}

// seededSigner returns a signer whose key is fixed by seed, for
// reproducible bytes (fuzz seeds).
func seededSigner(tb testing.TB, seed byte) *testSigner {
	tb.Helper()
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(s))
	if err != nil {
		tb.Fatal(err)
	}
	return signerFromKey(tb, k)
}

var testTime = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

// writer builds one machine's chain in memory.
type writer struct {
	s    Signer
	head Head
}

// next makes the writer's next event at the given clock.
func (w *writer) next(tb testing.TB, clock uint64, typ string, body string) *Event {
	tb.Helper()
	e, err := NewEvent(w.s, Stamp{Seq: w.head.Seq + 1, Prev: w.head.ID, Clock: clock, Time: testTime}, Draft{Type: typ, Body: json.RawMessage(body)})
	if err != nil {
		tb.Fatal(err)
	}
	w.head = Head{Seq: e.Seq, ID: e.ID}
	return e
}

// chainOf makes n events of one machine with clocks 1..n.
func chainOf(tb testing.TB, s Signer, n int) []*Event {
	tb.Helper()
	w := &writer{s: s}
	out := make([]*Event, n)
	for i := range out {
		out[i] = w.next(tb, uint64(i+1), "test", fmt.Sprintf(`{"n":%d}`, i))
	}
	return out
}

// newJournal creates an empty journal file and returns its path.
func newJournal(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "timeline_events.jsonl")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func mustOpen(tb testing.TB, path string) *Log {
	tb.Helper()
	l, err := OpenLog(path, LogOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

func draft(typ, body string) Draft { return Draft{Type: typ, Body: json.RawMessage(body)} }

// lines returns the canonical lines of events, for comparisons.
func lines(events []*Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = string(e.line)
	}
	return out
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// writeEvents replaces the file at path with events, each once, in total
// order: a journal as a merge or an export writes it.
func writeEvents(tb testing.TB, path string, events []*Event) {
	tb.Helper()
	var b []byte
	for _, e := range Merge(events, nil) {
		b = append(append(b, e.line...), '\n')
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}
