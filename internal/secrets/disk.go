package secrets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tern-dev/tern/capsule"
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
	if err := capsule.WriteFileAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("could not write %s: %w", path, err)
	}
	return nil
}

// syncDir fsyncs dir, so that a removal in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
