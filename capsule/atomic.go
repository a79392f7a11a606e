package capsule

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// tempPrefix starts the name of every temporary file tern writes inside a
// capsule. A crash can leave one behind; readers ignore them and Open
// removes them.
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
// fill fails, path is left as it was.
func WriteAtomic(path string, perm os.FileMode, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix+"*")
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
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a folder so that renames and creations inside it are durable.
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

// isTempName reports whether a file's base name is one of tern's temporary files.
func isTempName(name string) bool {
	return strings.HasPrefix(filepath.Base(name), tempPrefix)
}
