package node

import (
	"cmp"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/store"
)

// Transfer is a blob moving between this node and a peer (api.Transfer).
type Transfer = api.Transfer

// transfers are the blob transfers in flight. Safe for concurrent use.
type transfers struct {
	mu     sync.Mutex
	flight map[*Transfer]struct{}
}

func newTransfers() *transfers { return &transfers{flight: map[*Transfer]struct{}{}} }

// start records a transfer; the progress function it returns updates it,
// and end removes it.
func (ts *transfers) start(t Transfer) (progress protocol.Progress, end func()) {
	t.Started = time.Now()
	p := &t
	ts.mu.Lock()
	ts.flight[p] = struct{}{}
	ts.mu.Unlock()
	progress = func(done, size int64) {
		ts.mu.Lock()
		p.Done, p.Size = done, size
		ts.mu.Unlock()
	}
	end = func() {
		ts.mu.Lock()
		delete(ts.flight, p)
		ts.mu.Unlock()
	}
	return progress, end
}

// list returns the transfers in flight, oldest first.
func (ts *transfers) list() []Transfer {
	ts.mu.Lock()
	out := make([]Transfer, 0, len(ts.flight))
	for t := range ts.flight {
		out = append(out, *t)
	}
	ts.mu.Unlock()
	slices.SortFunc(out, func(a, b Transfer) int {
		return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.Blob, b.Blob), cmp.Compare(a.Peer, b.Peer))
	})
	return out
}

// servedBlobs serves the store's blobs and shows each one being served
// as an "out" transfer while its stream reads it.
type servedBlobs struct {
	*store.Store
	ts *transfers
}

func (s servedBlobs) OpenBlob(agent, peer, sha256Hex string) (io.ReadSeekCloser, int64, error) {
	f, size, err := s.Store.OpenBlob(agent, peer, sha256Hex)
	if err != nil {
		return nil, 0, err
	}
	progress, end := s.ts.start(Transfer{Direction: "out", Peer: peer, Agent: agent, Blob: sha256Hex, Size: size})
	return &countedBlob{ReadSeekCloser: f, size: size, progress: progress, end: end}, size, nil
}

// countedBlob reports how far a served blob has been read.
type countedBlob struct {
	io.ReadSeekCloser
	at, size int64
	progress protocol.Progress
	end      func()
}

func (c *countedBlob) Seek(offset int64, whence int) (int64, error) {
	at, err := c.ReadSeekCloser.Seek(offset, whence)
	if err == nil {
		c.at = at
		c.progress(at, c.size)
	}
	return at, err
}

func (c *countedBlob) Read(p []byte) (int, error) {
	n, err := c.ReadSeekCloser.Read(p)
	c.at += int64(n)
	c.progress(c.at, c.size)
	return n, err
}

func (c *countedBlob) Close() error {
	c.end()
	return c.ReadSeekCloser.Close()
}
