package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
)

// aside counts the blobs an offer brought that d's node keeps aside.
func (d *daemon) aside() int {
	m, _ := filepath.Glob(filepath.Join(d.home, node.PartialDir, "*.whole"))
	return len(m)
}

// snapshotEvents counts the workspace.snapshot events in the journal of
// the agent's capsule folder in d's node, read from the file (the node
// running, stopped or killed).
func snapshotEvents(t *testing.T, d *daemon, agent string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(d.home, store.CapsulesDir, agent, filepath.FromSlash(capsule.JournalFile)))
	if err != nil {
		t.Fatal(err)
	}
	evs, _, _ := journal.Decode(data)
	return len(slices.DeleteFunc(evs, func(e *journal.Event) bool { return e.Type != capsule.SnapshotEventType }))
}

// newAgentOnBoth makes a new agent named name, imports it into a's node,
// and waits until b holds it too.
func newAgentOnBoth(t *testing.T, a, b *daemon, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	code, out, errs := ternQuiet(a.home, "capsule", "new", dir, "--name", name)
	if code != 0 {
		t.Fatal(errs)
	}
	agent := strings.TrimSpace(out)
	if code, _, errs := ternQuiet(a.home, "capsule", "import", dir); code != 0 {
		t.Fatal(errs)
	}
	eventually(t, 30*time.Second, func() error {
		if !b.holdsWhole(agent) {
			return fmt.Errorf("b does not hold the new agent")
		}
		return nil
	})
	return agent
}

// A snapshot through the node is offered to the paired peer as its blobs
// land (tern capsule snapshot AGENT DIR). A kill -9 of that node in the
// middle of it leaves the peer with blobs aside and nothing more: its copy
// of the agent whole, as before the snapshot, wanting nothing. Restarted,
// the node takes the snapshot again, and the peer holds it all, taking the
// blobs aside first.
func TestAKilledSnapshotLeavesThePeerNothingItTakesAsComplete(t *testing.T) {
	onBothTransports(t, killedSnapshot)
}

// killedSnapshot is TestAKilledSnapshotLeavesThePeerNothingItTakesAsComplete
// with two paired daemons on one transport.
func killedSnapshot(t *testing.T, ds [2]*daemon) {
	a, b := ds[0], ds[1]
	rng := rand.New(rand.NewPCG(7, 7))
	// Enough files that the snapshot is still storing them when the peer
	// has taken the first: if not, the next attempt takes more.
	for attempt, files := 1, 4000; ; attempt, files = attempt+1, files*2 {
		agent := newAgentOnBoth(t, a, b, "tree")
		tree := t.TempDir()
		data := make([]byte, 2048)
		for i := range files {
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			sub := filepath.Join(tree, fmt.Sprint("d", i%50))
			os.MkdirAll(sub, 0o755)
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprint("f", i)), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		snap := ternProcess(a.home, "", "-q", "capsule", "snapshot", agent, tree)
		if err := snap.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, func() error {
			if b.aside() == 0 {
				return fmt.Errorf("b took no blob a offered")
			}
			return nil
		})
		a.cmd.Process.Signal(syscall.SIGSTOP) // no further: is it still in the middle?
		committed := snapshotEvents(t, a, agent) > 0
		a.kill()
		snap.Wait()
		if committed {
			if attempt == 3 {
				t.Fatalf("a's snapshot of %d files committed before b took any of its blobs, three times", files)
			}
			t.Logf("a's snapshot of %d files committed before it could be cut; trying again with more", files)
			a.start()
			continue
		}
		taken := b.aside()
		if !b.holdsWhole(agent) || snapshotEvents(t, b, agent) != 0 {
			t.Fatalf("after a kill -9 of a in the middle of its snapshot, b's copy is not as before it (whole, no snapshot)")
		}
		t.Logf("a killed in the middle of a snapshot of %d files: b had %d blobs aside", files, taken)

		restartAndSnapshot(t, a, agent, tree)
		eventually(t, 30*time.Second, func() error {
			if !b.holdsWhole(agent) || snapshotEvents(t, b, agent) != 1 || b.aside() != 0 {
				return fmt.Errorf("b: whole %v, %d snapshots, %d blobs aside", b.holdsWhole(agent), snapshotEvents(t, b, agent), b.aside())
			}
			return nil
		})
		c, err := capsule.Open(filepath.Join(b.home, store.CapsulesDir, agent))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ws := filepath.Join(t.TempDir(), "ws")
		if err := c.Materialize(ws); err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, files / 2, files - 1} {
			name := filepath.Join(fmt.Sprint("d", i%50), fmt.Sprint("f", i))
			want, _ := os.ReadFile(filepath.Join(tree, name))
			if got, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(got) != string(want) {
				t.Fatalf("%s on b differs from the tree: %v", name, err)
			}
		}
		return
	}
}

