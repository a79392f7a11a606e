//go:build unix

package tool

import (
	"os/exec"
	"syscall"
)

// nonblock opens a file without blocking: a named pipe with no writer
// would otherwise hang read_file's open.
const nonblock = syscall.O_NONBLOCK

// ownGroup starts cmd in a process group of its own, and makes cancelling
// its context kill the whole group: the shell and every child it started.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
}

// killGroup kills cmd's process group, whatever is left of it.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return nil
	}
	return err
}
