package capsule

import (
	"os"
	"path/filepath"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filelock"
)

// nextSuffix marks a file written by an update that the manifest has
// committed but that is not yet renamed into place (see commit).
const nextSuffix = ".next"

// newStaging makes a locked, empty staging folder beside target (see
// atomicfile.TempPrefix), after removing what killed runs for the same
// target left there. The caller fills it, renames it to target, then
// unlocks it (or removes it on failure).
func newStaging(target string) (string, *filelock.Lock, error) {
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", nil, err
	}
	atomicfile.RemoveLeftovers(target)
	staging, err := os.MkdirTemp(parent, atomicfile.TempPattern(target))
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