// pushing counts the pushes d's node is receiving (partial/push-*).
func (d *daemon) pushing() int {
	m, _ := filepath.Glob(filepath.Join(d.home, node.PartialDir, "push-*"))
	return len(m)
}

// A large file of a snapshot through the node is pushed to the paired peer
// while the node stores it. A kill -9 of that node in the middle of the
// push leaves the peer nothing of it: no blob aside, no file in partial/,
// its copy of the agent whole as before. Restarted, the node takes the
// snapshot again and the peer holds the file.
func TestAKilledPushLeavesThePeerNothing(t *testing.T) {
	onBothTransports(t, killedPush)
}

// killedPush is TestAKilledPushLeavesThePeerNothing with two paired
// daemons on one transport.
func killedPush(t *testing.T, ds [2]*daemon) {
	a, b := ds[0], ds[1]
	agent := newAgentOnBoth(t, a, b, "large")
	ws := t.TempDir()
	rng := rand.New(rand.NewPCG(8, 8))
	var data []byte
	cutMidPush(t, a, b, func(size int) *exec.Cmd {
		data = randomBytes(rng, size)
		if err := os.WriteFile(filepath.Join(ws, "large.bin"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return ternProcess(a.home, "", "-q", "capsule", "snapshot", agent, ws)
	}, func() bool { return snapshotEvents(t, a, agent) > 0 })
	if !b.holdsWhole(agent) || snapshotEvents(t, b, agent) != 0 {
		t.Fatal("after a kill -9 of a in the middle of a push, b's copy is not as before it (whole, no snapshot)")
	}
	restartAndSnapshot(t, a, agent, ws)
	holdsFile(t, b, agent, "large.bin", data)
}

// A large file of a capsule folder a node imports is pushed to the paired
// peer while the node copies it, before the capsule is whole anywhere. A
// kill -9 of that node in the middle of the import leaves the peer no
// capsule, nothing in partial/ and no blob aside; the node itself holds
// none either. Restarted, the node takes the import again and both hold
// the capsule whole.
func TestAKilledImportLeavesThePeerNothing(t *testing.T) {
	onBothTransports(t, killedImport)
}

// killedImport is TestAKilledImportLeavesThePeerNothing with two paired
// daemons on one transport.
func killedImport(t *testing.T, ds [2]*daemon) {
	a, b := ds[0], ds[1]
	rng := rand.New(rand.NewPCG(9, 9))
	var dir, agent string
	var data []byte
	cutMidPush(t, a, b, func(size int) *exec.Cmd {
		dir, agent, data = agentWithOneFile(t, rng, "large.bin", size)
		return ternProcess(a.home, "", "-q", "capsule", "import", dir)
	}, func() bool { return a.holdsFolder(agent) })
	if b.holdsFolder(agent) || b.holdsWhole(agent) {
		t.Fatal("after a kill -9 of a in the middle of an import, b holds the agent")
	}
	a.start()
	if a.holdsFolder(agent) {
		t.Fatal("after a kill -9 in the middle of its import, a holds the agent")
	}
	if code, _, errs := ternQuiet(a.home, "capsule", "import", dir); code != 0 {
		t.Fatalf("tern capsule import after the restart: exit %d: %s", code, errs)
	}
	if code, _, errs := ternQuiet(a.home, "sync", "wait", agent, "--peer", "n1", "--timeout", "60s"); code != 0 {
		t.Fatalf("tern sync wait: exit %d: %s", code, errs)
	}
	for _, d := range ds {
		holdsFile(t, d, agent, "large.bin", data)
	}
}

// cutMidPush runs on a's node the command start returns, which makes b's
// node receive a push of a file of size bytes, and kills a's node with
// kill -9 while b is receiving it and over (read from a's files) says the
// command's work is not done; a push over before it could be cut is tried
// again with twice the bytes, up to three times. It returns once b has
// nothing of the push left: no file in partial/ and no blob aside.
func cutMidPush(t *testing.T, a, b *daemon, start func(size int) *exec.Cmd, over func() bool) {
	t.Helper()
	// Large enough that the push is still under way when b's file for it
	// is seen: if not, the next attempt pushes a larger one.
	for attempt, size := 1, 128<<20; ; attempt, size = attempt+1, size*2 {
		cmd := start(size)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, func() error {
			if b.pushing() == 0 && !over() {
				return fmt.Errorf("b receives no push from a")
			}
			return nil
		})
		a.cmd.Process.Signal(syscall.SIGSTOP) // no further: is it still in the middle?
		cut := b.pushing() > 0 && !over()
		a.kill()
		cmd.Wait()
		if cut {
			break
		}
		if attempt == 3 {
			t.Fatalf("a's push of %d bytes was over before it could be cut, three times", size)
		}
		t.Logf("a's push of %d bytes was over before it could be cut; trying again with more", size)
		a.start()
	}
	eventually(t, 30*time.Second, func() error {
		if n, aside := b.pushing(), b.aside(); n != 0 || aside != 0 {
			return fmt.Errorf("after a kill -9 of the pusher, b still has %d pushes in partial/ and %d blobs aside", n, aside)
		}
		return nil
	})
}

// holdsFolder reports whether d's node has a capsule folder for agent, read
// from its files (the node running, stopped or killed).
func (d *daemon) holdsFolder(agent string) bool {
	_, err := os.Stat(filepath.Join(d.home, store.CapsulesDir, agent))
	return err == nil
}

// holdsFile fails the test unless the workspace of d's copy of agent holds
// the file name with data.
func holdsFile(t *testing.T, d *daemon, agent, name string, data []byte) {
	t.Helper()
	c, err := capsule.Open(filepath.Join(d.home, store.CapsulesDir, agent))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := filepath.Join(t.TempDir(), "out")
	if err := c.Materialize(out); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(out, name)); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%s on %s: %d bytes (%v), want the %d bytes imported", name, d.home, len(got), err, len(data))
	}
}

