package node

import (
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

// push starts sending the file f, of size bytes, which a snapshot is
// storing as a blob of agent, to every connected peer that shares the
// agent (protocol.PushID), reading it alongside the snapshot; it returns
// nil for a small file or when no peer takes it. Its End sends each peer
// the blob's hash once the bytes are sent; a peer that keeps the blob is
// recorded in kept, and not offered it.
func (n *Node) push(agent string, f *os.File, size int64, kept *pushedBlobs) capsule.BlobStream {
	if size < pushAt {
		return nil
	}
	ctx, cancel := context.WithTimeout(n.ctx, pushGrace)
	defer cancel()
	var pushes []peerPush
	for _, p := range n.host.Network().Peers() {
		if !n.store.Shares().Shared(agent, p.String()) {
			continue
		}
		x, err := protocol.StartPush(ctx, n.host, p, protocol.PushHeader{Agent: agent, Size: size}, io.NewSectionReader(f, 0, size))
		if err != nil {
			n.log.Debug("blob push", "peer", p, "agent", agent, "err", err)
			continue
		}
		pushes = append(pushes, peerPush{p, x})
	}
	if len(pushes) == 0 {
		return nil
	}
	return &blobPush{n: n, agent: agent, pushes: pushes, kept: kept}
}

type peerPush struct {
	peer peer.ID
	x    *protocol.Pushing
}

// blobPush is a file's push to the peers (see push).
type blobPush struct {
	n      *Node
	agent  string
	pushes []peerPush
	kept   *pushedBlobs
}

// End finishes each push: the blob's hash to a peer that was sent every
// byte within pushGrace, an abort to the others. It returns once no push
// reads the file.
func (b *blobPush) End(sha256Hex string, stored error) {
	var wg sync.WaitGroup
	for _, pp := range b.pushes {
		wg.Go(func() {
			err := stored
			if err == nil {
				err = b.sent(pp.x)
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

// sent waits up to pushGrace for x's bytes to be sent; a push that fails
// or is not done by then is aborted.
func (b *blobPush) sent(x *protocol.Pushing) error {
	timer := time.NewTimer(pushGrace)
	defer timer.Stop()
	select {
	case err := <-x.Sent():
		if err != nil {
			x.Abort()
		}
		return err
	case <-timer.C:
		x.Abort()
		<-x.Sent() // it reads the file no more
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
