// Package procgroup keeps the processes a node starts for an agent (a
// shell command, a stdio MCP server) from outliving the node.
//
// On Linux each such process leads a process group of its own and gets
// SIGKILL when the node dies (a parent-death signal: Prepare and Spawn),
// so a kill -9 of the node ends the leader at once. What the leader
// started in the background is in its group, and the group is recorded
// on disk while it runs (Dir.Keep): a file per group with its id, its
// leader's start time and the boot it started in. The node's next start
// ends every group a record names (Dir.End, Dir.EndAll): SIGKILL to the
// group, until no process that started at or after its leader is left in
// it, so that nothing of an interrupted call still runs when the node
// decides what became of it.
//
// A group id is reused only once no process is left in the group. So a
// record of another boot, or one whose leader's id now names a process
// that started at another time, names a group that is gone, and nothing
// is killed for it. What no record can tell: a group that ended while
// its record stayed (a removal that failed), whose id a new group then
// reused, whose leader died leaving children: that takes the system's
// whole range of process ids used up in between, and a failed removal.
//
// Elsewhere a process still leads a group of its own, but nothing kills
// it when the node dies and no record is kept: without /proc a later
// group that reuses the id cannot be told apart from the recorded one.
//
// The package never kills a group it cannot tell is the recorded one, nor
// process group 0 or 1, nor the caller's own.
package procgroup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/tern-dev/tern/internal/atomicfile"
)

// Group is a process group a node started: its id and, on Linux, its
// leader's start time and the boot it started in, which tell it apart
// from a later group that reuses the id.
type Group struct {
	PGID int `json:"pgid"`
	// Start is the leader's start, in clock ticks after boot (field 22 of
	// /proc/PID/stat); a process of the group that started before it is
	// not the group's.
	Start uint64 `json:"start,omitempty"`
	// Boot is /proc/sys/kernel/random/boot_id when the leader started: a
	// group of another boot has no process left.
	Boot string `json:"boot_id,omitempty"`
}

// Start starts cmd (see Spawn); call Prepare on it first.
func Start(cmd *exec.Cmd) error { return Spawn(cmd.Start) }

// End kills every process of g and waits until none is left (or is a
// zombie, which runs nothing). It fails if ctx ends first, naming the
// processes left, or if a process cannot be killed (another user's).
func End(ctx context.Context, g Group) error { return end(ctx, g) }

// Dir is a folder of records, one file NAME.json per running group (the
// node's $TERN_HOME/processes). The zero Dir keeps no records: Keep and
// Drop do nothing, End and EndAll find nothing.
type Dir string

// Keep records g under name, durably: when Keep returns nil, a crash
// cannot lose the record (it is written to a temporary file, fsynced,
// renamed into place, and the folder fsynced). A process of the group
// should do nothing that matters before Keep returns. Where no record can
// tell the group apart from a later one (not Linux), Keep does nothing.
func (d Dir) Keep(name string, g Group) error {
	if d == "" || !records {
		return nil
	}
	path, err := d.path(name)
	if err != nil {
		return err
	}
	if err := d.make(); err != nil {
		return err
	}
	b, _ := json.Marshal(g)
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("procgroup: record process group %d in %s: %w", g.PGID, path, err)
	}
	return nil
}

// make creates the folder, durably, if it is not there.
func (d Dir) make() error {
	if _, err := os.Stat(string(d)); err == nil {
		return nil
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return fmt.Errorf("procgroup: create %s: %w", d, err)
	}
	return atomicfile.SyncDir(filepath.Dir(string(d)))
}

// Drop removes the record of name: its group is gone.
func (d Dir) Drop(name string) error {
	if d == "" {
		return nil
	}
	path, err := d.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("procgroup: %w", err)
	}
	return nil
}

// End ends the group recorded under name, if any (see End), and then
// removes its record. No record: nothing to do.
func (d Dir) End(ctx context.Context, name string) error {
	if d == "" {
		return nil
	}
	path, err := d.path(name)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("procgroup: %w", err)
	}
	var g Group
	if err := json.Unmarshal(b, &g); err != nil || g.PGID <= 1 {
		return fmt.Errorf("procgroup: %s is not a record of a process group (%q): end what it ran by hand if anything still runs, then remove the file", path, strings.TrimSpace(string(b)))
	}
	if err := end(ctx, g); err != nil {
		return fmt.Errorf("%w (recorded in %s)", err, path)
	}
	return d.Drop(name)
}

// EndAll ends every group the folder records (Dir.End) and removes what
// an interrupted Keep left; it answers the names of the records it found.
// Call it only before this process starts groups of its own in d: at a
// node's start, under the home's lock.
func (d Dir) EndAll(ctx context.Context) ([]string, error) {
	if d == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("procgroup: %w", err)
	}
	var names []string
	var errs []error
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		switch {
		case strings.HasPrefix(e.Name(), "."):
			// A temporary file of a Keep that never finished: its
			// group never got to run anything.
			os.Remove(filepath.Join(string(d), e.Name()))
		case ok:
			names = append(names, name)
			errs = append(errs, d.End(ctx, name))
		}
	}
	return names, errors.Join(errs...)
}

// path is the record file of name, which must be a plain file name.
func (d Dir) path(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("procgroup: %q cannot name a record: use letters, digits, '_' and '-'", name)
	}
	return filepath.Join(string(d), name+".json"), nil
}

// pollDelay is how often end looks again for what is left of a group:
// at once, then less and less often, up to every 100 ms.
func pollDelay(prev time.Duration) time.Duration {
	if prev == 0 {
		return time.Millisecond
	}
	return min(2*prev, 100*time.Millisecond)
}
