package capsule

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/tern-dev/tern/internal/filelock"
)

// tempPrefix marks every temporary file or folder tern writes: a file
// inside a capsule while it is written atomically, and the staging folder
// or file beside an output (a new capsule, an unpack, a merge, a tar)
// until it is renamed into place. Each is named ".<target>" + tempPrefix +
// random, so that a later run for the same target finds what a killed run
// left. Readers ignore them; the next writer removes them.
const tempPrefix = ".tern-tmp-"

// nextSuffix marks a file written by an update that the manifest has
// committed but that is not yet renamed into place (see commit).
const nextSuffix = ".next"

// WriteFileAtomic replaces path with data: it writes a temporary file in the
// same folder, fsyncs it, renames it over path and fsyncs the folder. After a
// crash path holds either its old content or data, never a mix.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return WriteAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic is WriteFileAtomic with the content streamed by fill; if
// fill fails, path is left as it was. The temporary file is locked while
// it is written, so that removeLeftovers never takes a live one.
func WriteAtomic(path string, perm os.FileMode, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPattern(path))
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	lock, err := filelock.TryLock(tmp)
	if err != nil {
		return err
	}
	defer lock.Unlock() // before the rename below, and on failure
	if err = fill(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return err
	}
	lock.Unlock() // some systems refuse to rename a file open elsewhere
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// tempPattern is the os.CreateTemp pattern of a temporary file or folder
// that becomes target.
func tempPattern(target string) string { return "." + filepath.Base(target) + tempPrefix + "*" }

// newStaging makes a locked, empty staging folder beside target (see
// tempPrefix), after removing what killed runs for the same target left
// there. The caller fills it, renames it to target, then unlocks it (or
// removes it on failure).
func newStaging(target string) (string, *filelock.Lock, error) {
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", nil, err
	}
	removeLeftovers(target)
	staging, err := os.MkdirTemp(parent, tempPattern(target))
	if err != nil {
		return "", nil, err
	}
	lock, err := filelock.TryLock(staging)
	if err != nil {
		os.RemoveAll(staging)
		return "", nil, err
	}
	if err := os.Chmod(staging, 0o755); err != nil {
		lock.Unlock()
		os.RemoveAll(staging)
		return "", nil, err
	}
	return staging, lock, nil
}

// removeLeftovers removes the temporary files and staging folders that
// runs for target which were killed left beside it: those named after
// target that no live run holds locked. It is best effort: what it cannot
// remove stays for the next run.
func removeLeftovers(target string) {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(target), globEscape(tempPattern(target))))
	for _, m := range matches {
		lock, err := filelock.TryLock(m)
		if err != nil {
			continue // a live run's, or unreadable
		}
		os.RemoveAll(m)
		lock.Unlock()
	}
}

// globEscape escapes the glob metacharacters of a pattern's literal part
// (everything but its final "*").
func globEscape(pattern string) string {
	if runtime.GOOS == "windows" { // no escapes there; \ separates paths
		return pattern
	}
	lit := strings.TrimSuffix(pattern, "*")
	var b strings.Builder
	for _, r := range lit {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String() + "*"
}

// SyncDir fsyncs a folder so that renames and creations inside it are
// durable.
func SyncDir(dir string) error { return syncDir(dir) }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync folder %s: %w", dir, err)
	}
	return nil
}

// isTempName reports whether a file's base name is one of tern's temporary
// files.
func isTempName(name string) bool {
	b := filepath.Base(name)
	return strings.HasPrefix(b, ".") && strings.Contains(b, tempPrefix)
}
