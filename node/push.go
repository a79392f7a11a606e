package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/protocol"
)

// pushAt is the smallest file a snapshot through the node pushes to its
// peers while it stores it (see push); a smaller one is stored within
// milliseconds and offered.
const pushAt = 8 << 20

// pushGrace is how long a snapshot that has stored a pushed file waits for
// the rest of the push to be sent; a peer further behind than that is
// offered the blob instead, so that a slow link cannot hold a snapshot up.
const pushGrace = 2 * time.Second

// pushPrefix names, in partial/, a push being received.
const pushPrefix = "push-"

// pushedBlobs are the blobs that peers kept from a snapshot's pushes.
type pushedBlobs struct {
	mu sync.Mutex
	to map[peer.ID]map[string]bool
}

func (k *pushedBlobs) has(p peer.ID, h string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.to[p][h]
}

func (k *pushedBlobs) add(p peer.ID, h string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.to[p] == nil {
		k.to[p] = map[string]bool{}
	}
	k.to[p][h] = true
}

// pushStall is how long a push may hold up the snapshot that feeds it
// (one write of a part of the file): a peer slower than that is dropped
// from the push, and offered the blob once it is stored.
const pushStall = 2 * time.Second

// push starts pushing a file of size bytes, which a snapshot is about to
// store as a blob of agent, to every connected peer that shares the agent
// (protocol.PushID); it returns nil for a small file or when no peer takes
// it. The bytes come from the snapshot's own reads (the returned stream's
// Write), each part passed to each peer's stream as it is read; End sends
// each peer the blob's hash, and a peer that keeps the blob is recorded in
// kept, and not offered it.
func (n *Node) push(agent string, size int64, kept *pushedBlobs) capsule.BlobStream {
	if size < pushAt {
		return nil
	}
	ctx, cancel := context.WithTimeout(n.ctx, pushGrace)
	defer cancel()
	var pushes []*peerPush
	for _, p := range n.host.Network().Peers() {
		if !n.store.Shares().Shared(agent, p.String()) {
			continue
		}
		r, w := io.Pipe()
		x, err := protocol.StartPush(ctx, n.host, p, protocol.PushHeader{Agent: agent, Size: size}, r)
		if err != nil {
			n.log.Debug("blob push", "peer", p, "agent", agent, "err", err)
			continue
		}
		pp := &peerPush{peer: p, x: x, r: r, w: w, sent: make(chan error, 1)}
		go func() {
			err := <-x.Sent()
			r.CloseWithError(cmp.Or(err, errPushOver)) // a write after the end, or after a failure, fails
			pp.sent <- err
		}()
		pushes = append(pushes, pp)
	}
	if len(pushes) == 0 {
		return nil
	}
	return &blobPush{n: n, agent: agent, pushes: pushes, kept: kept}
}

// errPushOver is what a write to a push that has ended gets.
var errPushOver = errors.New("the push has ended")

// peerPush is a push to one peer: what is written to w, the stream sends.
type peerPush struct {
	peer    peer.ID
	x       *protocol.Pushing
	r       *io.PipeReader
	w       *io.PipeWriter
	sent    chan error // once: how sending ended
	dropped bool       // a write failed or stalled
}

// blobPush is a file's push to the peers (see push).
type blobPush struct {
	n      *Node
	agent  string
	pushes []*peerPush
	kept   *pushedBlobs
}

// Write passes p to each peer's push still going, waiting for it to be
// taken; a peer that has not taken it within pushStall is dropped.
func (b *blobPush) Write(p []byte) (int, error) {
	for _, pp := range b.pushes {
		if pp.dropped {
			continue
		}
		stall := time.AfterFunc(pushStall, func() { pp.r.CloseWithError(errors.New("the peer took no part of the push for the push's stall")) })
		_, err := pp.w.Write(p)
		stall.Stop()
		if err != nil {
			pp.dropped = true
			pp.x.Abort()
		}
	}
	return len(p), nil
}

// End finishes each push: the blob's hash to a peer that was sent every
// byte within pushGrace, an abort to the others.
func (b *blobPush) End(sha256Hex string, stored error) {
	var wg sync.WaitGroup
	for _, pp := range b.pushes {
		wg.Go(func() {
			pp.w.Close()
			err := stored
			if err == nil && pp.dropped {
				err = errors.New("the push was dropped")
			}
			if err == nil {
				err = b.sent(pp)
			} else {
				pp.x.Abort()
				<-pp.sent
			}
			if err == nil {
				err = pp.x.End(sha256Hex)
			}
			if err != nil {
				b.n.log.Debug("blob push", "peer", pp.peer, "agent", b.agent, "err", err)
				return
			}
			b.kept.add(pp.peer, sha256Hex)
		})
	}
	wg.Wait()
}

// sent waits up to pushGrace for pp's last bytes to be sent; a push that
// fails or is not done by then is aborted.
func (b *blobPush) sent(pp *peerPush) error {
	timer := time.NewTimer(pushGrace)
	defer timer.Stop()
	select {
	case err := <-pp.sent:
		if err != nil {
			pp.x.Abort()
		}
		return err
	case <-timer.C:
		pp.x.Abort()
		<-pp.sent
		return errors.New("the peer was more than the push's grace behind")
	}
}

// takePush receives a push from p of a blob of an agent this node shares
// with p (held, or not yet: a new agent's first snapshot may come before
// the node takes its capsule), into partial/, while the blobs kept aside
// stay under maxAside: whole and checked, it waits there as an offered
// blob does (partial/SHA256.whole) until an event names it.
func (n *Node) takePush(p peer.ID, hd protocol.PushHeader) (*os.File, func(string) error, error) {
	if n.harnessed() || !capsule.ValidAgentID(hd.Agent) || !n.store.Shares().Shared(hd.Agent, p.String()) {
		return nil, nil, fmt.Errorf("this node does not share %s with %s", hd.Agent, p)
	}
	if n.aside.Add(hd.Size) > maxAside {
		n.aside.Add(-hd.Size)
		return nil, nil, fmt.Errorf("no room for %d more bytes aside", hd.Size)
	}
	dir := filepath.Join(n.home, PartialDir)
	err := os.MkdirAll(dir, 0o700)
	var f *os.File
	if err == nil {
		f, err = os.CreateTemp(dir, pushPrefix+"*")
	}
	if err != nil {
		n.aside.Add(-hd.Size)
		return nil, nil, err
	}
	return f, func(h string) error {
		whole := filepath.Join(dir, h+wholeSuffix)
		if h != "" {
			if _, err := os.Stat(whole); err != nil && len(n.store.HeldBlobs(hd.Agent, "", []string{h})) == 0 {
				if err := os.Rename(f.Name(), whole); err != nil {
					os.Remove(f.Name())
					n.aside.Add(-hd.Size)
					return err
				}
				return nil
			}
			os.Remove(f.Name()) // held or aside already
		}
		n.aside.Add(-hd.Size)
		return nil
	}, nil
}
