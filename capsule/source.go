package capsule

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tern-dev/tern/internal/filecopy"
)

// source is where a capsule's files are read from: a folder or a tar.
type source interface {
	// open returns the named file's content and size.
	open(name string) (io.ReadCloser, int64, error)
	// list returns every regular file's capsule-relative name, sorted.
	list() ([]string, error)
	close() error
}

// dirSource reads a capsule folder.
type dirSource struct{ dir string }

// errNotRegular marks a capsule file that is a link, a device or another
// non-regular file: damage, never followed.
var errNotRegular = errors.New("not a regular file")

func (s dirSource) open(name string) (io.ReadCloser, int64, error) {
	p := filepath.Join(s.dir, filepath.FromSlash(name))
	if st, err := os.Lstat(p); err != nil {
		return nil, 0, err
	} else if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is a %s: %w", name, kindOf(st.Mode()), errNotRegular)
	}
	f, err := filecopy.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() { // replaced since the Lstat
		f.Close()
		return nil, 0, fmt.Errorf("%s: %w", name, errNotRegular)
	}
	return f, st.Size(), nil
}

// list returns the capsule-relative names of the folder's regular files,
// without asking how many names each has (scan does).
func (s dirSource) list() ([]string, error) {
	names, _, err := s.walk(false)
	return names, err
}

// scan walks the folder. It returns the names of its regular files and a
// problem for everything else capsule v1 forbids in a folder: a link of
// any kind (symbolic, or a file with more than one name), a device, a
// pipe or a socket, and a folder outside the layout. A symbolic link is
// never followed.
func (s dirSource) scan() (regular []string, forbidden []Problem, err error) {
	return s.walk(true)
}

// walk is scan; it stats each regular file for its count of names only
// if links.
func (s dirSource) walk(links bool) (regular []string, forbidden []Problem, err error) {
	var visit func(dir, prefix string) error
	visit = func(dir, prefix string) error {
		f, err := os.Open(dir)
		if err != nil {
			return err
		}
		entries, err := f.ReadDir(-1) // unsorted: the names are sorted once, at the end
		f.Close()
		if err != nil {
			return err
		}
		for _, d := range entries {
			name := prefix + d.Name()
			switch {
			case d.IsDir():
				if !isLayoutDir(name) {
					forbidden = append(forbidden, Problem{name + "/", fmt.Errorf("folder is not part of capsule v1 (it holds only %s)", strings.Join(dirs, "/, ")+"/")})
				}
				if err := visit(filepath.Join(dir, d.Name()), name+"/"); err != nil {
					return err
				}
				continue
			case d.Type()&fs.ModeSymlink != 0:
				forbidden = append(forbidden, Problem{name, fmt.Errorf("symbolic link: a capsule holds only regular files (replace it with the file itself)")})
				continue
			case !d.Type().IsRegular():
				forbidden = append(forbidden, Problem{name, fmt.Errorf("%s: a capsule holds only regular files", kindOf(d.Type()))})
				continue
			}
			if links {
				info, err := d.Info()
				if err != nil {
					return err
				}
				if n := linkCount(info); n > 1 {
					forbidden = append(forbidden, Problem{name, fmt.Errorf("hard link (the file has %d names): a capsule's files must be its own; copy the capsule with cp -r, not cp -l", n)})
					continue
				}
			}
			regular = append(regular, name)
		}
		return nil
	}
	err = visit(s.dir, "")
	sort.Strings(regular)
	sort.Slice(forbidden, func(i, j int) bool { return forbidden[i].File < forbidden[j].File })
	return regular, forbidden, err
}

func (dirSource) close() error { return nil }

// Limits bound what a tar may hold. The zero value means DefaultLimits.
type Limits struct {
	MaxFileSize  int64 // largest single file
	MaxTotalSize int64 // all files together
	MaxEntries   int   // number of tar entries
}

// DefaultLimits are generous for real agents and small enough to stop a
// tar bomb before it fills a disk.
var DefaultLimits = Limits{MaxFileSize: 16 << 30, MaxTotalSize: 64 << 30, MaxEntries: 1 << 20}

func (l Limits) orDefault() Limits {
	if l.MaxFileSize <= 0 {
		l.MaxFileSize = DefaultLimits.MaxFileSize
	}
	if l.MaxTotalSize <= 0 {
		l.MaxTotalSize = DefaultLimits.MaxTotalSize
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultLimits.MaxEntries
	}
	return l
}

// ErrUnsafeTar marks a tar refused before any of its content is trusted.
var ErrUnsafeTar = errors.New("unsafe or malformed capsule tar")

// tarSource reads a capsule tar in place, through an index of its entries.
type tarSource struct {
	f       *os.File
	entries map[string]tarEntry
}

type tarEntry struct{ offset, size int64 }

// tarBlock is the tar format's block size: every archive is a whole number
// of blocks.
const tarBlock = 512

// openTar indexes a tar file, refusing everything capsule v1 never holds:
// paths that are absolute, unclean or escape, links, devices, duplicate
// entries, names outside the layout, files over the limits, a truncated or
// malformed archive. Errors wrap ErrUnsafeTar and name the entry.
func openTar(path string, lim Limits) (*tarSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	idx, err := indexTar(f, lim)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &tarSource{f: f, entries: idx}, nil
}

// posReader tracks the offset of an os.File so that, right after
// tar.Reader.Next, it is the offset of the entry's data.
type posReader struct {
	r   io.ReadSeeker
	pos int64
}

