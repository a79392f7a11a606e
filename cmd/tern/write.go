package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
)

// lockWait bounds how long a command waits for another writer of a
// capsule folder (another tern command appending to it, say) to finish.
const lockWait = 30 * time.Second

// chainWait bounds how long a command waits for another writer of this
// machine's chain of an agent: another command takes milliseconds; a node
// holds it as long as it holds the capsule open, and waiting is no use.
const chainWait = 5 * time.Second

// openDir opens a capsule folder for writing, waiting up to lockWait for
// another writer.
func (e *env) openDir(ctx context.Context, path string) (*capsule.Dir, error) {
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	return capsule.OpenDir(ctx, path, e.log)
}

// heldByNode is the refusal of a write to a capsule folder that the
// running node holds: the node is its one writer.
type heldByNode struct {
	path, agent string
	pid         int
}

func (h *heldByNode) Error() string {
	return fmt.Sprintf("%s is the running tern node's copy of agent %s (process %d): the node is its one writer. Append through it with: tern journal append %s; accept edits with: tern capsule accept %s; snapshot with: tern capsule snapshot %s WORKSPACE",
		h.path, h.agent, h.pid, h.agent, h.agent, h.agent)
}

// writer is a capsule folder opened to sign events in it as this machine.
type writer struct {
	*capsule.Dir
	id    *node.Identity
	claim *store.ChainClaim
}

// openWriter opens the capsule folder at path to sign events in it as
// this machine. A folder the running node holds is refused with a
// *heldByNode. Otherwise it opens the folder (waiting up to lockWait for
// another writer) and claims this machine's chain of the agent (see
// store.ClaimChain; takeOver for heal). Close records the chain's new head
// and closes the folder.
func (e *env) openWriter(ctx context.Context, path string, takeOver bool) (*writer, error) {
	home, err := node.Home()
	if err != nil {
		return nil, err
	}
	if err := refuseNodeCopy(home, path); err != nil {
		return nil, err
	}
	id, err := node.LoadIdentity(home)
	if err != nil {
		return nil, err
	}
	d, err := e.openDir(ctx, path)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, chainWait)
	defer cancel()
	claim, err := store.ClaimChain(cctx, home, d, id.Machine(), takeOver)
	if err != nil {
		d.Close()
		return nil, err
	}
	return &writer{Dir: d, id: id, claim: claim}, nil
}

// Close records this machine's new head of the chain and closes the folder.
func (w *writer) Close() error {
	return errors.Join(w.claim.Release(w.Dir), w.Dir.Close())
}

// refuseNodeCopy returns a *heldByNode if path is a capsule folder in
// home's store and home's node is running.
func refuseNodeCopy(home, path string) error {
	abs, err := resolved(path)
	if err != nil {
		return err
	}
	store, err := resolved(filepath.Join(home, store.CapsulesDir))
	if err != nil {
		return err
	}
	if filepath.Dir(abs) != store || !capsule.ValidAgentID(filepath.Base(abs)) {
		return nil
	}
	running, pid, err := node.Running(home)
	if err != nil || !running {
		return err
	}
	return &heldByNode{path: path, agent: filepath.Base(abs), pid: pid}
}

// resolved is path made absolute, with its links resolved when it exists.
func resolved(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r, nil
	}
	return abs, nil
}

// offlineCopy is this home's copy of agent when no node runs for the home:
// a command that would write through the node writes that folder instead
// (under the one-writer lock, as this machine, at epoch 0: an offline
// edit), saying so, and the node takes it up when it starts. ok is false
// when a node runs, or the home holds no copy of the agent.
func (e *env) offlineCopy(agent string) (dir string, ok bool) {
	home, err := node.Home()
	if err != nil {
		return "", false
	}
	if running, _, err := node.Running(home); err != nil || running {
		return "", false
	}
	dir = filepath.Join(home, store.CapsulesDir, agent)
	if _, err := os.Stat(filepath.Join(dir, capsule.ManifestFile)); err != nil {
		return "", false
	}
	fmt.Fprintf(e.stderr, "no node runs for this TERN_HOME: writing its copy of agent %s as an offline edit; the node takes it up when it starts\n", agent)
	return dir, true
}
