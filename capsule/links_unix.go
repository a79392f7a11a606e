//go:build unix

package capsule

import (
	"io/fs"
	"syscall"
)

// linkCount returns how many names (hard links) the file has.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
