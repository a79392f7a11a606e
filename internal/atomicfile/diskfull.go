package atomicfile

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrDiskFull is what a write to a full disk fails with once DiskFull has
// said so (match it with errors.Is); the error names the file's disk and
// says the writer retries.
var ErrDiskFull = errors.New("the disk is full")

// DiskFull says, of a write to path that failed because its disk is
// full, what is wrong and what to do; any other error it returns as it is.
func DiskFull(path string, err error) error {
	if err == nil || !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	return &diskFullError{path: path, err: err}
}

// diskFullError is a write that failed because the disk holding path has
// no space left.
type diskFullError struct {
	path string
	err  error
}

func (e *diskFullError) Error() string {
	return fmt.Sprintf("the disk holding %s is full: free some space there; the node retries on its own", e.path)
}
func (e *diskFullError) Is(target error) bool { return target == ErrDiskFull }
func (e *diskFullError) Unwrap() error        { return e.err }
