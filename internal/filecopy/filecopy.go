// Package filecopy copies a file's bytes into a new file by the cheapest
// means its filesystem offers, and hashes them as it goes. It is the one
// place tern copies a whole file from disk to disk (an import of a capsule
// folder, the blobs of a snapshot); it never decides what is copied, and
// never makes a copy durable: the caller fsyncs. Its DirectWriter also
// writes the large blobs a node receives from its peers past the page
// cache.
package filecopy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Method is how Copy copied a file's bytes. Its string is what reports
// and JSON show.
type Method string

// The methods, as Methods lists them.
const (
	// Reflink: the copy shares the source's blocks (FICLONE, on XFS or
	// btrfs); no data block is written, and a later write to either
	// file is copied on write by the filesystem.
	Reflink Method = "reflink"
	// CopyFileRange: the kernel copied the bytes (copy_file_range); they
	// never passed through user space.
	CopyFileRange Method = "copy_file_range"
	// Direct: each part read into user space (for the hash) was written
	// from there with O_DIRECT, to the disk past the page cache; only
	// the file's last, partial block goes through it. The bytes are not
	// copied again within memory, and none are left for writeback at the
	// fsync: where the page cache is slow to take new pages (a virtual
	// machine's), it is the fastest of the writing methods, and Copy
	// prefers it to copy_file_range for a file of a part or more.
	Direct Method = "o_direct"
	// Plain: read into user space and written (the only way across
	// filesystems, or where neither of the others is offered).
	Plain Method = "copy"
)

// Methods are the methods, from the one that moves the fewest bytes.
var Methods = []Method{Reflink, CopyFileRange, Direct, Plain}

// Slower returns the later of two methods in Methods; "" (nothing copied)
// counts as faster than any.
func Slower(a, b Method) Method {
	if slices.Index(Methods, b) > slices.Index(Methods, a) {
		return b
	}
	return a
}

// ErrChanged means the source file was written, grew or shrank while it
// was copied: the copy and the hash cannot be trusted to agree, and the
// caller should try again once it has stopped changing.
var ErrChanged = errors.New("the file changed while it was copied")

// chunk is how much of the source is read (and hashed) at a time, and
// then copied by copy_file_range.
const chunk = 1 << 20

// Copy makes dst, a new empty file open for writing, hold the first size
// bytes of src, and writes to h every byte as read from src, in order (h
// is a hash: the caller checks it against what the bytes must be). The
// source is read once, for h; the copy is a reflink where the filesystem
// allows one, else (for a file of a part or more) an O_DIRECT write of
// each part just read, else a copy_file_range of it, else a plain write
// of it; it returns the method that copied the bytes. The
// source's size and its modification and change times are compared
// before and after: if they moved (someone wrote to it meanwhile), or src
// holds fewer than size bytes, the error wraps ErrChanged. On any error
// dst holds an unspecified part of the bytes: remove it. Copy reads and
// writes at explicit offsets: neither file's offset moves. It does not
// fsync or close either file. An empty file has no bytes to copy: its
// method is "". Copies of different files may run at once.
//
// A write that keeps the size is seen by the times it moves; a kernel
// whose timestamps are coarse may give a write in the same clock tick as
// the first stat the same times, and such a write goes unseen: the copy
// may then differ from the bytes hashed. Callers copy files no one is
// meant to write meanwhile (a capsule's blobs, never changed once
// written; a workspace while its agent's tools are held).
func Copy(dst, src *os.File, size int64, h io.Writer) (Method, error) {
	before, err := stampOf(src)
	if err != nil {
		return "", err
	}
	if before.size != size {
		return "", fmt.Errorf("%s: %w: it holds %d bytes, not %d", src.Name(), ErrChanged, before.size, size)
	}
	var m Method
	if size > 0 {
		m, err = copyFile(dst, src, size, h)
	}
	if err != nil {
		return "", err
	}
	after, err := stampOf(src)
	if err != nil {
		return "", err
	}
	if after != before {
		return "", fmt.Errorf("%s: %w", src.Name(), ErrChanged)
	}
	return m, nil
}

// The methods tried, in order (a test turns them off to force the next).
var (
	tryReflink       = true
	tryDirect        = true
	tryCopyFileRange = true
)

// readPart fills p with the bytes of src at off; a source that ends
// before is ErrChanged (it held size bytes when the copy began).
func readPart(src *os.File, off int64, p []byte, size int64) error {
	n, err := src.ReadAt(p, off)
	if n < len(p) {
		if err == io.EOF || err == nil {
			return fmt.Errorf("%s: %w: it ended at %d bytes of %d", src.Name(), ErrChanged, off+int64(n), size)
		}
		return err
	}
	return nil
}

// hashAll reads size bytes of src from its start into h.
func hashAll(src *os.File, size int64, h io.Writer) error {
	part := getPart()
	defer putPart(part)
	buf := *part
	for off := int64(0); off < size; off += chunk {
		p := buf[:min(chunk, size-off)]
		if err := readPart(src, off, p, size); err != nil {
			return err
		}
		h.Write(p)
	}
	return nil
}

// depth is how many parts read and hashed may wait for their write.
const depth = 4

// pipeline reads src from off to size a chunk at a time, writing each to
// h, on the calling goroutine, while write copies each part read on
// another: hashing and copying take a core each, as a tar through a pipe
// used to. It returns the first error of either; once write fails,
// reading stops.
func pipeline(src *os.File, size, off int64, h io.Writer, write func(off int64, p []byte) error) error {
	if off >= size {
		return nil
	}
	type part struct {
		off int64
		p   []byte
	}
	free := make(chan []byte, depth)
	for range depth {
		p := getPart()
		defer putPart(p)
		free <- *p
	}
	parts := make(chan part, depth)
	written := make(chan error, 1)
	var failed atomic.Bool
	go func() {
		var err error
		for pt := range parts {
			if err == nil {
				if err = write(pt.off, pt.p); err != nil {
					failed.Store(true)
				}
			}
			free <- pt.p[:cap(pt.p)]
		}
		written <- err
	}()
	var rerr error
	for ; off < size && !failed.Load(); off += chunk {
		p := (<-free)[:min(chunk, size-off)]
		if rerr = readPart(src, off, p, size); rerr != nil {
			break
		}
		h.Write(p)
		parts <- part{off, p}
	}
	close(parts)
	return errors.Join(rerr, <-written)
}

// alignment is what O_DIRECT asks of a write's buffer, offset and length
// (the page size; a disk's logical block is at most that).
const alignment = 4096

// spare holds buffers of a part (chunk bytes, aligned), so that copying
// a tree of small files neither allocates nor faults in a buffer a file.
var spare = sync.Pool{New: func() any { b := AlignedBuffer(chunk); return &b }}

func getPart() *[]byte  { return spare.Get().(*[]byte) }
func putPart(p *[]byte) { spare.Put(p) }

// AlignedBuffer returns n bytes starting at a multiple of alignment, as
// an O_DIRECT write of them asks (see DirectWriter).
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+alignment)
	skip := (alignment - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%alignment)) % alignment
	return b[skip : skip+n : skip+n]
}

// plain copies by reading and writing through user space.
func plain(dst, src *os.File, size int64, h io.Writer) (Method, error) {
	return Plain, pipeline(src, size, 0, h, func(off int64, p []byte) error {
		_, err := dst.WriteAt(p, off)
		return err
	})
}
