//go:build unix

package procgroup

import (
	"fmt"
	"syscall"
)

// killable refuses a group that cannot be one a node started: 0 and 1
// would signal this process's own group or every process, and this
// process's own group holds the node itself.
func killable(g Group) error {
	if g.PGID <= 1 || g.PGID == syscall.Getpgrp() {
		return fmt.Errorf("procgroup: refusing to kill process group %d: it is not a group this node started", g.PGID)
	}
	return nil
}
