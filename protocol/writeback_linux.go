package protocol

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing the file's bytes in
// [off, off+n) to disk now, without waiting for it, so that the fsync at
// the end of a transfer finds little left to write. It is only a hint:
// an error changes nothing the fsync does not check.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
