// Package filelock takes advisory, exclusive locks on files and folders
// that the operating system releases when the holder exits, however it
// exits (a crash or kill -9 included): flock(2) on Unix, LockFileEx on
// Windows. tern uses them so that a capsule folder, a machine's chain of
// an agent and a $TERN_HOME each have one writer at a time, across
// processes and within one.
//
// A lock belongs to the open file it was taken through, not to the
// process: two Locks on one path exclude each other even in one process.
// Locks are advisory: they bind only code that takes them.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// ErrLocked means another holder has the lock.
var ErrLocked = errors.New("locked by another process")

// LockedError says who holds a lock that could not be taken. It wraps
// ErrLocked.
type LockedError struct {
	Path string
	PID  int // the holder's process id, 0 when the system does not say
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%s is locked by process %d", e.Path, e.PID)
	}
	return fmt.Sprintf("%s is locked by another process", e.Path)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// Holder returns the process id in a lock error, 0 if there is none.
func Holder(err error) int {
	var le *LockedError
	if errors.As(err, &le) {
		return le.PID
	}
	return 0
}

// Lock is a held lock. Unlock releases it; so does the process's exit.
type Lock struct {
	f    *os.File
	path string
}

// TryLock takes the lock on path without waiting. path is a folder, or a
// file that is created (0600) if it does not exist. If another holder has
// it, the error is a *LockedError.
func TryLock(path string) (*Lock, error) {
	f, err := openForLock(path)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, &LockedError{Path: path, PID: holderPID(path)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f, path: path}, nil
}

// Wait takes the lock on path, waiting while another holder has it until
// ctx is done; then it returns that holder's *LockedError. With a ctx that
// is already done it tries once.
func Wait(ctx context.Context, path string) (*Lock, error) {
	delay := time.Millisecond
	for {
		l, err := TryLock(path)
		if !errors.Is(err, ErrLocked) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// Held reports whether another holder has the lock on path now, and its
// process id when the system says. It takes the lock for an instant to
// find out; a path that does not exist is not held.
func Held(path string) (bool, int, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, 0, nil
	}
	l, err := TryLock(path)
	if errors.Is(err, ErrLocked) {
		return true, Holder(err), nil
	}
	if err != nil {
		return false, 0, err
	}
	return false, 0, l.Unlock()
}

// File returns the open file the lock is held through (for a lock file,
// to write into it).
func (l *Lock) File() *os.File { return l.f }

// Unlock releases the lock. Unlocking twice is a no-op.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	return f.Close() // closing the file releases the lock
}

// openForLock opens a folder for reading or a file for writing, creating
// the file.
func openForLock(path string) (*os.File, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return os.Open(path)
	}
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
