package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tern-dev/tern/internal/procgroup"
)

// Shell's time limits.
const (
	ShellTimeout    = 60 * time.Second // when the call gives none
	MaxShellTimeout = 10 * time.Minute
)

var shellParams = []param{
	{name: "command", kind: "string", required: true, desc: "the command, run by sh -c in the workspace folder"},
	{name: "timeout_s", kind: "integer", min: 1, max: int64(MaxShellTimeout / time.Second), desc: "seconds before the command is killed (default 60, at most 600)"},
}

func shell() Tool {
	return Tool{
		Name: "shell",
		Description: "Run a shell command (sh -c) in the workspace folder. Standard output and standard error come back together, " +
			"with the exit code; at most 64 KiB (the start and the end of a longer output). The command is killed, " +
			"with everything it started, after timeout_s seconds, and processes it leaves in the background are killed when it exits.",
		Parameters: schema(shellParams),
		Effect:     AtMostOnce,
		Approval:   true,
		Run:        runShell,
	}
}

func runShell(ctx context.Context, call Call) (Result, error) {
	var a struct {
		Command  string `json:"command"`
		TimeoutS int64  `json:"timeout_s"`
	}
	if msg := parseArgs(call.Arguments, shellParams, &a); msg != "" {
		return failf("shell: %s", msg)
	}
	if strings.TrimSpace(a.Command) == "" {
		return failf("shell: field command is empty")
	}
	if call.OperationID == "" {
		return Result{}, errors.New("tool: shell: no operation id: an at-most-once call runs only after its operation.intent")
	}
	if fi, err := os.Stat(call.Workspace); err != nil || !fi.IsDir() {
		return Result{}, fmt.Errorf("tool: shell: the workspace %q is not a folder", call.Workspace)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	timeout := ShellTimeout
	if a.TimeoutS > 0 {
		timeout = time.Duration(a.TimeoutS) * time.Second
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cmd, gate, err := shellCommand(tctx, a.Command)
	if err != nil {
		return Result{}, fmt.Errorf("tool: shell: %w", err)
	}
	cmd.Dir = call.Workspace
	cmd.Env = append(commandEnv(os.Environ(), call.Workspace, os.TempDir(), call.Env), "TERN_OPERATION_ID="+call.OperationID)
	ownGroup(cmd)
	// One pipe for both streams, as a terminal shows them. It is an
	// *os.File, so Wait returns when the shell exits rather than when the
	// last process holding the pipe lets go.
	r, w, err := os.Pipe()
	if err != nil {
		closeFiles(append(cmd.ExtraFiles, gate)...)
		return Result{}, fmt.Errorf("tool: shell: %w", err)
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	release, err := startShell(cmd, call.Home, call.Workspace)
	w.Close()
	closeFiles(cmd.ExtraFiles...)
	if err != nil {
		closeFiles(gate)
		return Result{}, fmt.Errorf("tool: shell: %w", err)
	}
	defer release() // once the command's leader has exited: every way on waits for it
	// The command waits at its gate until its group is recorded: a node
	// killed from here on leaves a record, and its next start ends the
	// group before anything decides what became of the call.
	g, err := procgroup.Of(cmd.Process.Pid)
	if err == nil {
		err = call.Processes.Keep(call.OperationID, g)
	}
	if err != nil {
		closeFiles(gate) // the shell exits without running the command
		killGroup(cmd)
		cmd.Wait()
		return Result{}, fmt.Errorf("tool: shell: the command did not run: %w", err)
	}
	if gate != nil {
		gate.Write([]byte("\n")) // fails only if the shell was killed: Wait says so
		gate.Close()
	}
	out := &capBuffer{half: OutputCap / 2}
	copied := make(chan struct{})
	go func() {
		io.Copy(out, r)
		close(copied)
	}()
	cmd.Wait()
	// What the command left running in the background goes with it, and
	// is gone before this returns: an effect must be over when its
	// outcome is written. SIGKILLed processes go at once, unless one is
	// stuck in the kernel; then the call's effect is uncertain, and its
	// record stays for the reconciliation to end the group first.
	ectx, endCancel := context.WithTimeout(context.WithoutCancel(ctx), groupEndWait)
	err = endGroup(ectx, cmd, g)
	endCancel()
	if err != nil {
		return Result{}, fmt.Errorf("tool: shell: the command's processes could not be ended: %w: %w", err, ErrUncertain)
	}
	call.Processes.Drop(call.OperationID)
	select {
	case <-copied:
	case <-time.After(time.Second):
		// A process that left the group (setsid) still holds the pipe.
		r.Close()
		<-copied
	}

	ps := cmd.ProcessState
	var status string
	switch {
	case !ps.Exited() && ctx.Err() != nil:
		status = "[cancelled: the command and everything it started were killed]"
	case !ps.Exited() && tctx.Err() != nil:
		status = fmt.Sprintf("[timed out after %s: the command and everything it started were killed]", timeout)
	case !ps.Exited():
		status = fmt.Sprintf("[killed: %s]", ps)
	default:
		status = fmt.Sprintf("[exit code %d]", ps.ExitCode())
	}
	text, cut := out.text()
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return Result{Output: text + status, IsError: !ps.Success(), Cut: cut}, nil
}

// groupEndWait bounds how long shell waits for the processes of its
// command's group to be gone after SIGKILL.
const groupEndWait = 10 * time.Second

// closeFiles closes each file that is not nil.
func closeFiles(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// capBuffer keeps the first half bytes written to it and the last half,
// counting what falls between.
type capBuffer struct {
	half       int
	head, tail []byte
	total      int64
}

func (b *capBuffer) Write(p []byte) (int, error) {
	written := len(p)
	b.total += int64(written)
	if room := b.half - len(b.head); room > 0 {
		n := min(room, len(p))
		b.head = append(b.head, p[:n]...)
		p = p[n:]
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > 2*b.half {
		b.tail = append([]byte(nil), b.tail[len(b.tail)-b.half:]...)
	}
	return written, nil
}

// text returns what was kept, valid UTF-8, with a note where bytes were
// left out; and whether any were.
func (b *capBuffer) text() (string, bool) {
	tail := b.tail
	if len(tail) > b.half {
		tail = tail[len(tail)-b.half:]
	}
	head := strings.ToValidUTF8(string(b.head), "\uFFFD")
	dropped := b.total - int64(len(b.head)) - int64(len(tail))
	if dropped == 0 {
		return strings.ToValidUTF8(string(b.head)+string(tail), "\uFFFD"), false
	}
	return fmt.Sprintf("%s\n[cut: %d bytes of output left out here; the first %d and the last %d bytes are shown]\n%s",
		head, dropped, len(b.head), len(tail), strings.ToValidUTF8(string(tail), "\uFFFD")), true
}
