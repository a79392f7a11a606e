package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/store"
)

// snapshotOn snapshots a workspace holding one file of size random bytes
// into n's copy of agent, and returns the file's blob name.
func snapshotOn(t *testing.T, n *Node, agent string, size int) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	os.MkdirAll(ws, 0o755)
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(size), 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	os.WriteFile(filepath.Join(ws, "big.bin"), data, 0o644)
	d, done, err := n.store.Use(agent)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if _, err := d.Snapshot(context.Background(), n.id, ws); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// serveBlobsCut makes n serve blobs that break off after limit bytes of
// each stream, like a link that drops in the middle of a transfer. The
// stream is closed, not reset, so that the bytes sent before the break
// arrive (a reset may overtake them and leave nothing to resume from).
func serveBlobsCut(n *Node, limit int) {
	n.host.SetStreamHandler(protocol.BlobID, func(s network.Stream) {
		protocol.ServeBlob(&cutWriter{Stream: s, left: limit}, protocol.Counted(n.store, n.transfers), s.Conn().RemotePeer().String())
		s.Close()
	})
}

type cutWriter struct {
	network.Stream
	left int
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if len(p) > c.left {
		c.Stream.Write(p[:c.left])
		c.left = 0
		return 0, errors.New("link dropped")
	}
	c.left -= len(p)
	return c.Stream.Write(p)
}

// serveBlobsRotten makes n serve blobs with one byte flipped at offset at
// of each stream, like a peer whose copy rotted on its disk.
func serveBlobsRotten(n *Node, at int) {
	n.host.SetStreamHandler(protocol.BlobID, func(s network.Stream) {
		protocol.ServeBlob(&flipWriter{Stream: s, at: at}, protocol.Counted(n.store, n.transfers), s.Conn().RemotePeer().String())
		s.Close()
	})
}

type flipWriter struct {
	network.Stream
	at, seen int
}

func (f *flipWriter) Write(p []byte) (int, error) {
	if f.at >= f.seen && f.at < f.seen+len(p) {
		p = bytes.Clone(p)
		p[f.at-f.seen] ^= 0xff
	}
	f.seen += len(p)
	return f.Stream.Write(p)
}

func TestACorruptChunkFromAPeerIsRejectedAndFetchedAgain(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		// No timer rounds: what b fetches, and when, is up to the test.
		a, b := startQuietNode(t, tr), startQuietNode(t, tr)
		pair(t, a, b)
		agent := sharedCapsule(t, a, b)
		serveBlobsRotten(a, 2*protocol.BlobChunk+100)
		blob := snapshotOn(t, a, agent, 4*protocol.BlobChunk)
		ctx := context.Background()
		if err := b.host.Connect(ctx, peer.AddrInfo{ID: a.host.ID(), Addrs: a.host.Addrs()}); err != nil {
			t.Fatal(err)
		}
		b.SyncPeer(ctx, a.host.ID()) // the events, then a fetch of the listing and of the rotten blob
		// The rounds the connection and the events started may fetch it
		// again meanwhile; once they are over:
		eventually(t, "b's rounds and fetches are over", func() bool { return quiet(b) })
		if w := wants(t, b, agent); !slices.Contains(w, blob) {
			t.Fatalf("b wants %v: the rotten blob was adopted", w)
		}
		if _, err := os.Stat(filepath.Join(b.home, PartialDir, blob)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the rotten partial file was kept (%v): a resume would build on it", err)
		}
		protocol.HandleBlob(a.host, protocol.Counted(a.store, a.transfers), a.log) // a's copy is good again
		b.SyncPeer(ctx, a.host.ID())
		if w := wants(t, b, agent); len(w) != 0 {
			t.Fatalf("b still wants %v from a peer that serves them", w)
		}
		if rep, err := capsule.Verify(filepath.Join(b.home, store.CapsulesDir, agent), capsule.VerifyOptions{}); err != nil || !rep.OK() {
			t.Fatalf("b's capsule: %v %+v", err, rep)
		}
	})
}

// quiet reports whether n runs no sync round, no blob fetch and no
// transfer.
func quiet(n *Node) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.policy.RoundsRunning() == 0 && len(n.fetches.running) == 0 && len(n.transfers.List()) == 0
}

func wants(t *testing.T, n *Node, agent string) []string {
	t.Helper()
	w, err := n.store.Wanted(agent)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestARestartInTheMiddleOfABlobTransferLosesNoWantAndResumes(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		homeB := t.TempDir()
		a, b := tr.start(t, t.TempDir()), tr.start(t, homeB)
		pair(t, a, b)
		agent := sharedCapsule(t, a, b)
		serveBlobsCut(a, 3*protocol.BlobChunk)
		const size = 8 * protocol.BlobChunk
		blob := snapshotOn(t, a, agent, size)
		a.goSync(b.host.ID())
		partial := filepath.Join(homeB, PartialDir, blob)
		eventually(t, "b holds part of the blob", func() bool {
			st, err := os.Stat(partial)
			return err == nil && st.Size() > 0
		})
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		kept, _ := os.Stat(partial)

		b = tr.start(t, homeB) // same home, new port
		if w := wants(t, b, agent); len(w) == 0 || !slices.Contains(w, blob) {
			t.Fatalf("after the restart b wants %v, not the blob %s", w, blob)
		}
		protocol.HandleBlob(a.host, protocol.Counted(a.store, a.transfers), a.log) // the link is good again
		if err := a.peers.Add(Peer{ID: b.info.PeerID, Addrs: hostAddrs(b)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "b holds every blob", func() bool { return len(wants(t, b, agent)) == 0 })
		if got := testutil.ToFloat64(b.stats.blobBytes); got != float64(size-kept.Size()) {
			t.Fatalf("b fetched %v bytes after the restart; it kept %d of %d, so want %d", got, kept.Size(), size, size-kept.Size())
		}
	})
}

