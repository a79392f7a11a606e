package homelock

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestOneNodePerHomeAndCommandsSeeItRun(t *testing.T) {
	home := t.TempDir()
	if running, _, err := Running(home); err != nil || running {
		t.Fatalf("an empty home: running %v, %v", running, err)
	}
	l, err := Lock(home)
	if err != nil {
		t.Fatal(err)
	}
	running, pid, err := Running(home)
	if err != nil || !running || pid != os.Getpid() {
		t.Fatalf("a locked home: running %v, pid %d, %v; want this process, %d", running, pid, err, os.Getpid())
	}
	if _, err := Lock(home); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "process") {
		t.Fatalf("a second lock: %v, want ErrInUse naming the process", err)
	}
	l.Unlock()
	if running, _, _ := Running(home); running {
		t.Fatal("the home still counts as running after the lock was released")
	}
}
