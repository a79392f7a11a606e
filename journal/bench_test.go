package journal

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// benchBody is a typical message body (~200 bytes).
var benchBody = json.RawMessage(`{"content":[{"text":"Please look at the failing test in journal/log_test.go and tell me why the fsync count is off by one.","type":"text"}],"role":"user"}`)

// run8 runs n calls of f spread over 8 goroutines and returns how long
// they took.
func run8(b *testing.B, n int, f func() error) time.Duration {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := f(); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	return d
}

// BenchmarkAppend8Writers: 8 goroutines, one event per Append, each
// durable before it returns.
func BenchmarkAppend8Writers(b *testing.B) {
	l := mustOpen(b, newJournal(b))
	s := newSigner(b)
	ctx := context.Background()
	d := Draft{Type: "message", Session: "s1", Turn: "t1", Body: benchBody}
	b.ReportAllocs()
	b.ResetTimer()
	took := run8(b, b.N, func() error {
		_, err := l.Append(ctx, s, 1, d)
		return err
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/took.Seconds(), "events/s")
	b.ReportMetric(float64(l.syncs.Load())/float64(b.N), "fsyncs/event")
	b.ReportMetric(appendFloor(b, s, d, 8), "floor-events/s")
}

// appendFloor measures, in the same run, what bounds appends from k
// writers that each wait for their own event: the events of one machine
// are built one after another (each one's prev is the id of the one
// before, which covers its signature), and a group of k costs k builds
// plus one write and fsync, none of which can overlap while every writer
// waits. It returns k / (k × build + write and fsync).
func appendFloor(b *testing.B, s Signer, d Draft, k int) float64 {
	b.Helper()
	const builds, syncs = 500, 200
	body, err := d.canonicalBody()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var head Head
	var line int
	for i := range builds {
		e, err := buildEvent(s, Stamp{Seq: head.Seq + 1, Prev: head.ID, Clock: uint64(i + 1), Time: time.Now()}, d, body, nil)
		if err != nil {
			b.Fatal(err)
		}
		head, line = Head{Seq: e.Seq, ID: e.ID}, len(e.line)+1
	}
	build := time.Since(start) / builds
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	group := make([]byte, k*line)
	start = time.Now()
	for range syncs {
		if _, err := f.Write(group); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	sync := time.Since(start) / syncs
	return float64(k) / (time.Duration(k)*build + sync).Seconds()
}

// BenchmarkSQLiteAppend8Writers: the same load on SQLite in WAL mode with
// synchronous=FULL: 8 goroutines, one row (same body bytes) per
// transaction.
func BenchmarkSQLiteAppend8Writers(b *testing.B) {
	path := filepath.Join(b.TempDir(), "events.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(60000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(8)
	if _, err := db.Exec(`CREATE TABLE events (id INTEGER PRIMARY KEY, machine TEXT NOT NULL, seq INTEGER NOT NULL, session TEXT, turn TEXT, type TEXT NOT NULL, body BLOB NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		b.Fatalf("journal_mode %q %v", mode, err)
	}
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	took := run8(b, b.N, func() error {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO events (machine, seq, session, turn, type, body) VALUES (?, ?, ?, ?, ?, ?)`,
			"12D3KooWbench", seq.Add(1), "s1", "t1", "message", []byte(benchBody)); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/took.Seconds(), "events/s")
}

// mergeFixture: two journals of 100k events each over two machines with
// interleaved clocks; 50k events are in both.
type mergeFixture struct {
	x, y         []*Event // in total order, as read from a file
	xData, yData []byte
}

var (
	fixtureOnce sync.Once
	fixture     mergeFixture
)

func mergeData(b *testing.B) *mergeFixture {
	b.Helper()
	fixtureOnce.Do(func() {
		const n = 75_000
		a, c := seededSigner(b, 10), seededSigner(b, 11)
		var A, B []*Event
		var wg sync.WaitGroup
		var setupErr atomic.Value
		for _, m := range []struct {
			s   Signer
			out *[]*Event
			odd uint64
		}{{a, &A, 1}, {c, &B, 0}} {
			wg.Go(func() {
				// Built without reading back, to keep the set-up short;
				// BenchmarkMerge100kFiles reads every line anyway.
				var head Head
				for i := range n {
					e, err := buildEvent(m.s, Stamp{Seq: head.Seq + 1, Prev: head.ID, Clock: uint64(2*i+2) - m.odd, Time: testTime},
						Draft{Type: "message"}, benchBody, nil)
					if err != nil {
						setupErr.Store(err)
						return
					}
					head = Head{Seq: e.Seq, ID: e.ID}
					*m.out = append(*m.out, e)
				}
			})
		}
		wg.Wait()
		if err, ok := setupErr.Load().(error); ok {
			b.Fatal(err)
		}
		fixture.x = Merge(A, B[:25_000])
		fixture.y = Merge(A[:25_000], B)
		fixture.xData = encode(fixture.x)
		fixture.yData = encode(fixture.y)
	})
	return &fixture
}

func encode(events []*Event) []byte {
	var out []byte
	for _, e := range events {
		out = append(append(out, e.line...), '\n')
	}
	return out
}

// heapReport runs f once outside the timer and reports how much the heap
// grew while its result was alive.
func heapReport(b *testing.B, f func() any) {
	b.Helper()
	b.StopTimer()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	keep := f()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/(1<<20), "heap-inuse-MB")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), "alloc-MB")
	b.StartTimer()
}

