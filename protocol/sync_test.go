package protocol

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/tern-dev/tern/journal"
)

const agent = "6f1c9a52-0d1e-4a8e-9b7f-2a4c1e9d3b10"

// memJournals is an in-memory node: one event set per agent it shares.
type memJournals struct {
	mu     sync.Mutex
	events map[string][]*journal.Event
}

func newMem(agents ...string) *memJournals {
	m := &memJournals{events: map[string][]*journal.Event{}}
	for _, a := range agents {
		m.events[a] = nil
	}
	return m
}

func (m *memJournals) Events(a, peer string) ([]*journal.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	evs, ok := m.events[a]
	if !ok {
		return nil, fmt.Errorf("agent %s: %w", a, ErrNotShared)
	}
	return append([]*journal.Event(nil), evs...), nil
}

func (m *memJournals) Add(_ context.Context, a, peer string, evs []*journal.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events[a] = journal.Merge(m.events[a], evs)
	return nil
}

func (m *memJournals) ids(a string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b bytes.Buffer
	for _, e := range m.events[a] {
		b.WriteString(e.ID + "\n")
	}
	return b.String()
}

// writer appends signed events to a memJournals as one machine would.
type writer struct {
	s    journal.Signer
	head journal.Head
}

func newWriter(t testing.TB) *writer {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := journal.NewKeySigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return &writer{s: s}
}

func (w *writer) append(t testing.TB, m *memJournals, n int) {
	t.Helper()
	m.mu.Lock()
	var clock uint64
	for _, e := range m.events[agent] {
		clock = max(clock, e.Clock)
	}
	m.mu.Unlock()
	var evs []*journal.Event
	for i := 0; i < n; i++ {
		clock++
		body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": fmt.Sprint("message ", w.head.Seq+1)}}})
		e, err := journal.NewEvent(w.s, journal.Stamp{Seq: w.head.Seq + 1, Prev: w.head.ID, Clock: clock, Time: time.Unix(0, 0)}, journal.Draft{Type: "message", Session: "s", Body: body})
		if err != nil {
			t.Fatal(err)
		}
		w.head = journal.Head{Seq: e.Seq, ID: e.ID}
		evs = append(evs, e)
	}
	m.Add(context.Background(), agent, "", evs)
}

// exchange runs one sync between a (initiator) and b over an in-memory pipe.
func exchange(t testing.TB, a, b Journals) (SyncStats, SyncStats, error, error) {
	t.Helper()
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	var (
		sb   SyncStats
		errB error
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		sb, errB = Respond(context.Background(), cb, b, "peer-a")
		cb.Close()
	})
	sa, errA := Initiate(context.Background(), ca, a, "peer-b", agent)
	ca.Close()
	wg.Wait()
	return sa, sb, errA, errB
}

func TestTwoNodesWithConcurrentAppendsConverge(t *testing.T) {
	a, b := newMem(agent), newMem(agent)
	wa, wb := newWriter(t), newWriter(t)
	wa.append(t, a, 30)
	wb.append(t, b, 20)
	sa, sb, errA, errB := exchange(t, a, b)
	if errA != nil || errB != nil {
		t.Fatalf("sync: %v / %v", errA, errB)
	}
	if a.ids(agent) != b.ids(agent) || len(a.events[agent]) != 50 {
		t.Fatalf("not converged: a holds %d, b holds %d", len(a.events[agent]), len(b.events[agent]))
	}
	if sa.Received != 20 || sa.Sent != 30 || sb.Received != 30 || sb.Sent != 20 {
		t.Errorf("stats a %+v b %+v", sa, sb)
	}
	union := journal.VectorOf(a.events[agent])
	if !maps.Equal(sa.Both, union) || !maps.Equal(sb.Both, union) {
		t.Errorf("both sides should report the union's vector %v: a %v, b %v", union, sa.Both, sb.Both)
	}
	// An unchanged pair moves nothing.
	sa, _, errA, errB = exchange(t, a, b)
	if errA != nil || errB != nil || sa.Sent != 0 || sa.Received != 0 {
		t.Fatalf("second sync: %+v %v %v", sa, errA, errB)
	}
}

