package capsule

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/tern-dev/tern/journal"
)

// Unpack extracts the capsule tar at tarPath into a new folder dir. The tar
// is checked before anything is trusted (see openTar), extracted into a
// sibling staging folder, verified there completely, and only then renamed
// to dir. On any error dir is not created and nothing is left behind. A
// fork in the journal is not an error: it is carried over, for the
// machine that signed it to heal.
func Unpack(tarPath, dir string, lim Limits) (err error) {
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("unpack: %s already exists; name a new folder", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unpack: %w", err)
	}
	src, err := openTar(tarPath, lim)
	if err != nil {
		return fmt.Errorf("unpack %s: %w", tarPath, err)
	}
	defer src.close()
	if _, ok := src.entries[ManifestFile]; !ok {
		return fmt.Errorf("unpack %s: %w: no %s", tarPath, ErrNotCapsule, ManifestFile)
	}
	parent := filepath.Dir(dir)
	staging, lock, err := newStaging(dir)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	defer lock.Unlock()
	defer func() {
		if err != nil {
			os.RemoveAll(staging)
		}
	}()
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(staging, filepath.FromSlash(d)), 0o755); err != nil {
			return err
		}
	}
	names, _ := src.list()
	for _, name := range names {
		if err := extract(src, name, filepath.Join(staging, filepath.FromSlash(name))); err != nil {
			return fmt.Errorf("unpack %s: entry %q: %w", tarPath, name, err)
		}
	}
	for _, d := range append([]string{"."}, dirs...) {
		if err := syncDir(filepath.Join(staging, filepath.FromSlash(d))); err != nil {
			return err
		}
	}
	rep, err := Verify(staging, VerifyOptions{})
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	// A fork is no damage of the tar: it is carried over, to be healed by
	// the machine that signed it (ForksOf names them).
	issues := slices.DeleteFunc(rep.Issues(), func(p Problem) bool { return errors.Is(p.Err, journal.ErrFork) })
	if len(issues) > 0 {
		p := issues[0]
		more := ""
		if len(issues) > 1 {
			more = fmt.Sprintf(" (and %d more problems; tern capsule verify %s lists them)", len(issues)-1, tarPath)
		}
		return fmt.Errorf("unpack %s: entry %q: %w%s", tarPath, p.File, p.Err, more)
	}
	lock.Unlock()
	if err := os.Rename(staging, dir); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	return syncDir(parent)
}

func extract(src *tarSource, name, dst string) error {
	rc, size, err := src.open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, rc)
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
