package journal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

func TestLogRoundTrip(t *testing.T) {
	path := newJournal(t)
	a, b := newSigner(t), newSigner(t)
	l := mustOpen(t, path)
	ctx := context.Background()
	var appended []*Event
	for i, batch := range [][]Draft{
		{draft("message", `{"role":"user","content":[{"type":"text","text":"hi"}]}`)},
		{draft("tool_call", `{"call_id":"c1","name":"ls","arguments":"{bad json"}`), draft("tool_result", `{"call_id":"c1","content":[],"is_error":false}`)},
		{{Type: "turn.started", Session: "s1", Turn: "t1"}},
	} {
		s := []Signer{a, b, a}[i]
		got, err := l.Append(ctx, s, uint64(i), batch...)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(batch) {
			t.Fatalf("got %d events for %d drafts", len(got), len(batch))
		}
		appended = append(appended, got...)
	}
	for i, e := range appended {
		if e.Clock != uint64(i+1) {
			t.Fatalf("event %d has clock %d", i, e.Clock)
		}
	}
	if appended[3].Seq != 2 || appended[3].Prev != appended[0].ID || appended[2].Seq != 2 || appended[2].Prev != appended[1].ID {
		t.Fatal("chains do not continue per machine")
	}
	if appended[3].Session != "s1" || appended[3].Epoch != 2 || string(appended[3].Body) != "{}" {
		t.Fatalf("fields not kept: %s", appended[3].line)
	}
	size, vec := l.Size(), l.Vector()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		t.Fatalf("Size %d, file %v %v", size, fi.Size(), err)
	}
	again := mustOpen(t, path)
	if !slices.Equal(lines(again.Events()), lines(appended)) {
		t.Fatal("reopened log holds other events")
	}
	if fmt.Sprint(again.Vector()) != fmt.Sprint(vec) || vec[a.Machine()].Seq != 2 || again.Size() != size {
		t.Fatalf("vector %v, want %v", again.Vector(), vec)
	}
	if problems := Check(again.Events()); problems != nil {
		t.Fatal(problems)
	}
	e, err := again.Append(ctx, a, 0, draft("test", `{}`))
	if err != nil || e[0].Seq != 3 || e[0].Clock != 5 || e[0].Prev != appended[3].ID {
		t.Fatalf("append after reopen: %v %v", e, err)
	}
}

func TestOpenLog(t *testing.T) {
	es := chainOf(t, newSigner(t), 3)
	var whole []byte
	for _, e := range es {
		whole = append(append(whole, e.line...), '\n')
	}
	firstTwo := len(es[0].line) + len(es[1].line) + 2
	torn := append(bytes.Clone(whole[:firstTwo]), es[2].line[:30]...)
	badMiddle := slices.Concat(whole[:len(es[0].line)+1], []byte("{\"v\":1}\n"), whole[len(es[0].line)+1:])

	tests := []struct {
		name      string
		data      []byte
		protected int64
		events    int
		wantSize  int    // file size after opening
		says      string // error, when OpenLog must fail
		warned    bool
	}{
		{"a whole file opens as it is", whole, int64(len(whole)), 3, len(whole), "", false},
		{"an empty file opens", nil, 0, 0, 0, "", false},
		{"a torn last line is cut and logged", torn, int64(firstTwo), 2, firstTwo, "", true},
		{"a torn line alone is cut", []byte(es[0].line[:10]), 0, 0, 0, "", true},
		{"a torn last line inside the sealed bytes is damage", torn, int64(firstTwo + 1), 0, len(torn), "damaged, not interrupted", false},
		{"a file shorter than the sealed bytes is damage", whole, int64(len(whole) + 1), 0, len(whole), "the journal was truncated", false},
		{"a bad line is named and left alone", badMiddle, 0, 0, len(badMiddle), "line 2: invalid event", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.jsonl")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			l, err := OpenLog(path, LogOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Protected: tt.protected})
			after := readFile(t, path)
			if len(after) != tt.wantSize || !bytes.Equal(after, tt.data[:min(len(tt.data), tt.wantSize)]) {
				t.Fatalf("file is %d bytes, want the first %d", len(after), tt.wantSize)
			}
			if tt.says != "" {
				if err == nil || !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("got %v, want an error saying %q", err, tt.says)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if len(l.Events()) != tt.events || l.Size() != int64(tt.wantSize) {
				t.Fatalf("%d events, size %d", len(l.Events()), l.Size())
			}
			if !tt.warned {
				if logs.Len() != 0 {
					t.Fatalf("unexpected log: %s", logs.String())
				}
				return
			}
			var rec struct {
				Level  string
				Path   string
				Offset int
				Bytes  int
			}
			if err := json.Unmarshal(logs.Bytes(), &rec); err != nil {
				t.Fatalf("log %q: %v", logs.String(), err)
			}
			if rec.Level != "WARN" || rec.Path != path || rec.Offset != tt.wantSize || rec.Bytes != len(tt.data)-tt.wantSize {
				t.Fatalf("log record %+v", rec)
			}
		})
	}
	t.Run("a missing file is an error", func(t *testing.T) {
		_, err := OpenLog(filepath.Join(t.TempDir(), "nope.jsonl"), LogOptions{})
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a bad line's error is a LineError", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "j.jsonl")
		if err := os.WriteFile(path, badMiddle, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := OpenLog(path, LogOptions{})
		var le *LineError
		if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("got %v", err)
		}
	})
}