func TestThreeNodesConvergeThroughAMiddleOne(t *testing.T) {
	a, b, c := newMem(agent), newMem(agent), newMem(agent)
	newWriter(t).append(t, a, 5)
	newWriter(t).append(t, b, 7)
	newWriter(t).append(t, c, 3)
	for _, pair := range [][2]*memJournals{{a, b}, {c, b}, {a, b}} {
		if _, _, errA, errB := exchange(t, pair[0], pair[1]); errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
	}
	if a.ids(agent) != b.ids(agent) || b.ids(agent) != c.ids(agent) || len(a.events[agent]) != 15 {
		t.Fatal("three nodes did not converge")
	}
}

func TestANodeOfflineDuring10kAppendsCatchesUpWithLittleOverhead(t *testing.T) {
	a, b := newMem(agent), newMem(agent)
	w := newWriter(t)
	w.append(t, a, 100)
	exchange(t, a, b)
	w.append(t, a, 10000) // b was away
	var missing int64
	for _, e := range journal.Since(a.events[agent], journal.VectorOf(b.events[agent])) {
		missing += int64(len(e.Line()) + 1)
	}
	_, sb, errA, errB := exchange(t, a, b)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if a.ids(agent) != b.ids(agent) {
		t.Fatal("b did not catch up")
	}
	ratio := float64(sb.BytesSent+sb.BytesReceived) / float64(missing)
	t.Logf("catch-up of 10k events: %d bytes of events, %d on the wire (%.3fx)", missing, sb.BytesSent+sb.BytesReceived, ratio)
	if ratio > 1.1 {
		t.Errorf("wire bytes are %.3fx the missing events' size, over 1.1x", ratio)
	}
}

func TestAnAgentThatIsNotSharedIsRefused(t *testing.T) {
	a, b := newMem(agent), newMem() // b does not share the agent
	newWriter(t).append(t, a, 3)
	_, _, errA, errB := exchange(t, a, b)
	if !errors.Is(errA, ErrRefused) || !errors.Is(errB, ErrNotShared) {
		t.Fatalf("errors %v / %v", errA, errB)
	}
	if len(b.events) != 0 {
		t.Fatal("a refused sync stored something")
	}
}

func TestATamperedEventIsRejectedAndNothingOfItIsStored(t *testing.T) {
	a, b := newMem(agent), newMem(agent)
	newWriter(t).append(t, a, 3)
	evs, _ := a.Events(agent, "")
	ca, cb := net.Pipe()
	defer ca.Close()
	var errB error
	var wg sync.WaitGroup
	wg.Go(func() { _, errB = Respond(context.Background(), cb, b, "peer-a"); cb.Close() })
	s := newStream(ca)
	s.sendJSON(tagHello, hello{Agent: agent, Vector: journal.VectorOf(evs)})
	// b has nothing to send: read its done frame.
	if tag, _, err := s.recv(); err != nil || tag != tagDone {
		t.Fatalf("expected done, got %q %v", tag, err)
	}
	bad := bytes.Replace(evs[0].Line(), []byte("message 1"), []byte("message X"), 1)
	s.send(tagEvent, bad)
	s.sendJSON(tagDone, done{})
	wg.Wait()
	ca.Close()
	if !errors.Is(errB, ErrProtocol) {
		t.Fatalf("responder error %v", errB)
	}
	if len(b.events[agent]) != 0 {
		t.Fatal("a tampered event was stored")
	}
}

func TestAnOversizedFrameIsRefusedBeforeItIsRead(t *testing.T) {
	var buf bytes.Buffer
	WriteFrame(&buf, make([]byte, 100))
	_, err := ReadFrame(bufio.NewReader(&buf), 99)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v", err)
	}
}

func TestFramesRoundTripAndATruncatedOneIsUnexpectedEOF(t *testing.T) {
	var buf bytes.Buffer
	for _, p := range [][]byte{{}, []byte("x"), bytes.Repeat([]byte("y"), 300)} {
		WriteFrame(&buf, p)
	}
	data := buf.Bytes()
	r := bufio.NewReader(bytes.NewReader(data))
	for _, want := range []int{0, 1, 300} {
		p, err := ReadFrame(r, 1<<10)
		if err != nil || len(p) != want {
			t.Fatalf("frame of %d: %d %v", want, len(p), err)
		}
	}
	if _, err := ReadFrame(r, 1<<10); err != io.EOF {
		t.Fatalf("after the last frame: %v", err)
	}
	r = bufio.NewReader(bytes.NewReader(data[:len(data)-10]))
	var err error
	for err == nil {
		_, err = ReadFrame(r, 1<<10)
	}
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("a truncated stream ends with %v, want io.ErrUnexpectedEOF", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	WriteFrame(&buf, []byte("hello"))
	f.Add(buf.Bytes())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for {
			p, err := ReadFrame(r, 1<<12)
			if err != nil {
				return
			}
			if len(p) > 1<<12 {
				t.Fatalf("frame of %d bytes over the limit", len(p))
			}
		}
	})
}

