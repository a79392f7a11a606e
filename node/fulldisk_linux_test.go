package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/journal"
)

// smallDisk mounts a tmpfs of size bytes on a fresh folder and returns it;
// the test is skipped, saying why, where it cannot be mounted (not root,
// or no tmpfs).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("a small disk for the test could not be mounted (tmpfs on %s: %v); mounting needs root", dir, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes to a file in dir until the disk is full, and returns a func
// that frees the space again.
func fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// A node restarted on a home whose disk fills before it can write its
// holder registry: it says what is wrong and what to do, consistently,
// runs nothing meanwhile, and carries on without a restart once space is
// freed.
func TestAFullDiskStopsNothingForGoodAndTheNodeCarriesOnWhenSpaceReturns(t *testing.T) {
	home := filepath.Join(smallDisk(t, 8<<20), "home")
	// A slow tick: the startup check waits 30 ticks for the peer, which is
	// down, before its record is written; the disk fills meanwhile.
	cfg := Config{SyncInterval: time.Hour, Tick: 200 * time.Millisecond}
	a, b := tcp.startWith(t, home, cfg), tcp.start(t, t.TempDir())
	connectAll(t, a, b)
	agent := heldBy(t, a, nil)
	a.Close()
	b.Close()

	a = tcp.startWith(t, home, cfg)
	free := fill(t, home)
	eventually(t, "the node says the disk is full", func() bool {
		st, _ := a.holders.State(agent)
		return strings.Contains(st.Note, "is full") && strings.Contains(st.Note, "free some space")
	})
	st, _ := a.holders.State(agent)
	t.Logf("tern holder: %s: %s", st.State, st.Note)
	if a.runs(agent) {
		t.Fatal("the agent runs though its record could not be written")
	}
	var refused map[string]any
	code := callAPI(t, a, "POST", "/v1/agents/"+agent+"/sessions", nil, &refused)
	if msg, _ := refused["error"].(string); code != 503 || !strings.Contains(msg, "free some space") {
		t.Fatalf("a new session on the full disk: %d %v, want 503 saying to free space", code, refused)
	}
	if _, err := a.Migrate(t.Context(), agent, b.host.ID()); err == nil || !errors.Is(err, ErrDiskFull) {
		t.Fatalf("a move on the full disk: %v, want it to say the disk is full", err)
	}

	free()
	eventually(t, "the node runs the agent once space is freed, without a restart", func() bool { return a.runs(agent) })
	if st, _ := a.holders.State(agent); st.State != "active" || st.Note != "" {
		t.Fatalf("after the space returned: %s: %s", st.State, st.Note)
	}
	newSession(t, a, agent)
}

// The disk fills while the node runs the agent: a turn's append, and a
// move (whose proposal cannot be recorded), say the disk is full at once,
// the move is aborted (it was never proposed), and the agent runs on once
// space is freed.
func TestADiskThatFillsWhileTheAgentRunsIsSaidAndAMoveAborts(t *testing.T) {
	home := filepath.Join(smallDisk(t, 8<<20), "home")
	a, b := tcp.startWith(t, home, Config{SyncInterval: time.Hour, Tick: 20 * time.Millisecond}), tcp.startAt(t, t.TempDir())
	connectAll(t, a, b)
	agent := heldBy(t, a, nil)
	eventually(t, "b holds a copy, a member", func() bool {
		m, err := a.store.Members(agent)
		return err == nil && m.Has(b.id.Machine()) && b.store.Holds(agent)
	})
	free := fill(t, home)

	// What the journal file's last page still holds is written; then an
	// append fails, saying why.
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		_, err = a.Append(t.Context(), agent, []journal.Draft{{Type: "note", Body: []byte(`{"n":1}`)}})
	}
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "free some space") {
		t.Fatalf("an append on the full disk: %v, want it to say the disk is full", err)
	}
	if code := api.StatusOf(err); code != 503 {
		t.Fatalf("the API answers it with %d, want 503", code)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := a.Migrate(ctx, agent, b.host.ID())
	if err != nil {
		t.Fatal(err)
	}
	if out.Outcome != "aborted" || !strings.Contains(out.Reason, "is full") {
		t.Fatalf("a move on the full disk: %+v, want aborted saying the disk is full", out)
	}
	if st, _ := holderState(t, b, agent); st == "active" {
		t.Fatal("b took the agent")
	}
	free()
	eventually(t, "the agent runs on a once space is freed", func() bool { return a.runs(agent) })
	mustMigrate(t, a, b, agent)
}
