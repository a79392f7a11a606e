package protocol

import (
	"cmp"
	"io"
	"slices"
	"sync"
	"time"
)

// Transfer is a blob moving between this node and a peer right now, as
// `tern status` and the progress bars of `tern sync wait` show it.
type Transfer struct {
	Direction string    `json:"direction"` // "in": fetched from the peer; "out": served to it
	Peer      string    `json:"peer"`
	Agent     string    `json:"agent"`
	Blob      string    `json:"blob"` // sha256 hex
	Done      int64     `json:"done"` // bytes of the blob received (in) or read to send (out)
	Size      int64     `json:"size"`
	Started   time.Time `json:"started"`
}

// Transfers are the blob transfers in flight, both ways. Safe for
// concurrent use.
type Transfers struct {
	mu     sync.Mutex
	flight map[*Transfer]struct{}
}

// NewTransfers returns an empty set of transfers.
func NewTransfers() *Transfers { return &Transfers{flight: map[*Transfer]struct{}{}} }

// Start records a transfer; the progress function it returns updates it,
// and end removes it.
func (ts *Transfers) Start(t Transfer) (progress Progress, end func()) {
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

// List returns the transfers in flight, oldest first.
func (ts *Transfers) List() []Transfer {
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

// Counted serves src's blobs, showing each in ts as an "out" transfer
// while its stream reads it.
func Counted(src BlobSource, ts *Transfers) BlobSource { return countedSource{src, ts} }

type countedSource struct {
	BlobSource
	ts *Transfers
}

func (s countedSource) OpenBlob(agent, peer, sha256Hex string) (io.ReadSeekCloser, int64, error) {
	f, size, err := s.BlobSource.OpenBlob(agent, peer, sha256Hex)
	if err != nil {
		return nil, 0, err
	}
	progress, end := s.ts.Start(Transfer{Direction: "out", Peer: peer, Agent: agent, Blob: sha256Hex, Size: size})
	return &countedBlob{ReadSeekCloser: f, size: size, progress: progress, end: end}, size, nil
}

// countedBlob reports how far a served blob has been read.
type countedBlob struct {
	io.ReadSeekCloser
	at, size int64
	progress Progress
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
