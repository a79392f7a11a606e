package nemesis

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	builtTern string
	buildErr  error
	buildDir  string
)

// TestMain removes the tern binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// ternBinary builds cmd/tern once for every test of the package (with
// tags, if given, the first time), or skips the test when this machine
// cannot run the nemesis.
func ternBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs tern nodes in network namespaces")
	}
	if err := Available(); err != nil {
		t.Skip(err)
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "nemesis-tern-")
		if buildErr != nil {
			return
		}
		builtTern = filepath.Join(buildDir, "tern")
		out, err := exec.Command("go", "build", "-tags", "ternflaws", "-o", builtTern, "github.com/tern-dev/tern/cmd/tern").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err, string(out)}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtTern
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build cmd/tern: " + e.err.Error() + ": " + e.out }

func TestAClusterMovesItsAgentOverTheWire(t *testing.T) {
	tern := ternBinary(t)
	for _, transport := range []string{"tcp", "quic"} {
		t.Run(transport, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			t.Cleanup(func() { dumpLogs(t, dir) })
			c, err := StartCluster(ctx, ClusterOptions{Tern: tern, Transport: transport, Dir: dir, Seed: 1,
				Faults: Faults{Delay: 2 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: 0.01}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			out, err := c.Nodes[0].Migrate(ctx, c.Nodes[1], 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if out.Outcome != "committed" {
				t.Fatalf("the move %s: %s", out.Outcome, out.Reason)
			}
			if !c.Nodes[1].Runs(ctx) {
				r, _ := c.Nodes[1].Holder(ctx)
				t.Fatalf("n1 does not run the agent after the move: %+v", r)
			}
			t.Logf("frozen %d ms, wire carried %d packets, dropped %d", out.FrozenMS, c.wire.Carried.Load(), c.wire.Dropped.Load())
		})
	}
}

// dumpLogs logs what each node of the cluster in dir logged, if the test
// failed.
func dumpLogs(t *testing.T, dir string) {
	if !t.Failed() {
		return
	}
	for i := range Nodes {
		data, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("n%d.log", i)))
		t.Logf("n%d logged:\n%s", i, data)
	}
}
