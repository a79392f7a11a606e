package bench

import (
	"context"
	"io"
	"math"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tern-dev/tern/internal/filecopy"
)

// The measurements run at tiny sizes: these tests check that each one
// moves what it should and reports it, never how fast.

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestBlobMovesTheWholeBlobAndComparesItWithBothLimits(t *testing.T) {
	const size = 4 << 20
	r, err := Blob(testContext(t), size, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The file's blob and the snapshot's listing, a few hundred bytes.
	if r.Bytes != size || r.BytesReceived < size || r.BytesReceived > size+64<<10 {
		t.Errorf("bytes %d, received %d; want %d and a listing", r.Bytes, r.BytesReceived, size)
	}
	for name, v := range map[string]float64{"end to end": r.EndToEnd, "libp2p": r.Libp2p, "disk": r.Disk, "sha256": r.SHA256, "seconds": r.EndToEndSeconds} {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s = %v, want a positive figure", name, v)
		}
	}
	slower := map[string]float64{"libp2p": r.Libp2p, "disk": r.Disk}[r.Limit]
	if slower != min(r.Libp2p, r.Disk) || math.Abs(r.Ratio-r.EndToEnd/slower) > 1e-9 {
		t.Errorf("limit %q, ratio %v; libp2p %v, disk %v, end to end %v", r.Limit, r.Ratio, r.Libp2p, r.Disk, r.EndToEnd)
	}
	// The first copy as a person times it, from the file in its folder,
	// is its snapshot and then its import until the other node holds it.
	if !(r.SnapshotSeconds > 0) || !(r.FirstCopySeconds > 0) || math.Abs(r.FromFolderSeconds-(r.SnapshotSeconds+r.FirstCopySeconds)) > 1e-9 {
		t.Errorf("from the folder %v s, snapshot %v s, import to held %v s: want the snapshot and the import to held, both timed, adding up",
			r.FromFolderSeconds, r.SnapshotSeconds, r.FirstCopySeconds)
	}
	// And in one pass through node A, which offers the snapshot at once:
	// the test's context ends it otherwise.
	if !(r.ThroughNodeSnapshotSeconds > 0) || !(r.ThroughNodeSeconds > r.ThroughNodeSnapshotSeconds) {
		t.Errorf("through node A %v s, its snapshot %v s: want both timed, the snapshot a part", r.ThroughNodeSeconds, r.ThroughNodeSnapshotSeconds)
	}
	if !slices.Contains(filecopy.Methods, r.ImportCopy) {
		t.Errorf("the import copied its blobs by %q, want a filecopy method", r.ImportCopy)
	}
}

