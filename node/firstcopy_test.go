package node

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/store"
)

// warnings is a log handler that keeps the records at Warn and above.
type warnings struct {
	mu   sync.Mutex
	kept []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	w.kept = append(w.kept, msg)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.kept...)
}

// startNodeLogging starts a node whose warnings are kept in w.
func startNodeLogging(t *testing.T, tr transport, w *warnings) *Node {
	t.Helper()
	return tr.startWith(t, t.TempDir(), Config{SyncInterval: 100 * time.Millisecond}, slog.New(w))
}

// packed is the agent's capsule on n as a tar.
func packed(t *testing.T, n *Node, agent string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := n.store.Export(agent, "", true, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestAFirstCopyComesAsItsJournalThenItsBlobsAndWarnsOfNothing(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		var wa, wb warnings
		a, b := startNodeLogging(t, tr, &wa), startNodeLogging(t, tr, &wb)
		agent := sharedCapsule(t, a) // only a holds it
		appendN(t, a, agent, 3)
		blob := snapshotOn(t, a, agent, 3<<20)
		pair(t, a, b)
		within(t, 20*time.Second, "b holds the capsule whole", func() bool {
			st, err := b.Status()
			// a's 3 messages and its snapshot, the agent's creation, and
			// b's member.added, which a writes as it gives b the agent
			return err == nil && len(st.Capsules) == 1 && !st.Capsules[0].Incomplete && st.Capsules[0].Events == 6
		})
		if !bytes.Equal(packed(t, a, agent), packed(t, b, agent)) {
			t.Fatal("b's copy is not a's capsule")
		}
		if rep, err := capsule.Verify(filepath.Join(b.home, store.CapsulesDir, agent), capsule.VerifyOptions{}); err != nil || !rep.OK() {
			t.Fatalf("b's copy: %v %+v", err, rep)
		}
		// The blob came over /tern/blob/1.0.0, not inside the capsule's tar.
		if n := blobBytesReceived(b); n < 3<<20 {
			t.Errorf("b received %.0f bytes over the blob protocol, want the %d of blob %s at least", n, 3<<20, blob[:8])
		}
		if w := append(wa.list(), wb.list()...); len(w) > 0 {
			t.Errorf("a first copy logged warnings: %q", w)
		}
	})
}

func TestAFirstCopyCutShortIsListedIncompleteAndResumes(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		agent := sharedCapsule(t, a)
		blob := snapshotOn(t, a, agent, 3<<20)
		// The link carries a chunk and a half of blob bytes, then drops every stream.
		budget := &cutWriter{left: 1<<20 + 1<<19} // a chunk and a half
		a.host.SetStreamHandler(protocol.BlobID, func(s network.Stream) {
			budget.Stream = s
			protocol.ServeBlob(budget, protocol.Counted(a.store, a.transfers), s.Conn().RemotePeer().String())
			s.Close()
		})
		pair(t, a, b)
		within(t, 20*time.Second, "b lists the capsule as incomplete", func() bool {
			st, err := b.Status()
			return err == nil && len(st.Capsules) == 1 && st.Capsules[0].Incomplete && st.Capsules[0].Wants >= 1
		})
		within(t, 20*time.Second, "b keeps what the cut stream sent", func() bool {
			n, _ := fileSize(filepath.Join(b.home, PartialDir, blob))
			return n >= 1<<20
		})
		protocol.HandleBlob(a.host, protocol.Counted(a.store, a.transfers), a.log) // the link is back
		within(t, 20*time.Second, "b holds the capsule whole", func() bool {
			st, err := b.Status()
			return err == nil && len(st.Capsules) == 1 && !st.Capsules[0].Incomplete
		})
		if !bytes.Equal(packed(t, a, agent), packed(t, b, agent)) {
			t.Fatal("b's copy is not a's capsule")
		}
		if n := blobBytesReceived(b); n >= 3<<20+1<<19 {
			t.Errorf("b received %.0f blob bytes: the blob was sent again from the start, not resumed", n)
		}
	})
}

// blobBytesReceived is what n's metrics counted of blob bytes received.
func blobBytesReceived(n *Node) float64 { return testutil.ToFloat64(n.stats.blobBytes) }

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// A workspace of many small files travels inside the first copy's tar: a
// stream per file would cost a round trip each.
func TestAFirstCopyCarriesSmallFilesInItsTar(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		agent := sharedCapsule(t, a)
		ws := t.TempDir()
		for i := range 300 {
			if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("note-%03d.txt", i)), []byte(fmt.Sprintf("note %d\n", i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.store.With(agent, func(d *capsule.Dir) error {
			_, err := d.Snapshot(context.Background(), a.id, ws)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		pair(t, a, b)
		within(t, 20*time.Second, "b holds the capsule whole", func() bool {
			st, err := b.Status()
			return err == nil && len(st.Capsules) == 1 && !st.Capsules[0].Incomplete
		})
		if !bytes.Equal(packed(t, a, agent), packed(t, b, agent)) {
			t.Fatal("b's copy is not a's capsule")
		}
		if n := blobBytesReceived(b); n > 0 {
			t.Errorf("b fetched %.0f bytes of small blobs one by one", n)
		}
	})
}

// A peer that drops every connection at once (it has not paired this
// node, or unpaired it) is not redialed in a loop by the round each
// connection starts: the node dials it again at the next sync interval.
func TestAPeerThatRefusesThisNodeIsNotRedialedInALoop(t *testing.T) {
	a := startNodeEvery(t, t.TempDir(), time.Hour)
	b := startNodeEvery(t, t.TempDir(), time.Hour)
	sharedCapsule(t, b)
	pair(t, a, b)
	if _, err := a.peers.Remove(b.info.PeerID); err != nil { // a unpairs b; b still pairs a
		t.Fatal(err)
	}
	var conns atomic.Int64
	b.host.Network().Notify(&network.NotifyBundle{ConnectedF: func(network.Network, network.Conn) { conns.Add(1) }})
	rounds := testutil.ToFloat64(b.stats.rounds)
	// One dial: a connection it makes is taken up, and has started its
	// round, before dial returns.
	b.dial(a.host.ID())
	eventually(t, "a refused b's handshake", func() bool {
		return slices.ContainsFunc(a.PendingPeers(), func(p PendingPeer) bool { return p.ID == b.info.PeerID })
	})
	if conns.Load() > 0 {
		// A redial by that round would be taken up before the round ends.
		eventually(t, "the round b's connection started has ended", func() bool { return testutil.ToFloat64(b.stats.rounds) > rounds })
	}
	if n := conns.Load(); n > 1 {
		t.Fatalf("one dial of a peer that refuses b made %d connections: the round a connection starts redials it", n)
	}
}