// flakySigner fails its failAt-th signature.
type flakySigner struct {
	Signer
	n, failAt int
}

func (f *flakySigner) Sign(msg []byte) ([]byte, error) {
	f.n++
	if f.n == f.failAt {
		return nil, errors.New("hardware key unplugged")
	}
	return f.Signer.Sign(msg)
}

func TestFailedAppendLeavesTheFileUnchanged(t *testing.T) {
	s := newSigner(t)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		signer Signer
		drafts []Draft
		want   error
		says   string
	}{
		{"an invalid body in a batch writes nothing", context.Background(), s,
			[]Draft{draft("test", `{}`), draft("test", `{"oops"`)}, ErrInvalidDraft, "draft 2"},
		{"an empty type in a batch writes nothing", context.Background(), s,
			[]Draft{draft("test", `{}`), draft("", `{}`)}, ErrInvalidDraft, "draft 2"},
		{"a type with a line break in a batch writes nothing", context.Background(), s,
			[]Draft{draft("test", `{}`), draft("test\nid: 9", `{}`)}, ErrInvalidDraft, "draft 2"},
		{"a signer failing mid-batch writes nothing", context.Background(), &flakySigner{Signer: s, failAt: 2},
			[]Draft{draft("test", `{}`), draft("test", `{}`), draft("test", `{}`)}, nil, "hardware key unplugged"},
		{"a signer whose key is not its machine's writes nothing", context.Background(), &testSigner{key: newSigner(t).key, machine: s.Machine()},
			[]Draft{draft("test", `{}`)}, ErrBadSignature, s.Machine()},
		{"a canceled context writes nothing", canceled, s,
			[]Draft{draft("test", `{}`)}, context.Canceled, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := newJournal(t)
			l := mustOpen(t, path)
			if _, err := l.Append(context.Background(), s, 0, draft("test", `{"first":true}`)); err != nil {
				t.Fatal(err)
			}
			before := readFile(t, path)
			_, err := l.Append(tt.ctx, tt.signer, 0, tt.drafts...)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want %v saying %q", err, tt.want, tt.says)
			}
			if !bytes.Equal(readFile(t, path), before) || len(l.Events()) != 1 || l.Size() != int64(len(before)) {
				t.Fatal("a failed append changed the journal")
			}
			next, err := l.Append(context.Background(), s, 0, draft("test", `{}`))
			if err != nil || next[0].Seq != 2 || next[0].Clock != 2 {
				t.Fatalf("the next append: %v %v", next, err)
			}
		})
	}
}

