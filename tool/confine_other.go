//go:build !linux

package tool

import (
	"os/exec"

	"github.com/tern-dev/tern/internal/procgroup"
)

// landlockABI: Landlock is Linux's.
func landlockABI() int { return 0 }

// Confinement says, for a person, how this machine confines shell's
// commands: not at all here.
func Confinement() string {
	return "unconfined: Landlock exists only on Linux; a command runs with the node's rights"
}

// seclude does nothing here.
func seclude() {}

// startShell starts cmd unconfined.
func startShell(cmd *exec.Cmd, home, workspace string) (release func(), err error) {
	return func() {}, procgroup.Start(cmd)
}
