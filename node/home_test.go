package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/store"
)

func TestASecondNodeOnOneHomeRefusesToStartAndTheFirstKeepsRunning(t *testing.T) {
	home := t.TempDir()
	first := startNode(t, home)
	_, err := Start(home, Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true}, nil)
	if !errors.Is(err, ErrHomeInUse) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second node: %v, want ErrHomeInUse naming process %d", err, os.Getpid())
	}
	// The refused node removed nothing of the first's.
	cl, err := api.Dial(home)
	if err != nil {
		t.Fatalf("the first node can no longer be reached: %v", err)
	}
	var st api.Status
	if err := cl.Do(context.Background(), "GET", "/v1/status", nil, &st); err != nil || st.PeerID != first.Info().PeerID {
		t.Fatalf("status of the first node: %v, %+v", err, st)
	}
	if running, pid, _ := Running(home); !running || pid != os.Getpid() {
		t.Fatalf("Running = %v, %d", running, pid)
	}
	first.Close()
	if running, _, _ := Running(home); running {
		t.Fatal("Running after Close")
	}
	second := startNode(t, home)
	second.Close()
}

func TestAMissingKeyInAHomeThatHoldsCapsulesIsRefused(t *testing.T) {
	home, id, s := newTestStore(t)
	importNew(t, s, id, "helper")
	os.Remove(filepath.Join(home, KeyFile))
	_, err := LoadIdentity(home)
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "--new-identity") || !strings.Contains(err.Error(), "1 capsule") {
		t.Fatalf("LoadIdentity: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, KeyFile)); err == nil {
		t.Fatal("a key was made")
	}
	if _, err := Start(home, Config{NoMDNS: true}, nil); !errors.Is(err, ErrNoKey) {
		t.Fatalf("Start: %v", err)
	}
	fresh, err := NewHomeIdentity(home)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Machine() == id.Machine() {
		t.Fatal("the same identity")
	}
	if _, err := NewHomeIdentity(home); err == nil {
		t.Fatal("NewHomeIdentity replaced an existing key")
	}
	if again, err := LoadIdentity(home); err != nil || again.Machine() != fresh.Machine() {
		t.Fatalf("LoadIdentity after: %v", err)
	}
}

func TestADamagedHomeFileSaysWhatToDo(t *testing.T) {
	for file, want := range map[string]string{
		PeersFile:        "tern peer add",
		store.SharesFile: "share every capsule",
		ConfigFile:       "defaults",
		KeyFile:          "--new-identity",
	} {
		t.Run(file, func(t *testing.T) {
			home := t.TempDir()
			if _, err := LoadIdentity(home); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, file), []byte("{not json"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Start(home, Config{NoMDNS: true, Listen: []string{"/ip4/127.0.0.1/tcp/0"}}, nil)
			if file == ConfigFile {
				_, err = LoadConfig(home)
			}
			if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want it to name %s and say %q", err, file, want)
			}
		})
	}
}

func TestADamagedCapsuleIsReportedAndHidesNoHealthyOne(t *testing.T) {
	home := t.TempDir()
	n := startNode(t, home)
	id := n.Identity()
	good, _ := importNew(t, n.Store(), id, "good")
	bad, _ := importNew(t, n.Store(), id, "bad")
	n.Close()
	manifest := filepath.Join(home, store.CapsulesDir, bad, capsule.ManifestFile)
	if err := os.WriteFile(manifest, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, home)
	st, err := n.Status()
	if err != nil {
		t.Fatalf("status with a damaged capsule: %v", err)
	}
	seen := map[string]api.CapsuleStatus{}
	for _, c := range st.Capsules {
		seen[c.ID] = c
	}
	if seen[good].Damaged != "" || seen[bad].Damaged == "" {
		t.Fatalf("status: good %+v, bad %+v", seen[good], seen[bad])
	}
	if strings.Contains(seen[bad].Damaged, home) {
		t.Errorf("the damage names an absolute path: %s", seen[bad].Damaged)
	}
	if _, err := n.Append(context.Background(), good, []journal.Draft{{Type: "note"}}); err != nil {
		t.Fatalf("append to the healthy capsule: %v", err)
	}
}

func TestStartRemovesWhatKilledRunsLeftInTheHome(t *testing.T) {
	home := t.TempDir()
	left := []string{
		filepath.Join(home, ".upload-123.tar"),
		filepath.Join(home, ".export-456"),
		filepath.Join(home, store.CapsulesDir, ".import-789"),
	}
	for _, p := range left {
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startNode(t, home)
	for _, p := range left {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
}

// The node claims its chain of an agent while it writes it; a command
// signing another copy of that agent meanwhile is refused, and once the
// node has closed the capsule, the copy must hold what the node wrote.
func TestTheNodeClaimsItsChainOfAnAgent(t *testing.T) {
	home := t.TempDir()
	n := startNode(t, home)
	id := n.Identity()
	agent, dir := importNew(t, n.Store(), id, "helper")
	if _, err := n.Append(context.Background(), agent, []journal.Draft{{Type: "note"}}); err != nil {
		t.Fatal(err)
	}
	d, err := capsule.OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50e6)
	defer cancel()
	if _, err := store.ClaimChain(ctx, home, d, id.Machine(), false); !errors.Is(err, store.ErrChainBusy) {
		t.Fatalf("claim while the node writes: %v, want store.ErrChainBusy", err)
	}
	if _, err := n.Store().CloseIdle(0); err != nil {
		t.Fatal(err)
	}
	_, err = store.ClaimChain(context.Background(), home, d, id.Machine(), false)
	if !errors.Is(err, store.ErrChainElsewhere) || !strings.Contains(err.Error(), "tern capsule merge") {
		t.Fatalf("claim of a copy that lacks the node's event: %v", err)
	}
}
