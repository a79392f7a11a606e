//go:build unix

package tool

import (
	"context"
	"os"
	"os/exec"
	"syscall"

	"github.com/tern-dev/tern/internal/procgroup"
)

// nonblock opens a file without blocking: a named pipe with no writer
// would otherwise hang read_file's open.
const nonblock = syscall.O_NONBLOCK

// gatedShell is the script shell runs as the leader of the call's group:
// it waits for a line on fd 3, the gate, and only then runs sh -c COMMAND
// (COMMAND being its $1) and exits with its status; if the gate closes
// without a line, it exits without running COMMAND. It supervises the
// group: the signal it gets when the node dies (SIGTERM, procgroup.
// PrepareSupervisor) makes it kill the whole group, so nothing the command
// started outlives the node, a kill -9 of it included.
const gatedShell = `IFS= read -r go <&3 || exit 125
exec 3<&-
trap 'kill -KILL 0' TERM
sh -c "$1" &
wait $!`

// shellCommand is sh -c command held at a gate: write a line to gate to
// let it run, or close gate to end it unrun. The caller closes
// cmd.ExtraFiles after starting it.
func shellCommand(ctx context.Context, command string) (cmd *exec.Cmd, gate *os.File, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd = exec.CommandContext(ctx, "sh", "-c", gatedShell, "sh", command)
	cmd.ExtraFiles = []*os.File{r}
	return cmd, w, nil
}

// ownGroup starts cmd in a process group of its own (on Linux, one that
// dies with this process: procgroup.Prepare), and makes cancelling its
// context kill the whole group: the shell and every child it started.
func ownGroup(cmd *exec.Cmd) {
	procgroup.PrepareSupervisor(cmd)
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

// endGroup ends g, cmd's group, and waits until none of it is left
// (procgroup.End).
func endGroup(ctx context.Context, cmd *exec.Cmd, g procgroup.Group) error {
	return procgroup.End(ctx, g)
}