// BenchmarkMerge100k merges two 100k-event journals already in memory and
// in total order (the linear path).
func BenchmarkMerge100k(b *testing.B) {
	fx := mergeData(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if got := Merge(fx.x, fx.y); len(got) != 150_000 {
			b.Fatalf("%d events", len(got))
		}
	}
	heapReport(b, func() any { return Merge(fx.x, fx.y) })
}

// BenchmarkMerge100kUnsorted is the same merge with inputs in file order
// that is not the total order (the sort path).
func BenchmarkMerge100kUnsorted(b *testing.B) {
	fx := mergeData(b)
	x, y := reversed(fx.x), reversed(fx.y)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if got := Merge(x, y); len(got) != 150_000 {
			b.Fatalf("%d events", len(got))
		}
	}
	heapReport(b, func() any { return Merge(x, y) })
}

func reversed(s []*Event) []*Event {
	out := make([]*Event, len(s))
	for i, e := range s {
		out[len(s)-1-i] = e
	}
	return out
}

// BenchmarkMerge100kFiles merges two journal files end to end: decode and
// verify every line of both, merge, write the result.
func BenchmarkMerge100kFiles(b *testing.B) {
	fx := mergeData(b)
	out := filepath.Join(b.TempDir(), "merged.jsonl")
	run := func() any {
		x, bad, _ := Decode(fx.xData)
		y, bad2, _ := Decode(fx.yData)
		if bad != nil || bad2 != nil {
			b.Fatal(bad, bad2)
		}
		m := Merge(x, y)
		writeEvents(b, out, m)
		return m
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	heapReport(b, run)
}

// BenchmarkOpenLog100k opens a 100k-event journal (decode and verify on
// every CPU, build indexes).
func BenchmarkOpenLog100k(b *testing.B) {
	fx := mergeData(b)
	path := newJournal(b)
	writeEvents(b, path, fx.x)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l, err := OpenLog(path, LogOptions{})
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
}

func BenchmarkParseLine(b *testing.B) {
	e := sample(b, newSigner(b))
	line := e.Line()
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseLine(line); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewEvent(b *testing.B) {
	s := newSigner(b)
	d := Draft{Type: "message", Body: benchBody}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewEvent(s, Stamp{Seq: 1, Clock: 1}, d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCanonicalLine is the check every line read from a file or a
// peer passes: recognising text that is already canonical.
func BenchmarkCanonicalLine(b *testing.B) {
	line := sample(b, newSigner(b)).Line()
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical(line); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseDraft reads a draft as the API receives it: canonical
// form, its members, the integer check and the core body check.
func BenchmarkParseDraft(b *testing.B) {
	line := []byte(`{"body":` + string(benchBody) + `,"session":"s-1","turn":"t-1","type":"message"}`)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseDraft(line); err != nil {
			b.Fatal(err)
		}
	}
}