// FuzzRespond feeds arbitrary bytes to a responder: it must end with an
// error or cleanly, never panic, and store only valid events.
func FuzzRespond(f *testing.F) {
	var buf bytes.Buffer
	s := &stream{w: bufio.NewWriter(&buf)}
	s.sendJSON(tagHello, hello{Agent: agent})
	s.sendJSON(tagDone, done{})
	f.Add(buf.Bytes())
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newMem(agent)
		rw := struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(data), io.Discard}
		Respond(context.Background(), rw, m, "fuzz")
		for _, e := range m.events[agent] {
			if _, err := journal.ParseLine(e.Line()); err != nil {
				t.Fatalf("stored an invalid event: %v", err)
			}
		}
	})
}

// trackedJournals counts the exchanges a Tracker is told of.
type trackedJournals struct {
	*memJournals
	running, begun atomic.Int32
}

func (j *trackedJournals) Exchanging(agent, peer string) func() {
	j.begun.Add(1)
	j.running.Add(1)
	return func() { j.running.Add(-1) }
}

func TestTheResponderTellsItsTrackerWhenAnExchangeBeginsAndEnds(t *testing.T) {
	a, b := newMem(agent), &trackedJournals{memJournals: newMem(agent)}
	newWriter(t).append(t, a, 3)
	if _, _, errA, errB := exchange(t, a, b); errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if b.begun.Load() != 1 || b.running.Load() != 0 {
		t.Fatalf("begun %d, running %d after one exchange; want 1 and 0", b.begun.Load(), b.running.Load())
	}
	// One that fails ends too.
	evs, _ := a.Events(agent, "")
	ca, cb := net.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { Respond(context.Background(), cb, b, "peer-a"); cb.Close() })
	s := newStream(ca)
	s.sendJSON(tagHello, hello{Agent: agent, Vector: journal.VectorOf(evs)})
	s.recv()
	s.send(tagEvent, []byte("not an event"))
	s.sendJSON(tagDone, done{})
	wg.Wait()
	ca.Close()
	if b.begun.Load() != 2 || b.running.Load() != 0 {
		t.Fatalf("begun %d, running %d after a failed exchange; want 2 and 0", b.begun.Load(), b.running.Load())
	}
}

// orderedStore records the batches handed to it, checks that each one's
// chain continues the one before (the store gets them in order), and can
// fail an Add.
type orderedStore struct {
	*memJournals
	mu      sync.Mutex
	batches int
	failAt  int // the Add that fails, from 1; 0: none
	err     error
}

func (o *orderedStore) Add(ctx context.Context, a, peer string, evs []*journal.Event) error {
	o.mu.Lock()
	o.batches++
	n := o.batches
	o.mu.Unlock()
	if n == o.failAt {
		return errors.New("the disk is full")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	held := o.memJournals.events[a]
	if len(held) > 0 && len(evs) > 0 && evs[0].Prev != held[len(held)-1].ID {
		o.err = fmt.Errorf("batch %d does not continue the one before", n)
	}
	o.memJournals.events[a] = append(held, evs...)
	return nil
}

func TestReceivedBatchesReachTheStoreInOrderAndAStoreFailureEndsTheExchange(t *testing.T) {
	a := newMem(agent)
	newWriter(t).append(t, a, 3*addBatch+5)
	b := &orderedStore{memJournals: newMem(agent)}
	_, _, errA, errB := exchange(t, a, b)
	if errA != nil || errB != nil || b.err != nil {
		t.Fatalf("sync: %v / %v / %v", errA, errB, b.err)
	}
	if b.batches != 4 || len(b.events[agent]) != 3*addBatch+5 {
		t.Fatalf("%d batches, %d events stored", b.batches, len(b.events[agent]))
	}

	failing := &orderedStore{memJournals: newMem(agent), failAt: 2}
	_, _, _, errB = exchange(t, a, failing)
	if errB == nil || !strings.Contains(errB.Error(), "the disk is full") {
		t.Fatalf("a store that failed: the exchange ended with %v", errB)
	}
	if got := len(failing.events[agent]); got != addBatch {
		t.Fatalf("%d events stored; want the first batch only, the one before the failure", got)
	}
}