func TestCatchUpBringsEveryEventAndCountsTheWire(t *testing.T) {
	const events = 2000
	r, err := CatchUp(testContext(t), events, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Events != events || r.EventBytes < events*100 {
		t.Errorf("%d events of %d bytes, want %d of at least 100 bytes each", r.Events, r.EventBytes, events)
	}
	// B holds the agent's creation, its first event, before the clock.
	if r.EventsSent < events-1 {
		t.Errorf("%d events sent, want at least the %d missing", r.EventsSent, events-1)
	}
	// Every event crosses at least once as a frame (its line, a tag and
	// a length), and every frame inside libp2p's encryption and framing.
	if r.FrameBytes < r.EventBytes || r.WireBytes <= r.FrameBytes {
		t.Errorf("event bytes %d, frame bytes %d, wire bytes %d: want them increasing", r.EventBytes, r.FrameBytes, r.WireBytes)
	}
	if r.Exchanges < 1 || !(r.Seconds > 0) || r.Ratio != float64(r.WireBytes)/float64(r.EventBytes) {
		t.Errorf("%d exchanges, %v s, ratio %v", r.Exchanges, r.Seconds, r.Ratio)
	}
}

func TestAPartitionHealsIntoOneVector(t *testing.T) {
	r, err := Partition(testContext(t), 3, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// One node alone against two: it lacks their 100 events, each of them
	// its 50.
	if r.Nodes != 3 || r.Events != 3*PartitionEvents || r.Missing != 4*PartitionEvents {
		t.Errorf("%d nodes, %d events, %d missing", r.Nodes, r.Events, r.Missing)
	}
	if r.EventsSent < r.Missing || r.Exchanges < 2 || !(r.Seconds > 0) {
		t.Errorf("%d events sent in %d exchanges, %v s", r.EventsSent, r.Exchanges, r.Seconds)
	}
}

func TestIdleMemoryCountsTheNodeAfterItOpenedEveryCapsule(t *testing.T) {
	const capsules = 20
	r, err := IdleMemory(testContext(t), capsules, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Capsules != capsules || r.Events != capsules*MemoryEvents || r.EventBytes < capsules*MemoryEvents*100 {
		t.Errorf("%d capsules, %d events of %d bytes", r.Capsules, r.Events, r.EventBytes)
	}
	if !(r.RoundSeconds > 0) {
		t.Errorf("round of %v s", r.RoundSeconds)
	}
	// A running node holds a libp2p host and an HTTP server at least.
	for name, s := range map[string]MemorySample{"started": r.Started, "synced": r.Synced, "closed": r.Closed} {
		if s.HeapBytes <= 0 || s.Goroutines <= 0 {
			t.Errorf("%s: %+v, want a positive heap and goroutines", name, s)
		}
	}
	// Each open capsule holds a journal file and its writer goroutine;
	// closed, they are gone.
	if r.Synced.OpenFiles >= 0 && r.Closed.OpenFiles > r.Synced.OpenFiles-capsules {
		t.Errorf("%d open files after a round, %d once closed: the %d capsules' journals were not closed", r.Synced.OpenFiles, r.Closed.OpenFiles, capsules)
	}
	if r.Closed.Goroutines > r.Synced.Goroutines-capsules {
		t.Errorf("%d goroutines after a round, %d once closed: the %d journals' writers did not stop", r.Synced.Goroutines, r.Closed.Goroutines, capsules)
	}
}

func TestLatencyTimesEventsIdleAndDuringAFirstCopy(t *testing.T) {
	r, err := Latency(testContext(t), 16<<20, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r.IdleEvents != LatencyEvents || r.LoadEvents < 1 || r.IdleP50 <= 0 || r.LoadP50 <= 0 || r.IdleP99 < r.IdleP50 || r.BlobSeconds <= 0 {
		t.Fatalf("%+v", r)
	}
}

func TestBadSizesAreRefusedBeforeAnythingRuns(t *testing.T) {
	ctx := testContext(t)
	opt := Options{Dir: t.TempDir() + "/does-not-exist"} // would fail if anything ran
	cases := []struct {
		name string
		run  func() error
	}{
		{"an empty blob", func() error { _, err := Blob(ctx, 0, opt); return err }},
		{"a blob over the limit", func() error { _, err := Blob(ctx, MaxBlobSize+1, opt); return err }},
		{"no events to catch up on", func() error { _, err := CatchUp(ctx, 0, opt); return err }},
		{"a partition of one node", func() error { _, err := Partition(ctx, 1, opt); return err }},
		{"no capsules", func() error { _, err := IdleMemory(ctx, 0, opt); return err }},
		{"an empty first copy", func() error { _, err := Latency(ctx, 0, opt); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), "want") {
				t.Fatalf("err = %v, want one that says what is wanted", err)
			}
		})
	}
}

func TestTheRelayCountsEveryByteBothWays(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // echo
		c, err := l.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c)
		c.Close()
	}()
	r, err := newRelay(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	c, err := net.Dial("tcp", strings.TrimPrefix(strings.Replace(r.addr(), "/tcp/", ":", 1), "/ip4/"))
	if err != nil {
		t.Fatal(err)
	}
	msg := strings.Repeat("tern", 10_000)
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	back, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(back) != msg {
		t.Fatalf("echo through the relay: %d bytes, %v", len(back), err)
	}
	if got := r.carried(); got != 2*int64(len(msg)) {
		t.Fatalf("the relay counted %d bytes, want %d", got, 2*len(msg))
	}
}
