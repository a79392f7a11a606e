package journal

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// crashEnv names the journal the helper process appends to; crashKeyEnv
// carries its key.
const (
	crashEnv    = "TERN_JOURNAL_CRASH_HELPER"
	crashKeyEnv = "TERN_JOURNAL_CRASH_KEY"
)

// TestCrashHelper is the process the crash test kills. It appends from four
// goroutines forever and prints "ack SEQ ID" for each event once Append has
// returned.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("runs only as the helper process of TestCrashLosesNoAcknowledgedEvent")
	}
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		os.Exit(3)
	}
	raw, err := hex.DecodeString(os.Getenv(crashKeyEnv))
	if err != nil {
		fail("key: %v", err)
	}
	k, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		fail("key: %v", err)
	}
	s, err := NewKeySigner(k)
	if err != nil {
		fail("signer: %v", err)
	}
	l, err := OpenLog(path, LogOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fail("open: %v", err)
	}
	var mu sync.Mutex
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				drafts := make([]Draft, 1+i%3)
				for j := range drafts {
					drafts[j] = draft("test", fmt.Sprintf(`{"w":%d,"i":%d,"pad":"%s"}`, w, i, strings.Repeat("x", 1000*j)))
				}
				events, err := l.Append(context.Background(), s, 0, drafts...)
				if err != nil {
					fail("append: %v", err)
				}
				mu.Lock()
				for _, e := range events {
					fmt.Fprintf(os.Stdout, "ack %d %s\n", e.Seq, e.ID)
				}
				mu.Unlock()
			}
		}()
	}
	select {}
}

func TestCrashLosesNoAcknowledgedEvent(t *testing.T) {
	path := newJournal(t)
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := crypto.MarshalPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	rng := mrand.New(mrand.NewPCG(2026, 1))
	acked := map[string]uint64{}
	for round := range 8 {
		killAfter := 1 + rng.IntN(300)
		t.Run(fmt.Sprintf("killed after %d acknowledgements", killAfter), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashEnv+"="+path, crashKeyEnv+"="+hex.EncodeToString(raw))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			n := 0
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) != 3 || f[0] != "ack" {
					continue
				}
				seq, err := strconv.ParseUint(f[1], 10, 64)
				if err != nil {
					t.Fatalf("helper said %q", sc.Text())
				}
				acked[f[2]] = seq
				if n++; n == killAfter {
					cmd.Process.Kill()
				}
			}
			io.Copy(io.Discard, out)
			cmd.Wait()
			if n < killAfter {
				t.Fatalf("round %d: the helper stopped by itself after %d acknowledgements: %s", round, n, stderr.String())
			}

			before := readFile(t, path)
			l, err := OpenLog(path, LogOptions{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatalf("open after a crash: %v", err)
			}
			defer l.Close()
			after := readFile(t, path)
			if !bytes.HasPrefix(before, after) || bytes.IndexByte(before[len(after):], '\n') >= 0 {
				t.Fatalf("open changed more than a torn tail: %d bytes became %d", len(before), len(after))
			}
			if len(after) < len(before) {
				t.Logf("cut a torn tail of %d bytes", len(before)-len(after))
			}
			have := map[string]bool{}
			events := l.Events()
			for _, e := range events {
				have[e.ID] = true
			}
			for id, seq := range acked {
				if !have[id] {
					t.Fatalf("acknowledged event seq %d (%s) is lost", seq, id)
				}
			}
			if problems := Check(events); problems != nil {
				t.Fatalf("chain problems after a crash: %v", problems)
			}
		})
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}
}