func (p *posReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.pos += int64(n)
	return n, err
}

func (p *posReader) Seek(off int64, whence int) (int64, error) {
	n, err := p.r.Seek(off, whence)
	if err == nil {
		p.pos = n
	}
	return n, err
}

func indexTar(r io.ReadSeeker, lim Limits) (map[string]tarEntry, error) {
	lim = lim.orDefault()
	pr := &posReader{r: r}
	tr := tar.NewReader(pr)
	entries := map[string]tarEntry{}
	seen := map[string]bool{}
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%w: the tar is truncated after %d entries", ErrUnsafeTar, n)
			}
			return nil, fmt.Errorf("%w: after %d entries: %v", ErrUnsafeTar, n, err)
		}
		name, err := checkTarEntry(hdr, n, seen, &total, lim)
		if err != nil {
			return nil, err
		}
		if name == "" {
			continue // a layout folder
		}
		entries[name] = tarEntry{offset: pr.pos, size: hdr.Size}
	}
	// The archive must really hold every entry's bytes: a tar cut inside the
	// last file's data is truncated even if the reader stopped early.
	end, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, err
	}
	// A cut inside an entry's padding leaves its data whole, and the
	// reader, seeking over the padding, would see a shorter archive.
	if end%tarBlock != 0 {
		return nil, fmt.Errorf("%w: the tar is truncated: %d bytes is not a whole number of %d-byte blocks", ErrUnsafeTar, end, tarBlock)
	}
	for name, e := range entries {
		if e.offset+e.size > end {
			return nil, fmt.Errorf("%w: the tar is truncated inside %q", ErrUnsafeTar, name)
		}
	}
	return entries, nil
}

// checkTarEntry checks the n-th header of a capsule tar (counting from 0)
// against what capsule v1 may hold, given the entries seen before it and
// their total size so far, which it updates. It returns the entry's
// capsule-relative name, or "" for a layout folder (nothing to extract).
// Errors wrap ErrUnsafeTar and name the entry.
func checkTarEntry(hdr *tar.Header, n int, seen map[string]bool, total *int64, lim Limits) (string, error) {
	if n >= lim.MaxEntries {
		return "", fmt.Errorf("%w: more than %d entries", ErrUnsafeTar, lim.MaxEntries)
	}
	name := strings.TrimPrefix(hdr.Name, "./")
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: entry %q: %s", ErrUnsafeTar, hdr.Name, fmt.Sprintf(format, args...))
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		dir := strings.TrimSuffix(name, "/")
		if dir == "" || dir == "." {
			return "", nil
		}
		if !isLayoutDir(dir) {
			return "", bad("folder is not part of capsule v1")
		}
		if seen[dir+"/"] {
			return "", bad("duplicate entry")
		}
		seen[dir+"/"] = true
		return "", nil
	case tar.TypeReg:
	case tar.TypeSymlink:
		return "", bad("symbolic links are not allowed in a capsule")
	case tar.TypeLink:
		return "", bad("hard links are not allowed in a capsule")
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return "", bad("devices and pipes are not allowed in a capsule")
	default:
		return "", bad("entry type %q is not allowed in a capsule", hdr.Typeflag)
	}
	if name != ManifestFile {
		if err := checkName(name); err != nil {
			return "", bad("%v", err)
		}
	}
	if seen[name] {
		return "", bad("duplicate entry")
	}
	seen[name] = true
	if name == ManifestFile && hdr.Size > MaxManifestSize {
		return "", bad("manifest is %d bytes, over the limit of %d", hdr.Size, MaxManifestSize)
	}
	if hdr.Size > lim.MaxFileSize {
		return "", bad("%d bytes, over the file size limit of %d", hdr.Size, lim.MaxFileSize)
	}
	if *total += hdr.Size; *total > lim.MaxTotalSize {
		return "", bad("the tar's files exceed the total size limit of %d bytes", lim.MaxTotalSize)
	}
	return name, nil
}

func isLayoutDir(name string) bool {
	for _, d := range dirs {
		if d == name {
			return true
		}
	}
	return false
}

func (s *tarSource) open(name string) (io.ReadCloser, int64, error) {
	e, ok := s.entries[name]
	if !ok {
		return nil, 0, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return io.NopCloser(io.NewSectionReader(s.f, e.offset, e.size)), e.size, nil
}

func (s *tarSource) list() ([]string, error) {
	names := make([]string, 0, len(s.entries))
	for n := range s.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func (s *tarSource) close() error { return s.f.Close() }

// openSource opens a capsule folder or tar.
// notThere is the error of a capsule path with nothing there; it is
// fs.ErrNotExist.
type notThere struct{ path string }

func (e *notThere) Error() string {
	return e.path + ": no capsule folder or tar there"
}

func (e *notThere) Is(target error) bool { return target == fs.ErrNotExist }

func openSource(path string, lim Limits) (source, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &notThere{path}
	}
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return dirSource{dir: path}, nil
	}
	return openTar(path, lim)
}

// readAll reads a whole file from a source, refusing more than max bytes.
func readAll(src source, name string, max int64) ([]byte, error) {
	rc, size, err := src.open(name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if size > max {
		return nil, fmt.Errorf("%s is %d bytes, over the limit of %d", name, size, max)
	}
	return io.ReadAll(io.LimitReader(rc, max+1))
}
