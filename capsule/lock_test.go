package capsule

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/journal"
)

// appenderChildEnv selects TestAppenderChild: "DIR|KEYFILE|N|HOLD".
const appenderChildEnv = "TERN_CAPSULE_APPENDER_CHILD"

// checkAllPresent fails unless the capsule at dir verifies, has no fork,
// and holds every id in acked.
func checkAllPresent(t *testing.T, dir string, acked []string) {
	t.Helper()
	rep, err := Verify(dir, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("the capsule fails verify: %v", rep.Problems)
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	evs, err := c.Journal()
	if err != nil {
		t.Fatal(err)
	}
	if forks := journal.Forks(evs); len(forks) > 0 {
		t.Fatalf("forks: %v", forks)
	}
	evs = slices.DeleteFunc(evs, func(e *journal.Event) bool { return e.Type == journal.MemberAddedType }) // the creator's, written by New
	have := map[string]bool{}
	for _, e := range evs {
		have[e.ID] = true
	}
	for _, id := range acked {
		if !have[id] {
			t.Fatalf("acknowledged event %s is missing (%d events held, %d acknowledged)", id, len(evs), len(acked))
		}
	}
	if len(evs) != len(acked) {
		t.Fatalf("%d events held, %d acknowledged", len(evs), len(acked))
	}
}

func TestTwoDirsOnOneFolderTakeTurns(t *testing.T) {
	s := newSigner(t)
	dir := emptyCapsule(t, s, "helper")
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	for w := range 2 {
		wg.Go(func() {
			for i := range 10 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				d, err := OpenDir(ctx, dir, nil)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				evs, err := d.Append(context.Background(), s, 0, userMessage(t, fmt.Sprintf("writer %d, event %d", w, i)))
				d.Close()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, evs[0].ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	checkAllPresent(t, dir, acked)
}

func TestASecondDirOnAFolderIsRefusedWhileTheFirstIsOpen(t *testing.T) {
	s := newSigner(t)
	dir := emptyCapsule(t, s, "helper")
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = OpenDir(ctx, dir, nil)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "being written by") {
		t.Fatalf("second OpenDir: %v, want ErrLocked saying who writes", err)
	}
	d.Close()
	d2, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	d2.Close()
}

// startAppender runs TestAppenderChild in a child process and returns it
// with its standard output. Its standard input stays open until the test
// ends: a child that holds the folder holds it until then, or until it is
// killed.
func startAppender(t *testing.T, dir, keyFile string, n int, hold bool) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAppenderChild$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%d|%v", appenderChildEnv, dir, keyFile, n, hold))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); err != nil { // closed by Wait, after the child ends
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

func writeKey(t *testing.T, path string) string {
	t.Helper()
	priv, _, _ := crypto.GenerateEd25519Key(nil)
	kb, _ := crypto.MarshalPrivateKey(priv)
	if err := os.WriteFile(path, kb, 0o600); err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(priv)
	return id.String()
}

// Two processes append to one folder, each under its own key and then
// both under the same one: every acknowledged event is there, nothing is
// forked and the capsule verifies.
func TestTwoProcessesAppendingToOneFolderLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("same key %v", shared), func(t *testing.T) {
			root := t.TempDir()
			keys := []string{filepath.Join(root, "key0"), filepath.Join(root, "key1")}
			machine := writeKey(t, keys[0])
			writeKey(t, keys[1])
			if shared {
				keys[1] = keys[0]
			}
			dir := filepath.Join(root, "agent")
			c, err := NewLegacy(dir, "helper", machine) // two machines write it
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			var (
				mu    sync.Mutex
				acked []string
				wg    sync.WaitGroup
			)
			for _, key := range keys {
				cmd, out := startAppender(t, dir, key, 25, false)
				wg.Go(func() {
					for out.Scan() {
						if id, ok := strings.CutPrefix(out.Text(), "acked "); ok {
							mu.Lock()
							acked = append(acked, id)
							mu.Unlock()
						}
					}
					if err := cmd.Wait(); err != nil {
						t.Errorf("appender: %v", err)
					}
				})
			}
			wg.Wait()
			if len(acked) != 50 {
				t.Fatalf("%d events acknowledged, want 50", len(acked))
			}
			checkAllPresent(t, dir, acked)
		})
	}
}

func TestAWriterKilledWithSigkillReleasesTheFolder(t *testing.T) {
	if testing.Short() || runtime.GOOS == "windows" {
		t.Skip("spawns processes and kills them")
	}
	root := t.TempDir()
	keyFile := filepath.Join(root, "key")
	machine := writeKey(t, keyFile)
	dir := filepath.Join(root, "agent")
	c, err := NewLegacy(dir, "helper", machine) // two machines write it
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	cmd, out := startAppender(t, dir, keyFile, 1, true)
	var acked []string
	for out.Scan() {
		line := out.Text()
		if id, ok := strings.CutPrefix(line, "acked "); ok {
			acked = append(acked, id)
		}
		if line == "holding" {
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err = OpenDir(ctx, dir, nil)
	cancel()
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("while the child holds it: %v, want ErrLocked", err)
	}
	if runtime.GOOS == "linux" && !strings.Contains(err.Error(), "process "+strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("the error does not name the holder, process %d: %v", cmd.Process.Pid, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := OpenDir(ctx, dir, nil)
	if err != nil {
		t.Fatalf("after kill -9: %v", err)
	}
	d.Close()
	checkAllPresent(t, dir, acked)
}

// TestAppenderChild is the child of the tests above: it appends N events,
// opening and closing the folder around each, and says "acked ID" for
// each; with HOLD it then keeps the folder open, says "holding", and
// waits until it is killed or its standard input ends.
func TestAppenderChild(t *testing.T) {
	arg := os.Getenv(appenderChildEnv)
	if arg == "" {
		t.Skip("only runs as the child of the lock tests")
	}
	parts := strings.Split(arg, "|")
	dir, keyFile := parts[0], parts[1]
	n, _ := strconv.Atoi(parts[2])
	kb, _ := os.ReadFile(keyFile)
	priv, err := crypto.UnmarshalPrivateKey(kb)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(priv)
	s := &testSigner{priv: priv, id: id.String()}
	w := bufio.NewWriter(os.Stdout)
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		d, err := OpenDir(ctx, dir, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		evs, err := d.Append(context.Background(), s, 0, userMessage(t, fmt.Sprintf("pid %d, event %d", os.Getpid(), i)))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(w, "acked %s\n", evs[0].ID)
		w.Flush()
		if parts[3] == "true" && i == n-1 {
			fmt.Fprintln(w, "holding")
			w.Flush()
			io.Copy(io.Discard, os.Stdin)
		}
		d.Close()
	}
}
