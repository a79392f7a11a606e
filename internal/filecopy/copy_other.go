//go:build !linux

package filecopy

import (
	"io"
	"os"
)

// copyFile copies through user space: neither reflinks nor
// copy_file_range are asked of this system.
func copyFile(dst, src *os.File, size int64, h io.Writer) (Method, error) {
	return plain(dst, src, size, h)
}

// stamp is what a file's stat says of its content.
type stamp struct {
	size int64
	mod  int64
}

func stampOf(f *os.File) (stamp, error) {
	st, err := f.Stat()
	if err != nil {
		return stamp{}, err
	}
	return stamp{st.Size(), st.ModTime().UnixNano()}, nil
}

// DirectWriter writes a file's parts through the page cache: O_DIRECT is
// asked of Linux only.
type DirectWriter struct{ f *os.File }

// StartDirect returns a writer of f's parts.
func StartDirect(f *os.File) *DirectWriter { return &DirectWriter{f} }

// WriteAt writes p at off.
func (d *DirectWriter) WriteAt(p []byte, off int64) (int, error) { return d.f.WriteAt(p, off) }

// End reports false: nothing was written with O_DIRECT.
func (d *DirectWriter) End() bool { return false }

// OpenFile is os.OpenFile.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
