package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/store"
)

// A snapshot of a tree through the node names its blobs to the peers as
// they land: a peer fetches them while the snapshot is still storing the
// rest (here, held until the peer has one aside), keeps them aside, and
// once the snapshot's event reaches it takes them from there. Nothing of
// its copy changes before that event: the blobs aside are no part of it.
func TestASnapshotsBlobsReachThePeerBeforeItCommits(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b, agent := twoWithAnAgent(t, tr)
		ws := filepath.Join(t.TempDir(), "ws")
		os.MkdirAll(filepath.Join(ws, "src"), 0o755)
		for i := range 200 {
			os.WriteFile(filepath.Join(ws, "src", fmt.Sprintf("f%03d.txt", i)), []byte(strings.Repeat(fmt.Sprint(i), 500+i)), 0o644)
		}
		aside := func() int {
			m, _ := filepath.Glob(filepath.Join(b.home, PartialDir, "*"+wholeSuffix))
			return len(m)
		}
		var hold sync.Once
		var beforeCommit string
		wantedBefore := -1
		held := func(string) {
			hold.Do(func() {
				if !poll(20*time.Second, func() bool { return aside() > 0 }) {
					beforeCommit = "b took no offered blob while a's snapshot was storing the rest"
					return
				}
				want, _ := b.store.Wanted(agent)
				wantedBefore = len(want)
			})
		}
		body, _, err := a.Snapshot(context.Background(), agent, ws, capsule.SnapshotOptions{Stored: held})
		if err != nil {
			t.Fatal(err)
		}
		if beforeCommit != "" {
			t.Fatal(beforeCommit)
		}
		if wantedBefore != 0 {
			t.Fatalf("b wanted %d blobs before the snapshot's event: the blobs aside changed its copy", wantedBefore)
		}
		tookSnapshot(t, b, agent, body, 20*time.Second)
		if n := aside(); n != 0 {
			t.Errorf("%d offered blobs still aside after the event named them all", n)
		}
		out := workspaceOn(t, b, agent)
		for i := range 200 {
			name := filepath.Join("src", fmt.Sprintf("f%03d.txt", i))
			if got, err := os.ReadFile(filepath.Join(out, name)); err != nil || string(got) != strings.Repeat(fmt.Sprint(i), 500+i) {
				t.Fatalf("%s on b: %q, %v", name, got, err)
			}
		}
	})
}

// A large file of a snapshot through the node reaches the peer while the
// snapshot stores it: by the time the snapshot has stored its blob, the
// peer has the blob aside, whole and checked, without having been offered
// it or fetched it; once the snapshot's event reaches the peer it takes
// the blob from there, and nothing of the push is left in partial/.
func TestALargeFileIsPushedToThePeerAsItIsStored(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b, agent := twoWithAnAgent(t, tr)
		ws := filepath.Join(t.TempDir(), "ws")
		os.MkdirAll(ws, 0o755)
		big := make([]byte, pushAt+12345)
		rand.Read(big)
		os.WriteFile(filepath.Join(ws, "big.bin"), big, 0o644)
		os.WriteFile(filepath.Join(ws, "small.txt"), []byte("not pushed"), 0o644)
		sum := sha256.Sum256(big)
		bigHash := hex.EncodeToString(sum[:])
		var asideWhenStored atomic.Bool
		stored := func(h string) {
			if h == bigHash {
				_, err := os.Stat(filepath.Join(b.home, PartialDir, h+wholeSuffix))
				asideWhenStored.Store(err == nil)
			}
		}
		fetched := testutil.ToFloat64(b.stats.blobBytes)
		body, _, err := a.Snapshot(context.Background(), agent, ws, capsule.SnapshotOptions{Stored: stored})
		if err != nil {
			t.Fatal(err)
		}
		if !asideWhenStored.Load() {
			t.Fatal("b did not have the large file's blob aside when a had stored it")
		}
		tookPushed(t, b, agent, body, fetched, big)
	})
}

// A peer that takes none of a push (here its node reads nothing of the
// stream) holds the snapshot up by at most the push's stall: the snapshot
// completes, and the peer gets the file as any offered blob.
func TestAPeerThatTakesNoPushIsOfferedTheFileInstead(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b, agent := twoWithAnAgent(t, tr)
		stuck := make(chan struct{})
		defer close(stuck)
		b.host.SetStreamHandler(protocol.PushID, func(s network.Stream) { <-stuck; s.Reset() })
		ws := filepath.Join(t.TempDir(), "ws")
		os.MkdirAll(ws, 0o755)
		big := make([]byte, 48<<20) // beyond what the transports' windows take unread
		rand.Read(big)
		os.WriteFile(filepath.Join(ws, "big.bin"), big, 0o644)
		body, _, err := a.Snapshot(context.Background(), agent, ws, capsule.SnapshotOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tookSnapshot(t, b, agent, body, 30*time.Second)
	})
}

