package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tern-dev/tern/journal"
)

// AppendWriters and AppendEvents shape Appends: this many writers, each
// appending one event per call and waiting until it is durable, until
// this many events are written.
const (
	AppendWriters = 8
	AppendEvents  = 16_000
)

// AppendsResult is what Appends measured.
type AppendsResult struct {
	Writers      int     `json:"writers"`
	Events       int     `json:"events"`
	EventsPerSec float64 `json:"events_per_second"`
	// SignMicros is one event's signature, signed one after another;
	// SyncMicros one write and fsync of a group of Writers events, in
	// the node's folder. FloorPerSec is Writers / (Writers × SignMicros +
	// SyncMicros): with every writer waiting for its own event, nothing
	// overlaps a group's signatures (each event's prev is the id of the
	// one before, which covers its signature) nor its fsync, so no append
	// path of this journal format does better. Ratio is EventsPerSec over
	// it.
	SignMicros  float64 `json:"sign_us"`
	SyncMicros  float64 `json:"sync_us"`
	FloorPerSec float64 `json:"floor_events_per_second"`
	Ratio       float64 `json:"ratio"`
}

// Appends measures durable appends as a node takes them from its clients
// (node.Node.Append: the holder's epoch, the journal's group commit,
// gossip with no peer): AppendWriters goroutines append one user message
// each per call to one capsule until AppendEvents are written, then the
// floor of that load is measured in the same folder.
func Appends(ctx context.Context, opt Options) (res AppendsResult, err error) {
	dir, err := opt.tempDir("appends")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	n, err := startNode(home(dir, 0), idleInterval, opt)
	if err != nil {
		return res, err
	}
	defer closeAll(&err, n)
	c := filepath.Join(dir, "chat")
	agent, err := newCapsule(c, "chat", n.Identity())
	if err != nil {
		return res, err
	}
	if _, _, err := n.Import(c); err != nil {
		return res, err
	}
	body, err := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": messageText}}})
	if err != nil {
		return res, err
	}
	drafts := []journal.Draft{{Type: "message", Session: "bench", Body: body}}

	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range AppendWriters {
		wg.Go(func() {
			for next.Add(1) <= AppendEvents {
				if _, err := n.Append(ctx, agent, drafts); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err, ok := failed.Load().(error); ok {
		return res, fmt.Errorf("bench appends: %w", err)
	}
	evs, err := n.Store().Events(agent, "")
	if err != nil {
		return res, err
	}
	if len(evs) < AppendEvents {
		return res, fmt.Errorf("bench appends: %d events in the journal, want %d", len(evs), AppendEvents)
	}
	line := len(evs[len(evs)-1].Line()) + 1
	res = AppendsResult{Writers: AppendWriters, Events: AppendEvents, EventsPerSec: AppendEvents / took.Seconds()}

	sign, err := signTime(n.Identity(), []byte(evs[len(evs)-1].Line()))
	if err != nil {
		return res, err
	}
	sync, err := groupSyncTime(dir, AppendWriters*line)
	if err != nil {
		return res, err
	}
	res.SignMicros, res.SyncMicros = micros(sign), micros(sync)
	res.FloorPerSec = AppendWriters / (AppendWriters*sign + sync).Seconds()
	res.Ratio = res.EventsPerSec / res.FloorPerSec
	return res, nil
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// signTime is the time one signature of msg takes, signed one after
// another.
func signTime(s journal.Signer, msg []byte) (time.Duration, error) {
	const signs = 1000
	start := time.Now()
	for range signs {
		if _, err := s.Sign(msg); err != nil {
			return 0, fmt.Errorf("bench appends: sign: %w", err)
		}
	}
	return time.Since(start) / signs, nil
}

// groupSyncTime is the time one write of size bytes to the end of a file
// in dir and an fsync take, as the journal's group commit does them.
func groupSyncTime(dir string, size int) (time.Duration, error) {
	const syncs = 300
	f, err := os.Create(filepath.Join(dir, "fsync"))
	if err != nil {
		return 0, fmt.Errorf("bench appends: %w", err)
	}
	defer f.Close()
	group := make([]byte, size)
	start := time.Now()
	for range syncs {
		if _, err := f.Write(group); err != nil {
			return 0, fmt.Errorf("bench appends: %w", err)
		}
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("bench appends: fsync: %w", err)
		}
	}
	return time.Since(start) / syncs, nil
}
