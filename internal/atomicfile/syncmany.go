package atomicfile

import (
	"os"
	"path/filepath"
)

// syncfsAt is how many files a SyncFiles call takes before one sync of
// their whole filesystem costs less than an fsync each (which is most of
// the time of a snapshot of a tree of small files).
const syncfsAt = 16

// SyncFiles makes durable the contents of the files at paths and their
// names in their folders, all on the filesystem of dir: written (and
// renamed into place) without an fsync each, they are made durable
// together, by one sync of that filesystem where the system has one
// (Linux's syncfs) and there are syncfsAt or more, else by an fsync of
// each file and of each folder that holds one. Until it returns, a crash
// may leave any of the files under its name with only part of its bytes:
// the caller writes such files only where a reader checks them (blobs,
// named by their hash) and lists them only after it returns.
func SyncFiles(dir string, paths []string) error {
	if len(paths) >= syncfsAt {
		if ok, err := syncFS(dir); ok {
			return err
		}
	}
	dirs := map[string]bool{}
	for _, p := range paths {
		if err := syncFile(p); err != nil {
			return err
		}
		dirs[filepath.Dir(p)] = true
	}
	for d := range dirs {
		if err := SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
