//go:build linux

package node

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/procgroup"
	"github.com/tern-dev/tern/tool"
	"github.com/tern-dev/tern/turns"
)

// leftGroup makes what a node killed during a shell call leaves behind: a
// process group whose leader is gone and whose child sleeps on, recorded
// in home's processes folder under name. It returns the child's id.
func leftGroup(t *testing.T, home, name string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 30 & echo $!; read hold")
	procgroup.Prepare(cmd)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := procgroup.Start(cmd); err != nil {
		t.Fatal(err)
	}
	g, err := procgroup.Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("no child's id in %q", line)
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	if err := procgroup.Dir(filepath.Join(home, turns.ProcessesDir)).Keep(name, g); err != nil {
		t.Fatal(err)
	}
	in.Close()
	cmd.Wait()
	if !alive(child) {
		t.Fatal("the left group's child is not running")
	}
	return child
}

// alive reports whether pid is a process that is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// An operation without outcome whose record names a group that still has
// a process: the runtime ends the group before it asks a person whether
// the call took effect.
func TestAReconcileActionIsAskedOnlyOnceTheCallsGroupIsGone(t *testing.T) {
	n := startNode(t, t.TempDir())
	agent := heldBy(t, n, func(dir string) {
		a := capsule.DefaultAgent("mover")
		a.Tools = tool.Defaults()
		for i := range a.Tools {
			if a.Tools[i].Name == "shell" {
				no := false
				a.Tools[i].Approval = &no
			}
		}
		b, _ := a.Encode()
		acceptEdit(t, n, dir, capsule.AgentFile, string(b))
	})
	sessionID := newSession(t, n, agent)
	_, turn := startTurn(t, n, sessionID, map[string]any{"text": "!call shell {\"command\": \"echo ran > ran.txt; sleep 30\"}"})
	turnID := turn["id"].(string)
	records := filepath.Join(n.home, turns.ProcessesDir)
	var opID string
	eventually(t, "the command runs, recorded", func() bool {
		ents, _ := os.ReadDir(records)
		_, err := os.Stat(filepath.Join(n.home, WorkspacesDir, agent, "ran.txt"))
		if len(ents) == 1 && err == nil {
			opID = strings.TrimSuffix(ents[0].Name(), ".json")
			return true
		}
		return false
	})
	// Cancelling leaves the intent without outcome, as a kill -9 does;
	// the group a kill -9 would leave is made here.
	var ti api.TurnInfo
	if code := callAPI(t, n, "POST", "/v1/sessions/"+sessionID+"/turns/"+turnID+"/cancel", nil, &ti); code != 200 {
		t.Fatalf("cancel: %d %+v", code, ti)
	}
	child := leftGroup(t, n.home, opID)

	_, next := startTurn(t, n, sessionID, map[string]any{"text": "go on"})
	follow(t, n, sessionID, next["id"].(string), -1, nil)
	ti = getTurn(t, n, sessionID, next["id"].(string))
	if ti.Status != "paused" || len(ti.RequiredActions) != 1 || ti.RequiredActions[0].Kind != "reconcile" || ti.RequiredActions[0].Operation != opID {
		t.Fatalf("the next turn: %+v", ti)
	}
	if alive(child) {
		t.Fatalf("process %d of the call's group runs while the turn asks whether the call took effect", child)
	}
	if _, err := os.Stat(filepath.Join(records, opID+".json")); err == nil {
		t.Fatal("the record stays after its group ended")
	}
}

// A node's start ends the groups an earlier run of it left running (a
// stdio server's, which no operation names), before it runs anything.
func TestANodesStartEndsTheGroupsAnEarlierRunLeft(t *testing.T) {
	home := t.TempDir()
	child := leftGroup(t, home, "mcp_files_0a1b2c3d")
	startNode(t, home)
	if alive(child) {
		t.Fatalf("process %d of a group the earlier run left runs after the node started", child)
	}
	if ents, _ := os.ReadDir(filepath.Join(home, turns.ProcessesDir)); len(ents) != 0 {
		t.Fatalf("records after the start: %v", ents)
	}
}