// randomBytes returns size bytes of rng.
func randomBytes(rng *rand.Rand, size int) []byte {
	data := make([]byte, size)
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], rng.Uint64())
	}
	return data
}

// agentWithOneFile makes, on a machine of its own, a capsule folder whose
// workspace snapshot holds one file, name, of size bytes of rng; it
// returns the folder, the agent id and the file's bytes.
func agentWithOneFile(t *testing.T, rng *rand.Rand, name string, size int) (dir, agent string, data []byte) {
	t.Helper()
	dir, home := filepath.Join(t.TempDir(), "agent"), t.TempDir()
	code, out, errs := ternQuiet(home, "capsule", "new", dir, "--name", "large")
	if code != 0 {
		t.Fatal(errs)
	}
	ws := t.TempDir()
	data = randomBytes(rng, size)
	if err := os.WriteFile(filepath.Join(ws, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := ternQuiet(home, "capsule", "snapshot", dir, ws); code != 0 {
		t.Fatal(errs)
	}
	return dir, strings.TrimSpace(out), data
}

// onBothTransports runs test as two subtests, "tcp" and "quic", each with
// two tern node processes paired on that transport; skipped with -short.
func onBothTransports(t *testing.T, test func(t *testing.T, ds [2]*daemon)) {
	if testing.Short() {
		t.Skip("runs daemons")
	}
	for _, quic := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "quic"}[quic], func(t *testing.T) { test(t, pairedDaemons(t, quic)) })
	}
}

// restartAndSnapshot starts a's node again, snapshots the folder dir into
// agent through it once it answers, and waits until its peer n1 holds it
// all.
func restartAndSnapshot(t *testing.T, a *daemon, agent, dir string) {
	t.Helper()
	a.start()
	eventually(t, 30*time.Second, func() error {
		if code, _, errs := ternQuiet(a.home, "capsule", "snapshot", agent, dir); code != 0 {
			return fmt.Errorf("tern capsule snapshot after the restart: exit %d: %s", code, errs)
		}
		return nil
	})
	if code, _, errs := ternQuiet(a.home, "sync", "wait", agent, "--peer", "n1", "--timeout", "60s"); code != 0 {
		t.Fatalf("tern sync wait: exit %d: %s", code, errs)
	}
}
