package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filelock"
	"github.com/tern-dev/tern/internal/homelock"
	"github.com/tern-dev/tern/journal"
)

// ChainsDir holds this machine's chain records inside $TERN_HOME: for each
// agent it has signed events of, <agent id>.json says in which capsule
// folder its newest events are, and <agent id>.lock is held by whoever
// signs events of that agent as this machine.
//
// They keep copies of one agent on one machine from forking the machine's
// chain: a copy may be written only if it holds every event this machine
// wrote in the copy written last (see ClaimChain). docs/FORMAT.md,
// "One writer per chain", says why.
const ChainsDir = "chains"

// chainRecord is <agent id>.json.
type chainRecord struct {
	Machine string       `json:"machine"`
	Copy    string       `json:"copy"` // absolute, links resolved
	Head    journal.Head `json:"head"` // the machine's head there when last recorded
}

// ErrChainElsewhere means this machine's newest events of an agent are in
// another copy of its capsule, which the one being written lacks: writing
// it would fork the machine's chain. Errors that wrap it say which copy,
// and what to do.
var ErrChainElsewhere = api.ErrChainElsewhere

// ChainElsewhereError is the refusal of a write that would fork this
// machine's chain of an agent; it wraps ErrChainElsewhere and says what to
// do.
type ChainElsewhereError struct {
	Agent  string
	Copy   string // where this machine's newest events of the agent are
	Target string // the copy that was to be written
	Seq    uint64 // the newest of those events the target lacks
	Lacks  int    // how many of them the target lacks; 0 when Copy is gone
	Node   bool   // the target is the node's own copy
	// Replaced says the target is the folder last written, replaced since
	// by an older copy that lacks the head recorded there.
	Replaced bool
}

