package filecopy

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// copyFile tries a reflink, then copy_file_range, then a plain copy.
func copyFile(dst, src *os.File, size int64, h io.Writer) (Method, error) {
	if tryReflink {
		// A failed FICLONE changes nothing: EOPNOTSUPP (ext4, tmpfs),
		// EXDEV (another filesystem), EINVAL and the rest all mean this
		// pair of files cannot share blocks; the next method says why if
		// copying fails too.
		if err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())); err == nil {
			buf := make([]byte, min(chunk, size))
			err := readChunks(src, size, buf, h, func(int64, []byte) error { return nil })
			return Reflink, err
		}
	}
	if !tryCopyFileRange {
		return plain(dst, src, size, h)
	}
	buf := make([]byte, min(chunk, size))
	m := CopyFileRange
	err := readChunks(src, size, buf, h, func(off int64, p []byte) error {
		if m == Plain {
			_, err := dst.WriteAt(p, off)
			return err
		}
		for done := 0; done < len(p); {
			roff, woff := off+int64(done), off+int64(done)
			n, err := unix.CopyFileRange(int(src.Fd()), &roff, int(dst.Fd()), &woff, len(p)-done, 0)
			if err != nil && off == 0 && done == 0 && unsupported(err) {
				m = Plain // nothing copied yet: this pair of files is copied through user space
				_, err := dst.WriteAt(p, off)
				return err
			}
			if err != nil {
				return fmt.Errorf("copy_file_range %s: %w", src.Name(), err)
			}
			if n == 0 {
				return fmt.Errorf("%s: %w: it ended at %d bytes of %d", src.Name(), ErrChanged, off+int64(done), size)
			}
			done += n
		}
		return nil
	})
	return m, err
}

// unsupported reports whether copy_file_range's error means it cannot
// copy between these two files (as Go's own os package reads them), not
// that copying failed.
func unsupported(err error) bool {
	for _, e := range []error{unix.ENOSYS, unix.EXDEV, unix.EINVAL, unix.EIO, unix.EOPNOTSUPP, unix.EPERM, unix.EBADF} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// stamp is what a file's stat says of its content: a write moves its
// change time, which no one but the kernel sets.
type stamp struct {
	size     int64
	mod, chg unix.Timespec
}

func stampOf(f *os.File) (stamp, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return stamp{}, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	return stamp{st.Size, st.Mtim, st.Ctim}, nil
}
