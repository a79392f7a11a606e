//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/tool/mcptest"
)

// groupMembers returns the processes of process group pgid that are not
// zombies.
func groupMembers(pgid int) []int {
	names, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" || f[2] != strconv.Itoa(pgid) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(name)))
		out = append(out, pid)
	}
	return out
}

// running reports whether pid is a process that is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// pidFile waits for a process to write its id into path and returns it.
func pidFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	eventually(t, 20*time.Second, func() error {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return fmt.Errorf("nothing wrote a process id into %s", path)
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err
	})
	return pid
}

// A kill -9 of the node while an approved shell command waits before its
// effect: when the restarted node offers the reconcile action, no process
// of the command is left, and the effect never happens, so the answer a
// person gives then ("it did not happen") stays true.
func TestAKilledNodesCommandIsGoneWhenReconcileIsAsked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills a daemon")
	}
	d := &daemon{t: t, home: t.TempDir(), port: freePort(t)}
	d.start()
	defer d.kill()
	id := importAgent(t, d.home, nil) // shell needs approval
	ws := filepath.Join(d.home, node.WorkspacesDir, id)
	// The group's id (the leader's pid), then the effect in a subshell, as
	// commands start processes of their own. The subshell holds a fifo
	// open and waits to read a line that no one writes: only a process of
	// the command that is still there keeps a writer able to open it.
	fifo := filepath.Join(t.TempDir(), "effect")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	command := fmt.Sprintf("cut -d' ' -f5 /proc/$$/stat > started; (exec 3<>%q; echo > waiting; read x <&3; echo x > marker); echo after", fifo)
	code, _, errs := ternQuiet(d.home, "turn", id, fmt.Sprintf("!call shell {\"command\": %q}", command))
	if code != 0 || !strings.Contains(errs, "paused") {
		t.Fatalf("turn: exit %d %q", code, errs)
	}
	ids := pendingIDs(t, d.home)
	if len(ids) != 1 {
		t.Fatalf("pending %v", ids)
	}
	approve := ternProcess(d.home, "", "approve", ids[0])
	var approveErr strings.Builder
	approve.Stderr = &approveErr
	if err := approve.Start(); err != nil {
		t.Fatal(err)
	}
	defer approve.Process.Kill()

	pgid := pidFile(t, filepath.Join(ws, "started"))
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	eventually(t, 20*time.Second, func() error {
		if _, err := os.Stat(filepath.Join(ws, "waiting")); err != nil {
			return fmt.Errorf("the command's subshell does not wait for its effect: %v", err)
		}
		return nil
	})
	d.kill()
	// While the node is down, the whole group dies with it: the subshell
	// that would write the marker included.
	eventually(t, 20*time.Second, func() error {
		if left := groupMembers(pgid); len(left) > 0 {
			return fmt.Errorf("processes %v of the command's group %d run on while the node is down", left, pgid)
		}
		return nil
	})
	d.start()

	var pending []api.PendingAction
	eventually(t, 30*time.Second, func() error {
		json.Unmarshal([]byte(mustTern(t, d.home, "", "actions", "--json")), &pending)
		if len(pending) == 1 && pending[0].Kind == "reconcile" {
			return nil
		}
		return fmt.Errorf("no reconcile action after the restart: %+v", pending)
	})
	if left := groupMembers(pgid); len(left) > 0 {
		t.Fatalf("the reconcile action is offered while processes %v of the command's group %d run", left, pgid)
	}
	// Nothing of the group runs, so nothing can write the marker: the
	// check above is the test. This one confirms it without a clock: a
	// writer can open the fifo only while a process holds it open for
	// reading, as the subshell did until the kill.
	if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
		t.Fatal("a process of the command still waits to do its effect after the reconcile action was offered")
	} else if !errors.Is(err, syscall.ENXIO) {
		t.Fatalf("opening the fifo to see whether the command still waits on it: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "marker")); err == nil {
		t.Fatal("the command's effect happened")
	}

	// "It did not happen" is true, and the turn goes on.
	code, out, errs := ternQuiet(d.home, "deny", pending[0].ID)
	if code != 0 || !strings.Contains(out, "did not take effect") {
		t.Fatalf("answering the reconcile action: exit %d %q %q", code, out, errs)
	}
	if err := approve.Wait(); err != nil || !strings.Contains(approveErr.String(), "act_reconcile_") {
		t.Fatalf("tern approve across the restart: %v, stderr %q", err, approveErr.String())
	}
}

// A stdio MCP server dies with its node's kill -9, and what it started in
// the background is ended by the node's next start.
func TestAStdioMCPServerDiesWithItsKilledNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills a daemon")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, home: t.TempDir(), port: freePort(t)}
	d.start()
	defer d.kill()
	// The server is a shell that starts a helper in the background, then
	// serves (this test binary as the test server) and would linger after.
	script := `echo $$ > server.pid; sleep 600 & echo $! > helper.pid; "$0"; sleep 600`
	id := importAgent(t, d.home, func(a map[string]any) {
		a["mcp_servers"] = map[string]any{"local": map[string]any{"command": "sh", "args": []string{"-c", script, exe},
			"env": map[string]string{mcptest.EnvStdio: "1"}}}
	})
	code, out, errs := ternQuiet(d.home, "mcp", "list", id, "--json")
	if code != 0 || !strings.Contains(out, `"state":"connected"`) && !strings.Contains(out, `"state": "connected"`) {
		t.Fatalf("mcp list: exit %d %q %q", code, out, errs)
	}
	ws := filepath.Join(d.home, node.WorkspacesDir, id)
	server := pidFile(t, filepath.Join(ws, "server.pid"))
	helper := pidFile(t, filepath.Join(ws, "helper.pid"))
	t.Cleanup(func() {
		syscall.Kill(-server, syscall.SIGKILL) // the server leads its group
		syscall.Kill(helper, syscall.SIGKILL)
	})

	d.kill()
	eventually(t, 20*time.Second, func() error {
		if running(server) {
			return fmt.Errorf("the MCP server %d still runs after its node was killed", server)
		}
		return nil
	})
	d.start() // returns once the API answers: after the start ended what was left
	if running(helper) {
		t.Fatalf("the MCP server's helper %d runs after its node started again", helper)
	}
}
