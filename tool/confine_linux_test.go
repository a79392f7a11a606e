package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// An approved shell command, confined by Landlock, reads nothing of the
// node's home but its own workspace there: not node.key, not node.json,
// not another agent's workspace, not the node's environment through
// /proc; it writes only in its workspace and the temporary folder; and
// ordinary commands still work.
func TestAShellCommandIsConfinedToItsWorkspace(t *testing.T) {
	abi := landlockABI()
	if abi == 0 {
		t.Skip("this kernel offers no Landlock, so shell's commands run unconfined here: " + Confinement())
	}
	if c := Confinement(); c != "confined by Landlock ABI "+strconv.Itoa(abi) {
		t.Errorf("Confinement() = %q", c)
	}
	home := filepath.Join(t.TempDir(), "tern")
	write(t, filepath.Join(home, "node.key"), "NODE-KEY-BYTES")
	write(t, filepath.Join(home, "node.json"), `{"token": "API-TOKEN"}`)
	write(t, filepath.Join(home, "workspaces", "other", "notes.txt"), "ANOTHER-AGENTS-NOTES")
	ws := filepath.Join(home, "workspaces", "a")
	write(t, filepath.Join(ws, "a.txt"), "A")
	outside := t.TempDir()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("TERN_SECRETS_PASSWORD", "PASSWORD-123")

	run := func(command string) Result {
		t.Helper()
		args, _ := json.Marshal(map[string]any{"command": command})
		tl, _ := Builtin("shell")
		res, err := tl.Run(context.Background(), Call{Workspace: ws, Home: home, Arguments: args, OperationID: "op_1", Approved: true})
		if err != nil {
			t.Fatalf("%s: Go error %v", command, err)
		}
		return res
	}
	denied := []struct{ name, command, secret string }{
		{"the node's key", "cat " + filepath.Join(home, "node.key"), "NODE-KEY-BYTES"},
		{"the node's API token", "cat " + filepath.Join(home, "node.json"), "API-TOKEN"},
		{"another agent's workspace", "cat " + filepath.Join(home, "workspaces", "other", "notes.txt"), "ANOTHER-AGENTS-NOTES"},
		{"the list of the home", "ls " + home, "node.key"},
		{"the node's environment", "cat /proc/" + strconv.Itoa(os.Getpid()) + "/environ", "PATH="},
		{"the node's memory", "head -c 1 /proc/" + strconv.Itoa(os.Getpid()) + "/mem", ""},
		{"a raw disk", "ls /dev/", "null"},
	}
	for _, tt := range denied {
		t.Run("cannot read "+tt.name, func(t *testing.T) {
			res := run(tt.command)
			if !res.IsError || (tt.secret != "" && strings.Contains(res.Output, tt.secret)) {
				t.Fatalf("%s: %q", tt.command, res.Output)
			}
		})
	}
	t.Run("cannot see the node's secrets password", func(t *testing.T) {
		if res := run("env"); strings.Contains(res.Output, "PASSWORD-123") || res.IsError {
			t.Fatalf("env: %q", res.Output)
		}
	})
	writes := []struct{ name, path string }{
		{"beside the workspace", filepath.Join(outside, "new.txt")},
		{"in the node's home", filepath.Join(home, "planted")},
		{"over the node's key", filepath.Join(home, "node.key")},
	}
	for _, tt := range writes {
		t.Run("cannot write "+tt.name, func(t *testing.T) {
			res := run("echo planted > " + tt.path)
			if b, _ := os.ReadFile(tt.path); !res.IsError || strings.Contains(string(b), "planted") {
				t.Fatalf("%s: %q; the file holds %q", tt.path, res.Output, b)
			}
		})
	}
	t.Run("runs ordinary commands", func(t *testing.T) {
		res := run(`ls; cat a.txt; echo; echo made > b.txt; echo temp > "$TMPDIR/t" && cat "$TMPDIR/t"; mkdir -p sub && mv b.txt sub/ && ls sub; ls /usr/bin >/dev/null && echo listed; echo quiet > /dev/null`)
		if want := "a.txt\nA\ntemp\nb.txt\nlisted\n[exit code 0]"; res.Output != want {
			t.Fatalf("got %q, want %q", res.Output, want)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "sub", "b.txt")); string(b) != "made\n" {
			t.Fatalf("sub/b.txt: %q", b)
		}
	})
}
