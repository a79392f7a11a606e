package custody

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

// capsules is a Node of capsule folders and nothing else: no peers, no
// sync. Opening the agent in fail fails until it is cleared.
type capsules struct {
	dirs map[string]string
	mu   sync.Mutex
	fail string
}

func (c *capsules) With(agent string, f func(*capsule.Dir) error) error {
	c.mu.Lock()
	fail, dir := c.fail == agent, c.dirs[agent]
	c.mu.Unlock()
	if fail {
		return errors.New("the disk is slow to answer")
	}
	d, err := capsule.OpenDir(context.Background(), dir, nil)
	if err != nil {
		return err
	}
	defer d.Close()
	return f(d)
}
func (c *capsules) Agents() ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for a := range c.dirs {
		out = append(out, a)
	}
	return out, nil
}
func (c *capsules) Holds(agent string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirs[agent] != ""
}
func (c *capsules) HoldsBlob(string, string) bool           { return false }
func (c *capsules) Vector(string) (journal.Vector, error)   { return journal.Vector{}, nil }
func (c *capsules) Wanted(string) ([]string, error)         { return nil, nil }
func (c *capsules) Members(string) (journal.Members, error) { return journal.Members{}, nil }
func (c *capsules) AppendAt(context.Context, string, uint64, []journal.Draft) ([]*journal.Event, error) {
	return nil, errors.New("no appends here")
}
func (c *capsules) Foreign(string) bool                             { return false }
func (c *capsules) TendMembers(context.Context, string, ...peer.ID) {}
func (c *capsules) PairedPeers() []api.Peer                         { return nil }
func (c *capsules) Paired(peer.ID) bool                             { return false }
func (c *capsules) SyncFrom(context.Context, peer.ID, string) (int64, error) {
	return 0, errors.New("no peers here")
}

type noTurns struct{}

func (noTurns) StopAgent(string) {}
func (noTurns) Resume(string)    {}

// One agent's slow fencing work holds up no other agent's: while the
// machine of one is busy (held here as a slow registry write or promotion
// would hold it), another's ticks go on, and its fencing starts once its
// capsule answers.
func TestASlowAgentHoldsUpNoOtherAgentsTicks(t *testing.T) {
	k, _, _ := crypto.GenerateEd25519Key(nil)
	signer, err := journal.NewKeySigner(k)
	if err != nil {
		t.Fatal(err)
	}
	node := &capsules{dirs: map[string]string{}}
	var slow, late string
	dirs := map[string]string{}
	for _, name := range []string{"slow", "late"} {
		c, err := capsule.New(filepath.Join(t.TempDir(), name), name, signer)
		if err != nil {
			t.Fatal(err)
		}
		dirs[c.ID()] = c.Path
		c.Close()
		if name == "slow" {
			slow = c.ID()
		} else {
			late = c.ID()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	spawn := func(f func()) bool {
		if ctx.Err() != nil {
			return false
		}
		wg.Go(f)
		return true
	}
	hs, err := Start(node, noTurns{}, Config{Home: t.TempDir(), Self: signer.Machine(), Signer: signer, Tick: time.Millisecond,
		Spawn: spawn, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	// Both are imported; the late one's capsule does not answer yet, so
	// its fencing cannot start: ticks try it again.
	node.mu.Lock()
	node.dirs, node.fail = dirs, late
	node.mu.Unlock()
	if err := hs.Adopt(slow); err != nil {
		t.Fatal(err)
	}
	if err := hs.Adopt(late); err == nil || hs.Runs(late) {
		t.Fatalf("the late agent's fencing started before its capsule answered: %v", err)
	}
	h, err := hs.get(slow)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock() // the slow agent's machine is busy from now on
	defer h.mu.Unlock()
	wg.Go(func() { hs.Run(time.Millisecond) })
	node.mu.Lock()
	node.fail = ""
	node.mu.Unlock()
	deadline := time.After(10 * time.Second)
	for !hs.Runs(late) {
		select {
		case <-deadline:
			t.Fatal("the late agent's fencing did not start while another agent's machine was busy")
		case <-time.After(time.Millisecond):
		}
	}
}
