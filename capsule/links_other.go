//go:build !unix

package capsule

import "io/fs"

// linkCount returns 1: the number of hard links is not read here.
func linkCount(fs.FileInfo) uint64 { return 1 }
