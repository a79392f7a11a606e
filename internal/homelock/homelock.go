// Package homelock is a tern node's lock on its $TERN_HOME: one node per
// home, and commands that ask whether one runs there.
package homelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tern-dev/tern/internal/filelock"
)

// File is the lock a running node holds on its $TERN_HOME, so that a
// second node on the same home refuses to start. It holds the node's
// process id, for people.
const File = "node.lock"

// homeLockWait is how long Start waits for the home's lock: a command
// checking whether a node runs holds it for an instant.
const homeLockWait = 2 * time.Second

// ErrInUse means another tern node runs on this $TERN_HOME.
var ErrInUse = errors.New("another tern node is running on this TERN_HOME")

// Lock takes home's node lock and writes this process's id into it.
func Lock(home string) (*filelock.Lock, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", home, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), homeLockWait)
	defer cancel()
	path := filepath.Join(home, File)
	l, err := filelock.Wait(ctx, path)
	if errors.Is(err, filelock.ErrLocked) {
		pid := filelock.Holder(err)
		if pid == 0 {
			pid = pidIn(path)
		}
		who := ""
		if pid > 0 {
			who = fmt.Sprintf(" (process %d)", pid)
		}
		return nil, fmt.Errorf("%w%s: stop it first (tern status shows it), or set TERN_HOME to another folder for a second node", ErrInUse, who)
	}
	if err != nil {
		return nil, err
	}
	f := l.File()
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return l, nil
}

// pidIn reads the process id a node wrote into its lock file, 0 if none.
func pidIn(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Running reports whether a node runs on home now, and its process id.
func Running(home string) (bool, int, error) {
	path := filepath.Join(home, File)
	held, pid, err := filelock.Held(path)
	if held && pid == 0 {
		pid = pidIn(path)
	}
	return held, pid, err
}
