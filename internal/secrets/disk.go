package secrets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filelock"
)

// lockWait bounds the wait for another tern process that writes in the
// secrets folder.
const lockWait = 10 * time.Second

// lockDir creates dir (0700) if need be and locks it against the other
// tern processes that write in it; the returned func unlocks it.
func lockDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("could not create the secrets folder: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	l, err := filelock.Wait(ctx, dir)
	if errors.Is(err, filelock.ErrLocked) {
		who := "another tern process"
		if pid := filelock.Holder(err); pid > 0 {
			who = fmt.Sprintf("%s (pid %d)", who, pid)
		}
		return nil, fmt.Errorf("%s keeps %s locked: let it finish and try again", who, dir)
	}
	if err != nil {
		return nil, err
	}
	return func() { l.Unlock() }, nil
}

// writeFile replaces path with data, mode 0600, atomically: a temporary
// file, fsync, rename, fsync of the folder.
func writeFile(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("could not write %s: %w", path, err)
	}
	return nil
}
