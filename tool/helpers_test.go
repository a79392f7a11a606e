package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// call runs the built-in tool name with args (a value to encode, or a
// json.RawMessage as it is) in workspace ws under operation id op; a Go
// error fails the test.
func call(t *testing.T, name, ws string, args any, op string) Result {
	t.Helper()
	res, err := callErr(t, context.Background(), name, ws, args, op)
	if err != nil {
		t.Fatalf("%s: Go error %v", name, err)
	}
	return res
}

func callErr(t *testing.T, ctx context.Context, name, ws string, args any, op string) (Result, error) {
	t.Helper()
	tl, ok := Builtin(name)
	if !ok {
		t.Fatalf("no built-in tool %s", name)
	}
	raw, ok := args.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(args); err != nil {
			t.Fatal(err)
		}
	}
	// The test servers listen on loopback, which only an approved call
	// reaches (TestHTTPRequestKeepsOffThisMachineUnlessApproved).
	return tl.Run(ctx, Call{Workspace: ws, Arguments: raw, OperationID: op, Approved: true})
}

// workspace makes a workspace folder inside a parent folder that also
// holds outside/secret.txt, a file no tool may reach, and returns both.
func workspace(t *testing.T, files map[string]string) (ws, parent string) {
	t.Helper()
	parent = t.TempDir()
	ws = filepath.Join(parent, "ws")
	write(t, filepath.Join(parent, "outside", "secret.txt"), "SECRET")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		write(t, filepath.Join(ws, filepath.FromSlash(name)), content)
	}
	return ws, parent
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
}

// wantError checks that res is an error result whose output holds each of
// the fragments.
func wantError(t *testing.T, res Result, fragments ...string) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("not an error result: %q", res.Output)
	}
	for _, f := range fragments {
		if !strings.Contains(res.Output, f) {
			t.Errorf("error result %q does not say %q", res.Output, f)
		}
	}
}

func wantOK(t *testing.T, res Result) {
	t.Helper()
	if res.IsError {
		t.Fatalf("error result: %q", res.Output)
	}
}

// waitFor checks cond every 10 ms until it holds, or fails the test after
// 20 s saying what did not happen. For what the test can only look at: a
// process that ends, a file that appears, a notification that comes on
// its own; the deadline guards against a hang only.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not within 20 s", what)
		}
	}
}