// tookSnapshot waits until n holds agent's capsule with the snapshot of
// body readable (an event held after a gap in its chain is not, and wants
// nothing yet) and wants nothing.
func tookSnapshot(t *testing.T, n *Node, agent string, body capsule.SnapshotEventBody, within time.Duration) {
	t.Helper()
	if !poll(within, func() bool {
		st, _ := n.Status()
		evs, _ := n.store.Events(agent, "")
		readable, _ := journal.ReadableOf(agent, evs)
		return len(st.Capsules) == 1 && st.Capsules[0].Wants == 0 && slices.ContainsFunc(readable, func(e *journal.Event) bool { return bytes.Contains(e.Body, []byte(body.Snapshot)) })
	}) {
		t.Fatalf("%s did not take the snapshot within %v", n.home, within)
	}
}

// tookPushed waits until b has taken the snapshot body of agent, and
// fails the test unless b took big from a push, not a fetch (its count of
// blob bytes fetched, fetched before, grew by less), left nothing in
// partial/, and holds big as the workspace's big.bin.
func tookPushed(t *testing.T, b *Node, agent string, body capsule.SnapshotEventBody, fetched float64, big []byte) {
	t.Helper()
	tookSnapshot(t, b, agent, body, 30*time.Second)
	if n := testutil.ToFloat64(b.stats.blobBytes) - fetched; n >= float64(len(big)) {
		t.Errorf("b fetched %.0f blob bytes: the large file came again, not from the push", n)
	}
	if left, _ := filepath.Glob(filepath.Join(b.home, PartialDir, "*")); len(left) != 0 {
		t.Errorf("left in b's partial/: %v", left)
	}
	out := workspaceOn(t, b, agent)
	if got, err := os.ReadFile(filepath.Join(out, "big.bin")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("big.bin on b: %d bytes, %v", len(got), err)
	}
}

// workspaceOn materializes the workspace of n's copy of agent in a new
// folder, and returns it.
func workspaceOn(t *testing.T, n *Node, agent string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	c, err := capsule.Open(filepath.Join(n.home, store.CapsulesDir, agent))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Materialize(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// twoWithAnAgent starts two nodes on tr whose rounds wait for an hour (they
// run on connect), connected, both holding one agent alike.
func twoWithAnAgent(t *testing.T, tr transport) (a, b *Node, agent string) {
	t.Helper()
	a, b = tr.startEvery(t, t.TempDir(), time.Hour), tr.startEvery(t, t.TempDir(), time.Hour)
	agent = sharedCapsule(t, a, b)
	connectAll(t, a, b)
	converged(t, agent, 0, a, b)
	return a, b, agent
}

// A large blob of a capsule a node imports, as a folder or as a tar, is
// pushed to the connected peers while it is taken into the store: the
// peer, which did not hold the agent, takes the capsule once the import
// has ended, and the blob from what was pushed, without fetching it again.
func TestALargeBlobOfAnImportIsPushedToThePeerWhileItIsCopied(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		for _, asTar := range []bool{false, true} {
			t.Run(map[bool]string{false: "folder", true: "tar"}[asTar], func(t *testing.T) {
				a, b := tr.startEvery(t, t.TempDir(), time.Hour), tr.startEvery(t, t.TempDir(), time.Hour)
				connectAll(t, a, b)
				dir := filepath.Join(t.TempDir(), "agent")
				c, err := capsule.New(dir, "large", a.id)
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				ws := filepath.Join(t.TempDir(), "ws")
				os.MkdirAll(ws, 0o755)
				big := make([]byte, pushAt+54321)
				rand.Read(big)
				os.WriteFile(filepath.Join(ws, "big.bin"), big, 0o644)
				os.WriteFile(filepath.Join(ws, "small.txt"), []byte("comes with the capsule"), 0o644)
				d, err := capsule.OpenDir(context.Background(), dir, nil)
				if err != nil {
					t.Fatal(err)
				}
				body, err := d.Snapshot(context.Background(), a.id, ws)
				d.Close()
				if err != nil {
					t.Fatal(err)
				}

				fetched := testutil.ToFloat64(b.stats.blobBytes)
				var agent string
				if asTar {
					tarPath := filepath.Join(t.TempDir(), "agent.tar")
					if err := capsule.PackFile(mustOpenCapsule(t, dir), tarPath, capsule.PackOptions{}); err != nil {
						t.Fatal(err)
					}
					f, err := os.Open(tarPath)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					agent, _, err = a.ImportFrom(f)
				} else {
					agent, _, _, err = a.ImportFolder(dir)
				}
				if err != nil {
					t.Fatal(err)
				}
				tookPushed(t, b, agent, body, fetched, big)
			})
		}
	})
}