func TestAppendWriteAndFsyncErrors(t *testing.T) {
	s := newSigner(t)
	ctx := context.Background()
	t.Run("a failed write is cut back and the log goes on", func(t *testing.T) {
		path := newJournal(t)
		l := mustOpen(t, path)
		if _, err := l.Append(ctx, s, 0, draft("test", `{}`)); err != nil {
			t.Fatal(err)
		}
		before := readFile(t, path)
		disk := errors.New("no space left on device")
		l.hooks.writeAt = func(b []byte, off int64) (int, error) {
			n, _ := l.f.WriteAt(b[:len(b)/2], off) // a partial write, as a full disk does
			return n, disk
		}
		if _, err := l.Append(ctx, s, 0, draft("test", `{"big":true}`)); !errors.Is(err, disk) {
			t.Fatalf("got %v", err)
		}
		if !bytes.Equal(readFile(t, path), before) {
			t.Fatal("the partial write was not cut back")
		}
		l.hooks.writeAt = nil
		e, err := l.Append(ctx, s, 0, draft("test", `{}`))
		if err != nil || e[0].Seq != 2 || e[0].Prev != l.Events()[0].ID {
			t.Fatalf("after a failed write: %v %v", e, err)
		}
	})
	t.Run("a failed fsync fails every later append", func(t *testing.T) {
		path := newJournal(t)
		l := mustOpen(t, path)
		eio := errors.New("input/output error")
		l.hooks.sync = func() error { return eio }
		for i := range 2 {
			if _, err := l.Append(ctx, s, 0, draft("test", `{}`)); !errors.Is(err, eio) {
				t.Fatalf("append %d: got %v", i, err)
			}
		}
		l.hooks.sync = nil
		if _, err := l.Append(ctx, s, 0, draft("test", `{}`)); !errors.Is(err, eio) || !strings.Contains(err.Error(), "reopen") {
			t.Fatalf("after the fsync error: got %v", err)
		}
		l.Close()
		if again := mustOpen(t, path); len(again.Events()) != 0 {
			t.Fatal("an unacknowledged event survived the cut-back")
		}
	})
	t.Run("a closed log refuses appends", func(t *testing.T) {
		l := mustOpen(t, newJournal(t))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, s, 0, draft("test", `{}`)); !errors.Is(err, ErrClosed) {
			t.Fatalf("got %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second close: %v", err)
		}
	})
}

