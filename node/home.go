package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/allowlist"
	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/homelock"
	"github.com/tern-dev/tern/store"
)

// LockFile is the lock a running node holds on its $TERN_HOME
// (internal/homelock).
const LockFile = homelock.File

// ErrHomeInUse means another tern node runs on this $TERN_HOME.
var ErrHomeInUse = homelock.ErrInUse

// Running reports whether a node runs on home now, and its process id.
func Running(home string) (bool, int, error) { return homelock.Running(home) }

// inUse says what home holds that a node's identity is bound to:
// capsules, paired peers, chain records. "" when it holds none.
func inUse(home string) string {
	var what []string
	if ids, err := os.ReadDir(filepath.Join(home, store.CapsulesDir)); err == nil {
		n := 0
		for _, e := range ids {
			if e.IsDir() && capsule.ValidAgentID(e.Name()) {
				n++
			}
		}
		switch {
		case n == 1:
			what = append(what, "1 capsule")
		case n > 1:
			what = append(what, fmt.Sprintf("%d capsules", n))
		}
	}
	if p, err := allowlist.Read(filepath.Join(home, PeersFile)); err != nil || len(p) > 0 {
		what = append(what, "paired peers")
	}
	if recs, err := os.ReadDir(filepath.Join(home, store.ChainsDir)); err == nil && len(recs) > 0 {
		what = append(what, "records of the chains this machine signed")
	}
	return strings.Join(what, ", ")
}

// ErrDiskFull is what a write to a full disk in the home fails with
// (match it with errors.Is); the error says which file's disk is full and
// that the node retries.
var ErrDiskFull = atomicfile.ErrDiskFull

// diskFull says, of a write to path that failed because its disk is full,
// what is wrong and what to do; any other error it returns as it is.
func diskFull(path string, err error) error { return atomicfile.DiskFull(path, err) }

// damagedHomeFile is the refusal of a home file that does not parse: it
// names the file, what is wrong, and what to do.
func damagedHomeFile(path string, err error, todo string) error {
	return fmt.Errorf("%s is damaged: %v; %s", path, err, todo)
}

// removeLeftovers removes what killed runs of a node left in home:
// uploads, exports and imports in progress. It runs holding the home's
// lock, so none of them is live.
func removeLeftovers(home string, log interface{ Warn(string, ...any) }) {
	for _, pattern := range []string{
		filepath.Join(home, ".upload-*"),
		filepath.Join(home, ".export-*"),
		filepath.Join(home, ".take-*"),
		filepath.Join(home, store.CapsulesDir, ".import-*"),
		filepath.Join(home, PartialDir, "*"+wholeSuffix), // offered blobs: fetched again if named
		filepath.Join(home, PartialDir, pushPrefix+"*"),  // pushes cut by the crash
	} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			log.Warn("removing what an interrupted run left", "path", m)
			if err := os.RemoveAll(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
				log.Warn("could not remove it", "path", m, "err", err)
			}
		}
	}
}

// CopyHome copies the home of a stopped node to to (which must not exist),
// as a backup taken with cp -a would: a node started on the copy later is
// a machine restored from an old backup, which fencing must stop from
// running what has moved on since.
func CopyHome(home, to string) error {
	return filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, path)
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, info.Mode().Perm())
		case d.Type().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, data, info.Mode().Perm())
		}
		return nil
	})
}
