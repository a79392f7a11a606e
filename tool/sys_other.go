//go:build !unix

package tool

import "os/exec"

// nonblock: no such flag here.
const nonblock = 0

// ownGroup: no process groups here; cancelling the context kills the
// shell only.
func ownGroup(cmd *exec.Cmd) {}

// killGroup kills the shell, if it still runs.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	cmd.Process.Kill()
	return nil
}