func TestAppendRefusesABrokenOwnChain(t *testing.T) {
	a, b := newSigner(t), newSigner(t)
	A := chainOf(t, a, 3)
	fork := at(t, a, 3, A[1].ID, 3, `{"fork":true}`)
	ctx := context.Background()
	tests := []struct {
		name   string
		events []*Event
		want   error
	}{
		{"a forked chain is not extended", concat(A, []*Event{fork}), ErrFork},
		{"a chain with a gap is not extended", concat(A[:1], A[2:]), ErrBrokenChain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := newJournal(t)
			writeEvents(t, path, tt.events)
			l := mustOpen(t, path)
			before := readFile(t, path)
			_, err := l.Append(ctx, a, 0, draft("test", `{}`))
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), a.Machine()) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if !bytes.Equal(readFile(t, path), before) {
				t.Fatal("refused append changed the file")
			}
			if _, err := l.Append(ctx, b, 0, draft("test", `{}`)); err != nil {
				t.Fatalf("another machine cannot append: %v", err)
			}
		})
	}
	t.Run("a fork that arrives by Add stops later appends", func(t *testing.T) {
		l := mustOpen(t, newJournal(t))
		if _, err := l.Add(ctx, A...); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, a, 0, draft("test", `{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Add(ctx, fork); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, a, 0, draft("test", `{}`)); !errors.Is(err, ErrFork) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestLamportClockAcrossMerge(t *testing.T) {
	a, b := newSigner(t), newSigner(t)
	A, B := chainOf(t, a, 3), chainOf(t, b, 10)
	ctx := context.Background()
	check := func(t *testing.T, l *Log) {
		t.Helper()
		e, err := l.Append(ctx, a, 0, draft("test", `{}`), draft("test", `{}`))
		if err != nil {
			t.Fatal(err)
		}
		if e[0].Clock != 11 || e[1].Clock != 12 || e[0].Seq != 4 || e[0].Prev != A[2].ID {
			t.Fatalf("got clocks %d, %d, seq %d", e[0].Clock, e[1].Clock, e[0].Seq)
		}
		if problems := Check(l.Events()); problems != nil {
			t.Fatal(problems)
		}
	}
	t.Run("an append after a merge goes above every clock", func(t *testing.T) {
		path := newJournal(t)
		writeEvents(t, path, Merge(A, B))
		check(t, mustOpen(t, path))
	})
	t.Run("an append after Add goes above every clock", func(t *testing.T) {
		l := mustOpen(t, newJournal(t))
		if _, err := l.Add(ctx, A...); err != nil {
			t.Fatal(err)
		}
		added, err := l.Add(ctx, concat(B, A)...)
		if err != nil || len(added) != len(B) {
			t.Fatalf("added %d events (%v), want the %d new ones", len(added), err, len(B))
		}
		if again, err := l.Add(ctx, B...); err != nil || again != nil {
			t.Fatalf("adding known events again added %d (%v)", len(again), err)
		}
		check(t, l)
	})
}

func TestConcurrentAppendsShareFsyncs(t *testing.T) {
	const writers, each = 8, 25
	path := newJournal(t)
	l := mustOpen(t, path)
	s := newSigner(t)
	// Hold the first fsync until every writer has queued an append, so that
	// at least one group is shared however the goroutines are scheduled.
	allQueued := make(chan struct{})
	queued := 0
	l.hooks.enqueued = func() { // called with l.mu held
		if queued++; queued == writers {
			close(allQueued)
		}
	}
	first := true
	l.hooks.beforeSync = func() {
		if first {
			first = false
			<-allQueued
		}
	}
	var wg sync.WaitGroup
	got := make([][]*Event, writers)
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e, err := l.Append(context.Background(), s, 0, draft("test", fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)))
				if err != nil {
					errs[w] = err
					return
				}
				got[w] = append(got[w], e...)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	events := l.Events()
	if len(events) != writers*each {
		t.Fatalf("%d events, want %d", len(events), writers*each)
	}
	for i, e := range events {
		if e.Seq != uint64(i+1) || e.Clock != uint64(i+1) {
			t.Fatalf("event %d has seq %d clock %d", i, e.Seq, e.Clock)
		}
	}
	if problems := Check(events); problems != nil {
		t.Fatal(problems)
	}
	acked := map[string]bool{}
	for _, g := range got {
		for _, e := range g {
			acked[e.ID] = true
		}
	}
	if len(acked) != writers*each {
		t.Fatalf("%d acknowledged events, want %d", len(acked), writers*each)
	}
	if n := l.syncs.Load(); n >= writers*each {
		t.Fatalf("%d fsyncs for %d appends: no group commit", n, writers*each)
	}
	checkSealed(t, l)
	l.Close()
	again := mustOpen(t, path)
	if !slices.Equal(lines(again.Events()), lines(events)) {
		t.Fatal("the file does not hold what was acknowledged")
	}
	checkSealed(t, again)
}

func TestSealedCoversExactlyTheCompleteLines(t *testing.T) {
	path := newJournal(t)
	l := mustOpen(t, path)
	checkSealed(t, l)
	s := newSigner(t)
	if _, err := l.Append(context.Background(), s, 0, draft("test", `{}`), draft("test", `{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	checkSealed(t, l)
	l.Close()

	// A torn last line is not sealed: it is cut on open.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"torn`)
	f.Close()
	again := mustOpen(t, path)
	checkSealed(t, again)

	// A failed write leaves the seal where it was.
	size, sum := again.Sealed()
	again.hooks.writeAt = func([]byte, int64) (int, error) { return 0, errors.New("disk full") }
	if _, err := again.Append(context.Background(), s, 0, draft("test", `{}`)); err == nil {
		t.Fatal("append succeeded with a failing write")
	}
	if size2, sum2 := again.Sealed(); size2 != size || sum2 != sum {
		t.Fatal("a failed write moved the seal")
	}
	again.hooks.writeAt = nil
	if _, err := again.Append(context.Background(), s, 0, draft("test", `{"n":3}`)); err != nil {
		t.Fatal(err)
	}
	checkSealed(t, again)
}

// checkSealed fails unless l.Sealed is the size and sha256 of l's file.
func checkSealed(t *testing.T, l *Log) {
	t.Helper()
	data, err := os.ReadFile(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	size, sum := l.Sealed()
	if size != int64(len(data)) || sum != sha256.Sum256(data) {
		t.Fatalf("Sealed says %d bytes %x; the file has %d bytes %x", size, sum, len(data), sha256.Sum256(data))
	}
}

func TestExtendFile(t *testing.T) {
	a := newSigner(t)
	A := chainOf(t, a, 3)
	t.Run("events follow the complete lines; a torn last line is dropped", func(t *testing.T) {
		path := newJournal(t)
		writeEvents(t, path, A[:1])
		f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(`{"torn`)
		f.Close()
		if err := ExtendFile(path, A[1:]); err != nil {
			t.Fatal(err)
		}
		want := strings.Join(lines(A), "\n") + "\n"
		if got := string(readFile(t, path)); got != want {
			t.Fatalf("got\n%s", got)
		}
	})
	t.Run("the file's permissions are kept and no temporary file is left", func(t *testing.T) {
		path := newJournal(t)
		if err := os.Chmod(path, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := ExtendFile(path, A); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != 0o640 {
			t.Fatalf("mode %v %v", fi.Mode(), err)
		}
		entries, _ := os.ReadDir(filepath.Dir(path))
		if len(entries) != 1 {
			t.Fatalf("folder holds %d entries", len(entries))
		}
	})
	t.Run("an event without a line is refused and the file kept", func(t *testing.T) {
		path := newJournal(t)
		writeEvents(t, path, A)
		before := readFile(t, path)
		if err := ExtendFile(path, []*Event{{ID: "x", Clock: 9}}); err == nil {
			t.Fatal("a hand-made event was written")
		}
		if !bytes.Equal(readFile(t, path), before) {
			t.Fatal("the file changed")
		}
	})
}

func TestOpenLogReadsLargeFilesOnEveryCPU(t *testing.T) {
	e := chainOf(t, newSigner(t), 1)[0]
	const n, badAt = 3000, 2718 // over 1 MiB: read in parallel parts
	var data []byte
	for i := 1; i <= n; i++ {
		if i == badAt {
			data = append(data, "{not an event}\n"...)
			continue
		}
		data = append(append(data, e.line...), '\n')
	}
	if len(data) < 1<<20 {
		t.Fatalf("only %d bytes", len(data))
	}
	events, bad, torn := decodeParallel(data)
	wantEvents, wantBad, wantTorn := Decode(data)
	if len(events) != len(wantEvents) || torn != wantTorn || len(bad) != 1 || bad[0].Error() != wantBad[0].Error() {
		t.Fatalf("parallel decode: %d events, %v, torn %d; sequential: %d events, %v, torn %d", len(events), bad, torn, len(wantEvents), wantBad, wantTorn)
	}
	path := filepath.Join(t.TempDir(), "big.jsonl")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := OpenLog(path, LogOptions{})
	var le *LineError
	if !errors.As(err, &le) || le.Line != badAt {
		t.Fatalf("got %v, want an error naming line %d", err, badAt)
	}
}

// In a bubble, synctest.Wait returns once every goroutine of the test is
// blocked for good: the flusher in its hook, the first Add waiting for its
// group, and the second Add either returned or waiting too. No clock says
// when the second Add would have returned.
func TestAddReturnsOnlyOnceEveryEventIsDurableEvenWhenAnotherCallWritesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := newJournal(t)
		l := mustOpen(t, path)
		es := chainOf(t, newSigner(t), 3)
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		t.Cleanup(unblock) // before the Log closes, also on a failure
		first := true
		l.hooks.beforeSync = func() { // runs on the flusher, outside l.mu
			if first {
				first = false
				<-release
			}
		}
		firstDone := make(chan error, 1)
		go func() {
			_, err := l.Add(context.Background(), es...)
			firstDone <- err
		}()
		synctest.Wait() // the first group is written and waits to be synced
		secondDone := make(chan struct{})
		var added []*Event
		var err error
		go func() {
			added, err = l.Add(context.Background(), es[1])
			close(secondDone)
		}()
		synctest.Wait() // the second Add has returned, or waits for good
		select {
		case <-secondDone:
			t.Fatal("a second Add of an event still being written returned before it was durable")
		default:
		}
		unblock()
		<-secondDone
		if err != nil || len(added) != 0 {
			t.Fatalf("second Add: %v, %v; want nothing added and no error", added, err)
		}
		if err := <-firstDone; err != nil {
			t.Fatal(err)
		}
		if len(l.Events()) != len(es) {
			t.Fatalf("%d events held", len(l.Events()))
		}
	})
}

// Disorder moves exactly when an Add does more to the readable view than
// extend it by the events added.
func TestDisorderMovesWhenTheViewDoesMoreThanGrow(t *testing.T) {
	s := newSigner(t)
	es := chainOf(t, s, 5)
	fork, err := NewEvent(s, Stamp{Seq: 2, Prev: es[0].ID, Clock: 9}, draft("test", `{"forked":true}`))
	if err != nil {
		t.Fatal(err)
	}
	l := mustOpen(t, newJournal(t))
	step := func(name string, moves bool, events ...*Event) {
		t.Helper()
		before := l.Disorder()
		if _, err := l.Add(context.Background(), events...); err != nil {
			t.Fatal(err)
		}
		if got := l.Disorder() != before; got != moves {
			t.Errorf("%s: Disorder moved %v, want %v", name, got, moves)
		}
	}
	step("the first events, in order", false, es[0], es[1])
	step("a gap", true, es[3])
	step("the gap filled", true, es[2])
	step("the chain extended again", false, es[4])
	step("a fork", true, fork)
	step("the same event again", false, fork)
}
