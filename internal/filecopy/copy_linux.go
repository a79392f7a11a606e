package filecopy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// copyFile tries a reflink, then O_DIRECT writes, then copy_file_range,
// then a plain copy.
func copyFile(dst, src *os.File, size int64, h io.Writer) (Method, error) {
	if tryReflink {
		// A failed FICLONE changes nothing: EOPNOTSUPP (ext4, tmpfs),
		// EXDEV (another filesystem), EINVAL and the rest all mean this
		// pair of files cannot share blocks; the next method says why if
		// copying fails too.
		if err := unix.IoctlFileClone(int(dst.Fd()), int(src.Fd())); err == nil {
			return Reflink, hashAll(src, size, h)
		}
	}
	if tryDirect && size >= chunk {
		if d := StartDirect(dst); d.on {
			err := pipeline(src, size, 0, h, func(off int64, p []byte) error {
				_, err := d.WriteAt(p, off)
				return err
			})
			direct := d.End()
			if err != nil {
				return "", err
			}
			if !direct {
				return Plain, nil
			}
			return Direct, nil
		}
	}
	if !tryCopyFileRange {
		return plain(dst, src, size, h)
	}
	// The first part tells whether the kernel copies between these two
	// files; if it does, the rest is copied by it while this goroutine
	// reads and hashes what follows.
	first := min(chunk, size)
	part := getPart()
	defer putPart(part)
	buf := (*part)[:first]
	if err := readPart(src, 0, buf, size); err != nil {
		return "", err
	}
	h.Write(buf)
	n, err := copyRange(dst, src, 0, first, size)
	if n == 0 && err != nil && unsupported(err) {
		// Nothing copied: this pair of files is copied through user space.
		if _, err := dst.WriteAt(buf, 0); err != nil {
			return "", err
		}
		return Plain, pipeline(src, size, first, h, func(off int64, p []byte) error {
			_, err := dst.WriteAt(p, off)
			return err
		})
	}
	if err != nil {
		return "", err
	}
	return CopyFileRange, pipeline(src, size, first, h, func(off int64, p []byte) error {
		_, err := copyRange(dst, src, off, int64(len(p)), size)
		return err
	})
}

// DirectWriter writes a file's parts with O_DIRECT, past the page cache,
// while each is whole blocks at a block offset and the filesystem takes
// them so; any other part, and every part after it, goes through the page
// cache (see Direct). It is an io.WriterAt for one goroutine.
type DirectWriter struct {
	f              *os.File
	flags          int  // the file's status flags before O_DIRECT
	on             bool // O_DIRECT is set
	direct, cached int64
}

// StartDirect sets O_DIRECT on f, a file open for writing, if its
// filesystem takes it; either way, the returned writer writes f's parts.
// End must follow the last.
func StartDirect(f *os.File) *DirectWriter {
	d := &DirectWriter{f: f}
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		return d
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFL, flags|unix.O_DIRECT); err != nil {
		return d // EINVAL: this filesystem writes through its cache only
	}
	d.flags, d.on = flags, true
	return d
}

// WriteAt writes p at off: its whole blocks with O_DIRECT if off is a
// block offset and p aligned in memory (see AlignedBuffer), the rest
// through the page cache, as is every part after it; a direct write the
// filesystem refuses (EINVAL: blocks larger than alignment) is written
// through the page cache, as is the rest.
func (d *DirectWriter) WriteAt(p []byte, off int64) (int, error) {
	if d.on && (off%alignment != 0 || uintptr(unsafe.Pointer(unsafe.SliceData(p)))%alignment != 0) {
		d.off()
	}
	done := 0
	if whole := len(p) &^ (alignment - 1); d.on && whole > 0 {
		n, err := d.f.WriteAt(p[:whole], off)
		if !errors.Is(err, unix.EINVAL) {
			d.direct += int64(n)
			if err != nil {
				return n, err
			}
			done = n
		}
	}
	if done == len(p) {
		return done, nil
	}
	d.off()
	n, err := d.f.WriteAt(p[done:], off+int64(done))
	d.cached += int64(n)
	return done + n, err
}

// off clears O_DIRECT: later writes go through the page cache.
func (d *DirectWriter) off() {
	if d.on {
		unix.FcntlInt(d.f.Fd(), unix.F_SETFL, d.flags)
		d.on = false
	}
}

// End restores the file's status flags, and reports whether its bytes
// were written with O_DIRECT, but for less than a block (a file's last,
// partial one).
func (d *DirectWriter) End() bool {
	d.off()
	return d.direct > 0 && d.cached < alignment
}

// copyRange copies n bytes of src at off to dst at off by copy_file_range,
// and returns how many it copied.
func copyRange(dst, src *os.File, off, n, size int64) (int64, error) {
	for done := int64(0); done < n; {
		roff, woff := off+done, off+done
		c, err := unix.CopyFileRange(int(src.Fd()), &roff, int(dst.Fd()), &woff, int(n-done), 0)
		if err != nil {
			return done, fmt.Errorf("copy_file_range %s: %w", src.Name(), err)
		}
		if c == 0 {
			return done, fmt.Errorf("%s: %w: it ended at %d bytes of %d", src.Name(), ErrChanged, off+done, size)
		}
		done += int64(c)
	}
	return n, nil
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

// OpenFile is os.OpenFile for a regular file, without offering the file
// to the runtime's poller: on Linux os.OpenFile does (a regular file
// cannot be polled; finding that out sets and clears O_NONBLOCK), four
// system calls more a file, which a tree of 10,000 small files copied
// pays 20,000 times. The file is opened close-on-exec, as os's are.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	for {
		fd, err := unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}
