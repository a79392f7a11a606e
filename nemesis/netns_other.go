//go:build !linux

package nemesis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// Available says what this machine lacks to run the nemesis: it needs
// Linux network namespaces and TUN devices.
func Available() error {
	return fmt.Errorf("%w: it needs Linux (network namespaces and TUN devices), not %s", ErrUnavailable, runtime.GOOS)
}

type namespace struct {
	name string
	tun  *os.File
}

func makeNamespace(context.Context, string, string, string) (*namespace, error) {
	return nil, Available()
}

func (ns *namespace) remove() error { return nil }

func (ns *namespace) dial(context.Context, string, string) (net.Conn, error) {
	return nil, Available()
}

func childAttr() *syscall.SysProcAttr { return nil }

func spawn(cmd *exec.Cmd) error { return cmd.Start() }

// stopSignal and contSignal are never sent where the nemesis cannot run.
var stopSignal, contSignal os.Signal = os.Interrupt, os.Interrupt
