//go:build unix

package tool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestShell(t *testing.T) {
	ws, _ := workspace(t, map[string]string{"a.txt": "A"})
	res := call(t, "shell", ws, map[string]any{"command": "cat a.txt; echo; echo to-stderr >&2; pwd; exit 3"}, "op1")
	real, _ := filepath.EvalSymlinks(ws)
	if want := "A\nto-stderr\n" + real + "\n[exit code 3]"; res.Output != want || !res.IsError || res.Cut {
		t.Fatalf("got %+v, want %q", res, want)
	}
	res = call(t, "shell", ws, map[string]any{"command": "printf ok"}, "op2")
	if res.Output != "ok\n[exit code 0]" || res.IsError {
		t.Fatalf("got %+v", res)
	}
	// The command writes into the workspace, confined or not.
	call(t, "shell", ws, map[string]any{"command": "echo made > b.txt"}, "op3")
	if data, _ := os.ReadFile(filepath.Join(ws, "b.txt")); string(data) != "made\n" {
		t.Fatalf("b.txt: %q", data)
	}
}

func TestShellOperationID(t *testing.T) {
	ws, _ := workspace(t, nil)
	t.Setenv("TERN_OPERATION_ID", "inherited")
	res := call(t, "shell", ws, map[string]any{"command": `printf '%s' "$TERN_OPERATION_ID"`}, "op_42")
	if res.Output != "op_42\n[exit code 0]" {
		t.Fatalf("got %q", res.Output)
	}
	// Without an operation id the call cannot run: it has no intent.
	if _, err := callErr(t, context.Background(), "shell", ws, map[string]any{"command": "true"}, ""); err == nil {
		t.Fatal("ran without an operation id")
	}
}

// Of the node's environment only PATH, LANG, TERM and TZ reach a
// command: not the password of its secrets, not a key, not its home;
// HOME is the workspace. The variables the agent declares are added.
func TestShellEnvironment(t *testing.T) {
	ws, _ := workspace(t, nil)
	t.Setenv("TERN_SECRETS_PASSWORD", "hunter2")
	t.Setenv("TERN_SECRET_ANTHROPIC_KEY", "sk-1")
	t.Setenv("TERN_HOME", "/somewhere/tern")
	t.Setenv("TERN_TEST_PLAIN", "plain")
	t.Setenv("LANG", "C.UTF-8")
	res := call(t, "shell", ws, map[string]any{"command": "env"}, "op1")
	for _, leak := range []string{"hunter2", "sk-1", "/somewhere/tern", "TERN_TEST_PLAIN"} {
		if strings.Contains(res.Output, leak) {
			t.Errorf("the command saw %q of the node's environment: %q", leak, res.Output)
		}
	}
	for _, want := range []string{"HOME=" + ws + "\n", "LANG=C.UTF-8\n", "PATH=" + os.Getenv("PATH") + "\n", "TMPDIR=" + os.TempDir() + "\n"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("the command's environment lacks %q: %q", want, res.Output)
		}
	}
	tl, _ := Builtin("shell")
	r, err := tl.Run(context.Background(), Call{Workspace: ws, Arguments: []byte(`{"command":"echo $A-$TERN_TEST_PLAIN-$TERN_OPERATION_ID"}`), OperationID: "op2", Env: []string{"A=declared", "TERN_OPERATION_ID=forged"}})
	if err != nil || r.Output != "declared--op2\n[exit code 0]" {
		t.Fatalf("declared environment: %q, %v", r.Output, err)
	}
}

// A timeout kills the command's whole process group, a child sleep too,
// and says so.
func TestShellTimeout(t *testing.T) {
	ws, _ := workspace(t, nil)
	start := time.Now()
	res := call(t, "shell", ws, map[string]any{"command": "sleep 30 & echo $!; wait", "timeout_s": 1}, "op1")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %s", took)
	}
	if !res.IsError || !strings.HasSuffix(res.Output, "\n[timed out after 1s: the command and everything it started were killed]") {
		t.Fatalf("got %+v", res)
	}
	wantGone(t, firstLinePID(t, res.Output))
}

// Processes a command leaves in the background die when it exits.
func TestShellBackgroundKilled(t *testing.T) {
	ws, _ := workspace(t, nil)
	start := time.Now()
	res := call(t, "shell", ws, map[string]any{"command": "sleep 30 & echo $!"}, "op1")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %s", took)
	}
	if res.IsError || !strings.HasSuffix(res.Output, "\n[exit code 0]") {
		t.Fatalf("got %+v", res)
	}
	wantGone(t, firstLinePID(t, res.Output))
}

func TestShellCancel(t *testing.T) {
	ws, _ := workspace(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, err := callErr(t, ctx, "shell", ws, map[string]any{"command": "sleep 30 & echo $!; wait"}, "op1")
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.HasSuffix(res.Output, "[cancelled: the command and everything it started were killed]") {
		t.Fatalf("got %+v", res)
	}
	wantGone(t, firstLinePID(t, res.Output))
}

func TestShellOutputCap(t *testing.T) {
	ws, _ := workspace(t, nil)
	res := call(t, "shell", ws, map[string]any{"command": "printf START; yes 0123456789 | head -c 200000; printf END"}, "op1")
	if !res.Cut || res.IsError {
		t.Fatalf("cut %v, error %v", res.Cut, res.IsError)
	}
	const note = "\n[cut: 134472 bytes of output left out here; the first 32768 and the last 32768 bytes are shown]\n"
	head, tail, ok := strings.Cut(res.Output, note)
	if !ok || !strings.HasPrefix(head, "START0123456789\n") || len(head) != 32768 ||
		!strings.HasSuffix(tail, "END\n[exit code 0]") || len(tail) != 32768+len("\n[exit code 0]") {
		t.Fatalf("%d bytes: %q … %q", len(res.Output), res.Output[:40], res.Output[len(res.Output)-200:])
	}
}

func TestCapBuffer(t *testing.T) {
	var all strings.Builder
	b := &capBuffer{half: 10}
	for i := range 100 {
		s := strconv.Itoa(i) + ","
		all.WriteString(s)
		if n, _ := b.Write([]byte(s)); n != len(s) {
			t.Fatalf("wrote %d of %d", n, len(s))
		}
		text, cut := b.text()
		if whole := all.String(); len(whole) <= 20 {
			if text != whole || cut {
				t.Fatalf("after %q: %q", whole, text)
			}
		} else if want := whole[:10] + "\n[cut: " + strconv.Itoa(len(whole)-20) + " bytes of output left out here; the first 10 and the last 10 bytes are shown]\n" + whole[len(whole)-10:]; text != want || !cut {
			t.Fatalf("got %q, want %q", text, want)
		}
	}
}

func firstLinePID(t *testing.T, out string) int {
	t.Helper()
	line, _, _ := strings.Cut(out, "\n")
	pid, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("no pid in %q", out)
	}
	return pid
}

// wantGone waits for the process pid to be gone (or a zombie, where
// nothing reaps orphans).
func wantGone(t *testing.T, pid int) {
	t.Helper()
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no /proc to look for the process in")
	}
	waitFor(t, fmt.Sprintf("process %d is gone", pid), func() bool {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		_, rest, _ := strings.Cut(string(stat), ") ")
		return strings.HasPrefix(rest, "Z")
	})
}
