package capsule

import (
	"io/fs"
	"sync"
	"time"
)

// Seen remembers, for the files of a workspace, what their stat said when
// a snapshot last read them and what they hashed to, so that the next
// snapshot of the same folder takes a file whose stat says the same as
// unchanged without reading it, as git's index does. A file is
// remembered only if its last change was at least racyWindow before the
// snapshot began (coarseRacyWindow on a filesystem that keeps whole
// seconds): a later write then moves its change time past what is
// remembered, as the kernel's clock for file times ticks every few
// milliseconds, so a file written in the same tick as it was read is read
// again next time. Safe for
// concurrent use; a snapshot without one reads every file it might keep.
type Seen struct {
	mu    sync.Mutex
	files map[string]seenFile // by path, as the snapshot walked it
}

// NewSeen returns an empty Seen.
func NewSeen() *Seen { return &Seen{files: map[string]seenFile{}} }

// racyWindow is how long before a snapshot a file must have last changed
// for its stat to be remembered: ten times the coarsest tick of the
// kernel's clock for file times (10 ms at 100 Hz). coarseRacyWindow is
// that on a filesystem whose times are whole seconds (FAT keeps two). (A
// test shortens them.)
var (
	racyWindow       = 100 * time.Millisecond
	coarseRacyWindow = 3 * time.Second
)

// fileReread, if set (by a test), is called for each file a snapshot
// reads again to learn whether it changed.
var fileReread func()

// seenFile is a file's stat as a snapshot read it, and its hash.
type seenFile struct {
	stat   fileStat
	sha256 string
}

// fileStat is what a file's stat says of its content: a write changes its
// change time (which only the kernel sets), and a replacement its inode.
type fileStat struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // Unix nanoseconds
}

// unchanged returns the hash remembered of the file at path if its stat
// (info) says the same as when it was read.
func (s *Seen) unchanged(path string, info fs.FileInfo) (string, bool) {
	if s == nil {
		return "", false
	}
	st, ok := statOf(info)
	if !ok {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[path]
	return f.sha256, ok && f.stat == st
}

// next collects what one snapshot read, to replace what s remembers once
// it has stored every file (files it no longer has are forgotten).
type seenNext struct {
	began time.Time
	mu    sync.Mutex
	files map[string]seenFile
}

func (s *Seen) next(began time.Time) *seenNext {
	if s == nil {
		return nil
	}
	return &seenNext{began: began, files: map[string]seenFile{}}
}

// read records that the file at path, whose stat before it was read was
// info, hashed to sha256Hex, unless it changed within racyWindow of the
// snapshot's start.
func (n *seenNext) read(path string, info fs.FileInfo, sha256Hex string) {
	if n == nil {
		return
	}
	st, ok := statOf(info)
	window := racyWindow
	if st.ctime%1e9 == 0 && st.mtime%1e9 == 0 {
		window = coarseRacyWindow
	}
	limit := n.began.Add(-window).UnixNano()
	if !ok || st.ctime >= limit || st.mtime >= limit {
		return
	}
	n.mu.Lock()
	n.files[path] = seenFile{st, sha256Hex}
	n.mu.Unlock()
}

// keep makes what n read what s remembers.
func (s *Seen) keep(n *seenNext) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.files = n.files
	s.mu.Unlock()
}
