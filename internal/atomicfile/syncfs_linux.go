package atomicfile

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncFS syncs the filesystem that holds dir (syncfs(2)): every file's
// data and metadata on it reach the disk, and the journal commits.
func syncFS(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return true, err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return true, fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return true, nil
}
