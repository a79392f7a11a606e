package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/store"
)

// A snapshot of a tree through the node names its blobs to the peers as
// they land: a peer fetches them while the snapshot is still storing the
// rest (here, held until the peer has one aside), keeps them aside, and
// once the snapshot's event reaches it takes them from there. Nothing of
// its copy changes before that event: the blobs aside are no part of it.
func TestASnapshotsBlobsReachThePeerBeforeItCommits(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.startEvery(t, t.TempDir(), time.Hour), tr.startEvery(t, t.TempDir(), time.Hour)
		agent := sharedCapsule(t, a, b)
		connectAll(t, a, b)
		converged(t, agent, 0, a, b)
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
		if !poll(20*time.Second, func() bool {
			st, _ := b.Status()
			evs, _ := b.store.Events(agent, "")
			return len(st.Capsules) == 1 && st.Capsules[0].Wants == 0 && slices.ContainsFunc(evs, func(e *journal.Event) bool { return bytes.Contains(e.Body, []byte(body.Snapshot)) })
		}) {
			t.Fatal("b did not take the snapshot")
		}
		if n := aside(); n != 0 {
			t.Errorf("%d offered blobs still aside after the event named them all", n)
		}
		out := filepath.Join(t.TempDir(), "out")
		c, err := capsule.Open(filepath.Join(b.home, store.CapsulesDir, agent))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Materialize(out); err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			name := filepath.Join("src", fmt.Sprintf("f%03d.txt", i))
			if got, err := os.ReadFile(filepath.Join(out, name)); err != nil || string(got) != strings.Repeat(fmt.Sprint(i), 500+i) {
				t.Fatalf("%s on b: %q, %v", name, got, err)
			}
		}
	})
}