func TestSyncStateWaitsForThePeersBlobs(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		pair(t, a, b)
		agent := sharedCapsule(t, a, b)
		a.host.RemoveStreamHandler(protocol.BlobID) // b can learn the events, not fetch the blob
		snapshotOn(t, a, agent, 100_000)
		a.goSync(b.host.ID())
		ctx := context.Background()
		eventually(t, "b holds the events", func() bool {
			st, err := a.SyncState(ctx, b.host.ID(), agent)
			return err == nil && st.Events
		})
		st, _ := a.SyncState(ctx, b.host.ID(), agent)
		if st.InSync || st.PeerLacks == 0 || st.Blobs == 0 {
			t.Fatalf("b lacks the snapshot's blobs, yet %+v", st)
		}
		protocol.HandleBlob(a.host, protocol.Counted(a.store, a.transfers), a.log)
		eventually(t, "b holds the whole capsule", func() bool {
			st, err := a.SyncState(ctx, b.host.ID(), agent)
			return err == nil && st.InSync && st.PeerLacks == 0
		})
	})
}

func TestABlobIsServedOnlyFromACapsuleSharedWithThePeer(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		kept, given := sharedCapsule(t, a), sharedCapsule(t, a)
		if err := a.store.Shares().Set(kept, b.info.PeerID, false); err != nil {
			t.Fatal(err)
		}
		blob := snapshotOn(t, a, kept, 1000)
		pair(t, a, b)
		converged(t, given, 0, a, b)
		ctx := context.Background()
		for _, agent := range []string{kept, given} {
			_, err := protocol.Fetch(ctx, b.host, a.host.ID(), agent, blob, filepath.Join(t.TempDir(), "p"), nil)
			if !errors.Is(err, protocol.ErrNoBlob) {
				t.Errorf("fetch of %s's blob as %s: %v, want ErrNoBlob", kept, agent, err)
			}
			if held, err := protocol.PeerHas(ctx, b.host, a.host.ID(), agent, []string{blob}); err != nil || len(held) != 0 {
				t.Errorf("have query as %s: %v %v, want none", agent, held, err)
			}
		}
		// Shared again, it is served.
		if err := a.store.Shares().Set(kept, b.info.PeerID, true); err != nil {
			t.Fatal(err)
		}
		if _, err := protocol.Fetch(ctx, b.host, a.host.ID(), kept, blob, filepath.Join(t.TempDir(), "p"), nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTwoRoundsWantingOneBlobFetchItOnce(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		pair(t, a, b)
		agent := sharedCapsule(t, a, b)
		snapshotOn(t, a, agent, 3*protocol.BlobChunk)
		ctx := context.Background()
		if err := b.host.Connect(ctx, peer.AddrInfo{ID: a.host.ID(), Addrs: a.host.Addrs()}); err != nil {
			t.Fatal(err)
		}
		evs, _ := a.store.Events(agent, "")
		if err := b.store.Add(ctx, agent, "", evs); err != nil { // no round starts for this
			t.Fatal(err)
		}
		var want int64
		blobs, _ := a.store.Blobs(agent)
		for _, h := range blobs {
			f, size, err := a.store.OpenBlob(agent, "", h)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			want += size
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { b.fetchWanted(ctx, a.host.ID(), agent) })
		}
		wg.Wait()
		if w := wants(t, b, agent); len(w) != 0 {
			t.Fatalf("b still wants %v", w)
		}
		if got := testutil.ToFloat64(b.stats.blobBytes); got != float64(want) {
			t.Fatalf("b fetched %v bytes for blobs of %d: a blob was fetched more than once", got, want)
		}
	})
}

func TestABlobAnEventNamesFollowsTheEventByGossip(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := startQuietNode(t, tr), startQuietNode(t, tr) // no timer round fetches it
		agent := sharedCapsule(t, a, b)
		pair(t, a, b)
		ctx := context.Background()
		if err := a.host.Connect(ctx, peer.AddrInfo{ID: b.host.ID(), Addrs: b.host.Addrs()}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "each node sees the other in the agent's topic", func() bool {
			return inTopic(a, agent, b.host.ID()) && inTopic(b, agent, a.host.ID())
		})
		eventually(t, "the rounds the connection started are over", func() bool { return quiet(a) && quiet(b) })
		// An image a's user attached: its blob in a's capsule, then the message.
		img := filepath.Join(t.TempDir(), "img")
		os.WriteFile(img, bytes.Repeat([]byte("pixel"), 50_000), 0o644)
		sum := sha256.Sum256(bytes.Repeat([]byte("pixel"), 50_000))
		h := hex.EncodeToString(sum[:])
		d, done, err := a.store.Use(agent)
		if err != nil {
			t.Fatal(err)
		}
		err = d.AdoptBlob(h, img)
		done()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "image", "cid": capsule.BlobCID(h), "media_type": "image/png"}}})
		if _, err := a.Append(ctx, agent, []journal.Draft{{Type: "message", Session: "s", Body: body}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "b holds the image's blob", func() bool {
			return len(b.store.HeldBlobs(agent, "", []string{h})) == 1
		})
	})
}
