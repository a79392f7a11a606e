package filelock

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func TestTwoLocksOnOnePathExcludeEachOther(t *testing.T) {
	for _, kind := range []string{"file", "folder"} {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x")
			if kind == "folder" {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			l, err := TryLock(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := TryLock(path); !errors.Is(err, ErrLocked) {
				t.Fatalf("second lock: %v, want ErrLocked", err)
			}
			if held, _, err := Held(path); err != nil || !held {
				t.Fatalf("Held = %v, %v; want true", held, err)
			}
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(); err != nil {
				t.Fatalf("second unlock: %v", err)
			}
			l2, err := TryLock(path)
			if err != nil {
				t.Fatalf("after unlock: %v", err)
			}
			l2.Unlock()
			if held, _, _ := Held(path); held {
				t.Fatal("Held after unlock")
			}
		})
	}
}

func TestWaitTakesTheLockWhenReleasedAndGivesUpWithItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x")
	l, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := Wait(ctx, path); !errors.Is(err, ErrLocked) {
		t.Fatalf("Wait while held: %v, want ErrLocked", err)
	}
	done := make(chan error, 1)
	go func() {
		l2, err := Wait(context.Background(), path)
		if err == nil {
			l2.Unlock()
		}
		done <- err
	}()
	l.Unlock()
	if err := <-done; err != nil {
		t.Fatalf("Wait after release: %v", err)
	}
	expired, cancel2 := context.WithCancel(context.Background())
	cancel2()
	l3, err := Wait(expired, path)
	if err != nil {
		t.Fatalf("a done context still tries once: %v", err)
	}
	l3.Unlock()
}

func TestHeldOnAPathThatDoesNotExist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none")
	if held, _, err := Held(path); held || err != nil {
		t.Fatalf("Held = %v, %v", held, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("Held created the file")
	}
}

// A lock held by another process is refused, named by its PID on Linux,
// and released when that process is killed with SIGKILL.
func TestAKilledHolderReleasesItsLock(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses SIGKILL")
	}
	path := filepath.Join(t.TempDir(), "x")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), "FILELOCK_HOLD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); err != nil { // open until the child ends: it holds the lock till then
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	_, err = TryLock(path)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("lock held by another process: %v, want ErrLocked", err)
	}
	if runtime.GOOS == "linux" {
		if pid := Holder(err); pid != cmd.Process.Pid {
			t.Errorf("holder PID %d, want %d (error: %v)", pid, cmd.Process.Pid, err)
		}
	}
	cmd.Process.Signal(os.Kill)
	cmd.Wait()
	l, err := Wait(context.Background(), path)
	if err != nil {
		t.Fatalf("after kill -9: %v", err)
	}
	l.Unlock()
}

// TestHelperHoldLock is run by TestAKilledHolderReleasesItsLock in a child
// process: it takes the lock, says so, and waits to be killed (or for
// its standard input to end).
func TestHelperHoldLock(t *testing.T) {
	path := os.Getenv("FILELOCK_HOLD")
	if path == "" {
		t.Skip("helper process only")
	}
	if _, err := TryLock(path); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	io.Copy(io.Discard, os.Stdin)
}
