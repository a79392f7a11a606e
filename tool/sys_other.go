//go:build !unix

package tool

import (
	"context"
	"os"
	"os/exec"

	"github.com/tern-dev/tern/internal/procgroup"
)

// nonblock: no such flag here.
const nonblock = 0

// shellCommand is sh -c command; there is no gate here (gate is nil).
func shellCommand(ctx context.Context, command string) (*exec.Cmd, *os.File, error) {
	return exec.CommandContext(ctx, "sh", "-c", command), nil, nil
}

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

// endGroup kills the shell, if it still runs.
func endGroup(ctx context.Context, cmd *exec.Cmd, g procgroup.Group) error {
	return killGroup(cmd)
}