func (e *ChainElsewhereError) Error() string {
	var b strings.Builder
	if e.Replaced {
		fmt.Fprintf(&b, "%s no longer holds this machine's newest events of agent %s (up to seq %d, written there): it was replaced by an older copy (a restored backup?), and writing it would fork this machine's chain. Merge the newer copy into it if you have one (tern capsule merge NEWER %s -o NEW); if those events are lost for good, take the chain over with: tern capsule heal %s",
			e.Target, e.Agent, e.Seq, e.Target, e.Target)
		return b.String()
	}
	if e.Lacks > 0 {
		fmt.Fprintf(&b, "this machine wrote %d events of agent %s in %s (up to seq %d) that %s lacks: writing there would fork this machine's chain. ", e.Lacks, e.Agent, e.Copy, e.Seq, e.Target)
		if e.Node {
			fmt.Fprintf(&b, "Import that copy into the node first: tern capsule import %s", e.Copy)
		} else {
			fmt.Fprintf(&b, "Merge them first: tern capsule merge %s %s -o NEW (then write to NEW), or write in %s", e.Copy, e.Target, e.Copy)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "this machine's newest events of agent %s (up to seq %d) were written in %s, which is gone or holds another capsule now, and %s lacks them. If that folder moved, write in its new place; if those events are lost for good, take the chain over with: tern capsule heal %s",
		e.Agent, e.Seq, e.Copy, e.Target, e.Target)
	if e.Node {
		b.Reset()
		fmt.Fprintf(&b, "this machine's newest events of agent %s (up to seq %d) were written in %s, which is gone or holds another capsule now, and the node's copy lacks them. If that folder moved, import it (tern capsule import NEWPATH); if those events are lost for good, take the chain over with: tern capsule heal %s",
			e.Agent, e.Seq, e.Copy, e.Agent)
	}
	return b.String()
}

// Unwrap returns ErrChainElsewhere.
func (e *ChainElsewhereError) Unwrap() error { return ErrChainElsewhere }

// ErrChainBusy means another writer signs events of the agent as this
// machine right now (another command, or the running node).
var ErrChainBusy = api.ErrChainBusy

// ChainClaim is held while a writer signs events of one agent as this
// machine in one capsule folder. Release it when done.
type ChainClaim struct {
	lock    *filelock.Lock
	path    string // the record file
	machine string
	copy    string
}

// ClaimChain lets the capsule folder d be written as machine: it takes
// the agent's chain lock in home (waiting while another writer holds it,
// until ctx is done; then ErrChainBusy), and checks the agent's record.
// The claim is granted when there is no record, when d is the copy it
// names, or when d holds every event of machine that copy holds (it was
// merged, or is an unpacked export of it). When that copy lacks nothing
// but is gone (moved, deleted), d must hold the recorded head, unless
// takeOver says to take the chain over regardless. Otherwise the error
// wraps ErrChainElsewhere and says which copy to merge first.
func ClaimChain(ctx context.Context, home string, d *capsule.Dir, machine string, takeOver bool) (*ChainClaim, error) {
	agent := d.ID()
	copyPath, err := canonicalPath(d.Path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(home, ChainsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	lockPath := filepath.Join(dir, agent+".lock")
	lock, err := filelock.TryLock(lockPath)
	if errors.Is(err, filelock.ErrLocked) && !heldByNode(home, err) {
		lock, err = filelock.Wait(ctx, lockPath) // another command: it finishes soon
	}
	if errors.Is(err, filelock.ErrLocked) {
		who := "another process"
		if pid := filelock.Holder(err); pid == os.Getpid() {
			who = "the node (this process)"
		} else if running, npid, _ := homelock.Running(home); running && (pid == 0 || pid == npid) {
			who = fmt.Sprintf("the running tern node (process %d); write through it (tern journal append %s), or stop it", npid, agent)
		} else if pid > 0 {
			who = fmt.Sprintf("process %d", pid)
		}
		return nil, fmt.Errorf("agent %s: %w: %s", agent, ErrChainBusy, who)
	}
	if err != nil {
		return nil, err
	}
	c := &ChainClaim{lock: lock, path: filepath.Join(dir, agent+".json"), machine: machine, copy: copyPath}
	if err := c.check(d, agent, takeOver); err != nil {
		lock.Unlock()
		return nil, err
	}
	return c, nil
}

// heldByNode reports whether the lock err says is held is held by home's
// running node (in another process), which holds a chain for as long as
// it holds the capsule open: no use waiting for it.
func heldByNode(home string, err error) bool {
	pid := filelock.Holder(err)
	if pid == 0 || pid == os.Getpid() {
		return false
	}
	running, npid, _ := homelock.Running(home)
	return running && npid == pid
}

// check decides whether d may be written (see ClaimChain).
func (c *ChainClaim) check(d *capsule.Dir, agent string, takeOver bool) error {
	rec, ok, err := readChainRecord(c.path)
	if err != nil {
		return err
	}
	if !ok || rec.Machine != c.machine {
		return nil
	}
	events, err := d.Events()
	if err != nil {
		return err
	}
	ours := map[string]bool{}
	for _, e := range events {
		if e.Machine == c.machine {
			ours[e.ID] = true
		}
	}
	if rec.Copy == c.copy {
		// The folder last written, unless it was replaced since by an older
		// copy (a restored backup, a re-unpacked export): then it lacks the
		// head this machine recorded there.
		if rec.Head.ID == "" || ours[rec.Head.ID] || takeOver {
			return nil
		}
		return &ChainElsewhereError{Agent: agent, Copy: rec.Copy, Target: d.Path, Seq: rec.Head.Seq, Replaced: true}
	}
	theirs, gone := eventsOf(rec.Copy, agent, c.machine)
	refusal := &ChainElsewhereError{Agent: agent, Copy: rec.Copy, Target: d.Path}
	if !gone {
		for _, e := range theirs {
			if !ours[e.ID] {
				refusal.Lacks++
				refusal.Seq = max(refusal.Seq, e.Seq)
			}
		}
		if refusal.Lacks == 0 {
			return nil
		}
		return refusal
	}
	if rec.Head.ID == "" || ours[rec.Head.ID] || takeOver {
		return nil
	}
	refusal.Seq = rec.Head.Seq
	return refusal
}

// Release records d's head of the claimed chain as this machine's newest
// and releases the claim. Call it after writing, whether or not the write
// succeeded; releasing twice does nothing.
func (c *ChainClaim) Release(d *capsule.Dir) error {
	if c == nil || c.lock == nil {
		return nil
	}
	defer func() { c.lock.Unlock(); c.lock = nil }()
	v, err := d.Vector()
	if err != nil {
		return err
	}
	h := v[c.machine]
	if h.ID == "" {
		return nil // nothing signed here yet
	}
	data, err := json.MarshalIndent(chainRecord{Machine: c.machine, Copy: c.copy, Head: journal.Head{Seq: h.Seq, ID: h.ID}}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(c.path, append(data, '\n'), 0o600)
}

// readChainRecord reads a record; ok is false when there is none.
func readChainRecord(path string) (chainRecord, bool, error) {
	var rec chainRecord
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil || rec.Copy == "" {
		if err == nil {
			err = errors.New("no copy named")
		}
		return rec, false, fmt.Errorf("%s is damaged: %v; %s", path, err, "restore it from a backup of this home, or remove it: nothing else is lost, but tern then no longer knows which copy of the agent this machine wrote last, so write only the newest copy you have (writing an older one forks this machine's chain; tern capsule heal resolves that)")
	}
	return rec, true, nil
}

// eventsOf returns machine's events in the capsule folder at path, or
// gone when there is no readable capsule of agent there.
func eventsOf(path, agent, machine string) (mine []*journal.Event, gone bool) {
	c, err := capsule.Open(path)
	if err != nil {
		return nil, true
	}
	defer c.Close()
	if c.ID() != agent {
		return nil, true
	}
	events, err := c.Journal()
	if err != nil {
		return nil, true
	}
	for _, e := range events {
		if e.Machine == machine {
			mine = append(mine, e)
		}
	}
	return mine, false
}

// canonicalPath is path made absolute with its links resolved: one name
// per folder.
func canonicalPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r, nil
	}
	return abs, nil
}
