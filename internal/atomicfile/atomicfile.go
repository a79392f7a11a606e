// Package atomicfile writes files so that a crash leaves either the old
// content or the new, never a mix: a temporary file in the same folder,
// fsynced, renamed over the target, and the folder fsynced. Every file tern
// writes whole goes through it.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/tern-dev/tern/internal/filelock"
)

// TempPrefix marks every temporary file or folder tern writes: a file
// while it is written atomically, and the staging folder or file beside an
// output (a new capsule, an unpack, a merge, a tar) until it is renamed
// into place. Each is named "." + target + TempPrefix + random, so that a
// later run for the same target finds what a killed run left. Readers
// ignore them; the next writer removes them (RemoveLeftovers).
const TempPrefix = ".tern-tmp-"

// TempPattern is the os.CreateTemp pattern of a temporary file or folder
// that becomes target.
func TempPattern(target string) string { return "." + filepath.Base(target) + TempPrefix + "*" }

// IsTemp reports whether a file's base name is one of tern's temporary
// files.
func IsTemp(name string) bool {
	b := filepath.Base(name)
	return strings.HasPrefix(b, ".") && strings.Contains(b, TempPrefix)
}

// WriteFile replaces path with data: it writes a temporary file in the
// same folder, fsyncs it, renames it over path and fsyncs the folder.
// After a crash path holds either its old content or data, never a mix.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write is WriteFile with the content streamed by fill; if fill fails,
// path is left as it was. The temporary file is locked while it is
// written, so that RemoveLeftovers never takes a live one.
func Write(path string, perm os.FileMode, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPattern(path))
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
	return SyncDir(dir)
}

// SyncDir fsyncs a folder so that renames, creations and removals inside
// it are durable. Where a system cannot fsync a folder (it says the call
// is invalid), there is nothing more to do.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, os.ErrInvalid) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fsync folder %s: %w", dir, err)
	}
	return nil
}

// RemoveLeftovers removes the temporary files and staging folders that
// runs for target which were killed left beside it: those named after
// target that no live run holds locked. It is best effort: what it cannot
// remove stays for the next run.
func RemoveLeftovers(target string) {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(target), globEscape(TempPattern(target))))
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
