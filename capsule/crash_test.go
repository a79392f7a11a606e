package capsule

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/journal"
)

// The crash test runs a writer in a child process (this test binary again,
// selected by crashChildEnv), kills it with SIGKILL at a random moment, and
// checks what it left: every event the child acknowledged is there, the
// capsule verifies (notes allowed: they are what a crash leaves), and a tar
// is either whole and valid or absent.
const crashChildEnv = "TERN_CAPSULE_CRASH_CHILD"

func TestKillNineDuringAppendSnapshotOrPackLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	root := t.TempDir()
	keyFile := filepath.Join(root, "key")
	priv, _, _ := crypto.GenerateEd25519Key(nil)
	kb, _ := crypto.MarshalPrivateKey(priv)
	os.WriteFile(keyFile, kb, 0o600)
	signer, err := journal.NewKeySigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "agent")
	c, err := New(dir, "crash", signer)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	rng := rand.New(rand.NewPCG(42, 7))
	acked := map[string]bool{}
	for round := 0; round < 10; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir+"|"+keyFile+"|"+fmt.Sprint(round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		deadline := time.After(time.Duration(20+rng.IntN(200)) * time.Millisecond)
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				if id, ok := strings.CutPrefix(l, "acked "); ok {
					acked[id] = true
				}
			case <-deadline:
				cmd.Process.Signal(syscall.SIGKILL)
				deadline = nil
			}
		}
		cmd.Wait()

		rep, err := Verify(dir, VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Fatalf("round %d: after kill -9 the capsule fails verify: %v", round, rep.Problems)
		}
		d, err := OpenDir(context.Background(), dir, nil) // recovery, as the next writer does
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		evs, err := d.Journal()
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, e := range evs {
			have[e.ID] = true
		}
		for id := range acked {
			if !have[id] {
				t.Fatalf("round %d: acknowledged event %s was lost", round, id)
			}
		}
		if tarPath := filepath.Join(root, "agent.tar"); fileExists(tarPath) {
			if rep, _ := Verify(tarPath, VerifyOptions{}); !rep.OK() {
				t.Fatalf("round %d: a killed pack left a bad tar: %v", round, rep.Problems)
			}
		}
	}
	if len(acked) == 0 {
		t.Fatal("the child never acknowledged an event; the test proved nothing")
	}
	t.Logf("%d events acknowledged across 10 kills", len(acked))
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestCrashChild is the child of the crash test; it does nothing unless
// started by it.
func TestCrashChild(t *testing.T) {
	arg := os.Getenv(crashChildEnv)
	if arg == "" {
		t.Skip("only runs as the child of the crash test")
	}
	parts := strings.Split(arg, "|")
	dir, keyFile := parts[0], parts[1]
	kb, _ := os.ReadFile(keyFile)
	priv, err := crypto.UnmarshalPrivateKey(kb)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(priv)
	s := &testSigner{priv: priv, id: id.String()}
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(filepath.Dir(dir), "ws-"+parts[2])
	ctx := context.Background()
	for i := 0; ; i++ {
		evs, err := d.Append(ctx, s, 0, userMessage(t, fmt.Sprint("message ", i)), userMessage(t, "and another"))
		for _, e := range evs {
			fmt.Printf("acked %s\n", e.ID) // the events are durable once Append has returned them
		}
		if err != nil {
			t.Fatal(err)
		}
		switch i % 5 {
		case 2:
			writeTree(t, ws, map[string]string{fmt.Sprint("f", i): strings.Repeat("x", 1<<16)})
			if _, err := d.Snapshot(ctx, s, ws); err != nil {
				t.Fatal(err)
			}
		case 4:
			if err := PackFile(d.Capsule, filepath.Join(filepath.Dir(dir), "agent.tar"), PackOptions{Signer: s}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
