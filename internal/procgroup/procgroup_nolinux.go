//go:build unix && !linux

package procgroup

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
)

// records: none here; without /proc a recorded group cannot be told apart
// from a later one with the same id.
const records = false

// Prepare makes cmd lead a process group of its own. Nothing kills it when
// this process dies: this system has no parent-death signal.
func Prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// PrepareSupervisor is Prepare: no signal tells the leader this process
// died.
func PrepareSupervisor(cmd *exec.Cmd) { Prepare(cmd) }

// Spawn runs start.
func Spawn(start func() error) error { return start() }

// Of returns the group pid leads.
func Of(pid int) (Group, error) { return Group{PGID: pid}, nil }

// end signals the group once: without /proc its processes cannot be
// listed, so it does not wait for them.
func end(ctx context.Context, g Group) error {
	if err := killable(g); err != nil {
		return err
	}
	if err := syscall.Kill(-g.PGID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
