//go:build !unix

package procgroup

import (
	"context"
	"os/exec"
)

// records: no process groups here.
const records = false

// Prepare does nothing: this system has no process groups, and nothing
// kills a child when this process dies.
func Prepare(cmd *exec.Cmd) {}

// PrepareSupervisor does nothing, as Prepare.
func PrepareSupervisor(cmd *exec.Cmd) {}

// Spawn runs start.
func Spawn(start func() error) error { return start() }

// Of returns an empty group: there are none here.
func Of(pid int) (Group, error) { return Group{}, nil }

// end does nothing: the caller kills its child itself.
func end(ctx context.Context, g Group) error { return nil }
