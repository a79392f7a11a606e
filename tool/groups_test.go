//go:build linux

package tool

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/procgroup"
	"github.com/tern-dev/tern/tool/mcptest"
)

// alive reports whether pid is a process that is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// pidIn reads the process id a command wrote into path, once it is there.
func pidIn(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, "the command writes "+filepath.Base(path), func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// The command runs only once its group is recorded: it finds the record,
// naming its own process group; the record is gone when the call returns.
func TestShellRecordsItsGroupBeforeTheCommandRuns(t *testing.T) {
	ws, _ := workspace(t, nil)
	dir := procgroup.Dir(filepath.Join(t.TempDir(), "processes"))
	tl, _ := Builtin("shell")
	res, err := tl.Run(context.Background(), Call{Workspace: ws, OperationID: "op_1", Processes: dir,
		Arguments: []byte(`{"command": "cat \"$REC\"; cut -d' ' -f5 /proc/$$/stat"}`), Env: []string{"REC=" + filepath.Join(string(dir), "op_1.json")}})
	if err != nil || res.IsError {
		t.Fatalf("%+v, %v", res, err)
	}
	lines := strings.Split(res.Output, "\n")
	var g procgroup.Group
	if err := json.Unmarshal([]byte(lines[0]), &g); err != nil || strconv.Itoa(g.PGID) != lines[1] || g.Start == 0 || g.Boot == "" {
		t.Fatalf("the record the command found: %q, %v; want its own group (%s) with a start and a boot", lines[0], err, lines[1])
	}
	if ents, _ := os.ReadDir(string(dir)); len(ents) != 0 {
		t.Fatalf("left after the call: %v", ents)
	}
}

// A group that cannot be recorded does not run the command: the shell
// exits at its gate, and the call is a Go error (nothing happened).
func TestShellRunsNothingItCannotRecord(t *testing.T) {
	ws, _ := workspace(t, nil)
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o644)
	tl, _ := Builtin("shell")
	res, err := tl.Run(context.Background(), Call{Workspace: ws, OperationID: "op_1", Processes: procgroup.Dir(filepath.Join(file, "processes")),
		Arguments: []byte(`{"command": "echo ran > ran.txt"}`)})
	if err == nil || !strings.Contains(err.Error(), "the command did not run") {
		t.Fatalf("%+v, %v; want a Go error saying the command did not run", res, err)
	}
	// Run returned after the shell exited, and its group with it.
	if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil {
		t.Fatal("the command ran")
	}
}

// envKilledNode makes this test binary a node that runs one shell call
// and is killed during it (TestAKilledNodesShellGroupDiesWithItAndItsRecordIsEnded).
const envKilledNode = "TERN_TEST_KILLED_NODE"

// A node killed with SIGKILL while a command runs: the group's leader gets
// its parent-death signal and kills the whole group, the command and what
// it started in the background; the record the node left is ended (there
// is nothing left of the group) and removed by the next run, before
// anything decides what became of the call.
func TestAKilledNodesShellGroupDiesWithItAndItsRecordIsEnded(t *testing.T) {
	if spec := os.Getenv(envKilledNode); spec != "" {
		ws, dir, _ := strings.Cut(spec, "|")
		tl, _ := Builtin("shell")
		tl.Run(context.Background(), Call{Workspace: ws, OperationID: "op_killed", Processes: procgroup.Dir(dir),
			Arguments: []byte(`{"command": "sleep 30 & echo $! > bg.pid; echo $$ > shell.pid; sleep 30"}`)})
		os.Exit(0)
	}
	ws, _ := workspace(t, nil)
	dir := procgroup.Dir(filepath.Join(t.TempDir(), "processes"))
	node := exec.Command(os.Args[0], "-test.run=^TestAKilledNodesShellGroupDiesWithItAndItsRecordIsEnded$")
	node.Env = append(os.Environ(), envKilledNode+"="+ws+"|"+string(dir))
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	bg := pidIn(t, filepath.Join(ws, "bg.pid"))
	shell := pidIn(t, filepath.Join(ws, "shell.pid"))
	t.Cleanup(func() { syscall.Kill(-shell, syscall.SIGKILL) })
	node.Process.Kill()
	node.Wait()

	// The group's leader gets its parent-death signal and ends the whole
	// group: the command's shell and what it started in the background.
	waitFor(t, "the command dies with its node, its background process included", func() bool { return !alive(shell) && !alive(bg) })
	if _, err := os.Stat(filepath.Join(string(dir), "op_killed.json")); err != nil {
		t.Fatalf("the killed node left no record of the group: %v", err)
	}
	// The next run's reconciliation, first of all: nothing is left to end,
	// and the record goes.
	if err := dir.End(context.Background(), "op_killed"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(string(dir), "op_killed.json")); err == nil {
		t.Fatal("the record stays after its group ended")
	}
}

// A stdio server's group is recorded while its connection is open, and
// ended, what the server started included, when the connection closes.
func TestAStdioServersGroupEndsWithItsConnection(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	dir := procgroup.Dir(filepath.Join(t.TempDir(), "processes"))
	// The server starts a helper of its own, as npx-launched servers do,
	// then becomes the test server in place.
	m := NewMCP(map[string]capsule.MCPServer{"local": {Command: "sh", Args: []string{"-c", `sleep 30 & echo $! > helper.pid; exec "$0"`, exe},
		Env: map[string]string{mcptest.EnvStdio: "1"}}}, MCPEnv{Workspace: ws, Processes: dir})
	defer m.Close()
	if _, states := m.Tools(context.Background()); len(states) != 1 || states[0].State != MCPConnected {
		t.Fatalf("states %+v", states)
	}
	helper := pidIn(t, filepath.Join(ws, "helper.pid"))
	t.Cleanup(func() { syscall.Kill(helper, syscall.SIGKILL) })
	ents, _ := os.ReadDir(string(dir))
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), "mcp_local_") {
		t.Fatalf("records while connected: %v", ents)
	}
	m.Close()
	if alive(helper) {
		t.Fatal("the server's helper runs after its connection closed")
	}
	if ents, _ := os.ReadDir(string(dir)); len(ents) != 0 {
		t.Fatalf("records after the close: %v", ents)
	}
}
