package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
)

// LatencyEvents is how many events Latency appends in each of its two
// phases (the loaded one ends sooner if the transfer does).
const LatencyEvents = 200

// LatencyResult is what Latency measured, in milliseconds.
type LatencyResult struct {
	IdleEvents int     `json:"idle_events"`
	IdleP50    float64 `json:"idle_p50_ms"`
	IdleP99    float64 `json:"idle_p99_ms"`
	// Load is while node B takes a first copy of a new capsule from node A
	// (its workspace one file of BlobBytes), over the same connection.
	LoadEvents  int     `json:"load_events"`
	LoadP50     float64 `json:"load_p50_ms"`
	LoadP99     float64 `json:"load_p99_ms"`
	BlobBytes   int64   `json:"blob_bytes"`
	BlobSeconds float64 `json:"blob_seconds"` // from A's import until B holds it all
}

// Latency measures how long an event appended on node A (node.Node.Append:
// acknowledged, durable, published by gossip) takes until node B has
// stored it, on 127.0.0.1: first with nothing else moving, one event every
// 5 ms, then while B takes a first copy of a capsule whose workspace is a
// file of size bytes, which A has just imported. B's vector is polled
// every 100 µs, which bounds the error of each figure.
func Latency(ctx context.Context, size int64, opt Options) (res LatencyResult, err error) {
	if size <= 0 || size > MaxBlobSize {
		return res, fmt.Errorf("bench latency: a file of %d bytes: want 1 byte to %d", size, int64(MaxBlobSize))
	}
	dir, err := opt.tempDir("latency")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	a, err := startNode(home(dir, 0), idleInterval, opt)
	if err != nil {
		return res, err
	}
	b, err := startNode(home(dir, 1), idleInterval, opt)
	if err != nil {
		a.Close()
		return res, err
	}
	defer closeAll(&err, a, b)
	chat := filepath.Join(dir, "chat")
	chatID, err := newCapsule(chat, "chat", a.Identity())
	if err != nil {
		return res, err
	}
	for _, n := range []*node.Node{a, b} {
		if _, _, err := n.Import(chat); err != nil { // and joins its gossip topic
			return res, err
		}
	}
	if err := pair(a, b); err != nil {
		return res, err
	}
	if err := connect(ctx, a, b); err != nil {
		return res, err
	}
	// The gossip mesh forms at the first heartbeat after the connection.
	time.Sleep(1500 * time.Millisecond)
	seq := 0
	idle, err := latencies(ctx, a, b, chatID, &seq, LatencyEvents, nil)
	if err != nil {
		return res, fmt.Errorf("bench latency, idle: %w", err)
	}
	res.IdleEvents = len(idle)
	res.IdleP50, res.IdleP99 = percentile(idle, 50), percentile(idle, 99)

	// A new capsule whose workspace is one file of size bytes, imported
	// into A, which offers it to B at once.
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		return res, err
	}
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{'l', 'a', 't'}).Read(data)
	if err := os.WriteFile(filepath.Join(ws, "bulk.bin"), data, 0o644); err != nil {
		return res, err
	}
	data = nil
	bulk := filepath.Join(dir, "bulk")
	bulkID, err := newCapsule(bulk, "bulk", a.Identity())
	if err != nil {
		return res, err
	}
	if err := snapshotInto(ctx, bulk, ws, a.Identity(), opt); err != nil {
		return res, err
	}
	res.BlobBytes = size
	fetched := make(chan time.Duration, 1)
	began := time.Now()
	if _, _, err := a.Import(bulk); err != nil {
		return res, err
	}
	go func() {
		poll(ctx, time.Millisecond, func() (bool, error) {
			if !b.Store().Holds(bulkID) {
				return false, nil
			}
			want, err := b.Store().Wanted(bulkID)
			return err == nil && len(want) == 0, nil
		})
		fetched <- time.Since(began)
	}()
	load, err := latencies(ctx, a, b, chatID, &seq, LatencyEvents, fetched)
	if err != nil {
		return res, fmt.Errorf("bench latency, under load: %w", err)
	}
	res.BlobSeconds = (<-fetched).Seconds()
	if want, err := b.Store().Wanted(bulkID); err != nil || len(want) > 0 {
		return res, fmt.Errorf("bench latency: node B does not hold the new capsule whole (wants %d blobs; %v)", len(want), err)
	}
	res.LoadEvents = len(load)
	res.LoadP50, res.LoadP99 = percentile(load, 50), percentile(load, 99)
	return res, nil
}

// latencies appends count events to agent on a, one every 5 ms, and
// returns how long each took until b stored it; it stops early when
// until yields (and then puts its value back).
func latencies(ctx context.Context, a, b *node.Node, agent string, seq *int, count int, until chan time.Duration) ([]float64, error) {
	machine := a.Identity().Machine()
	var out []float64
	for range count {
		if until != nil {
			select {
			case d := <-until:
				until <- d
				return out, nil
			default:
			}
		}
		*seq++
		body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": fmt.Sprint(messageText, " ", *seq)}}})
		evs, err := a.Append(ctx, agent, []journal.Draft{{Type: "message", Session: "latency", Body: body}})
		if err != nil {
			return nil, err
		}
		acked := time.Now()
		want := evs[0].Seq
		for {
			v, err := b.Store().Vector(agent)
			if err != nil {
				return nil, err
			}
			if v[machine].Seq >= want {
				break
			}
			if time.Since(acked) > 30*time.Second {
				return nil, fmt.Errorf("event %d did not reach node B in 30 s", want)
			}
			time.Sleep(100 * time.Microsecond)
		}
		out = append(out, float64(time.Since(acked).Microseconds())/1000)
		time.Sleep(5 * time.Millisecond)
	}
	return out, nil
}

// percentile returns the p-th percentile of xs (nearest rank).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
