//go:build linux

package filecopy

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tern-dev/tern/internal/filecopy/filecopytest"
)

// size spans several chunks and ends inside one.
const size = 3*chunk + 17

// Each method is taken where its filesystem offers it, the copy holds the
// source's bytes, and the hash is of those bytes.
func TestEachMethodCopiesTheBytesAndHashesThem(t *testing.T) {
	for _, tc := range []struct {
		name string
		dirs func(t *testing.T) (src, dst string)
		size int64   // 0: size
		off  []*bool // methods turned off
		want Method
	}{
		{"on XFS a file is reflinked", on("xfs"), 0, nil, Reflink},
		{"on btrfs a file is reflinked", on("btrfs"), 0, nil, Reflink},
		{"on ext4 a file is written with O_DIRECT, its last partial block through the cache", on("ext4"), 0, nil, Direct},
		{"on ext4 a file of whole blocks is written with O_DIRECT", on("ext4"), 2 * chunk, nil, Direct},
		{"on ext4 a file smaller than a part is copied by copy_file_range", on("ext4"), chunk - 1, nil, CopyFileRange},
		{"on ext4 without direct writes a file is copied by copy_file_range", on("ext4"), 0, []*bool{&tryDirect}, CopyFileRange},
		{"with none of them a file is read and written", on("ext4"), 0, []*bool{&tryReflink, &tryDirect, &tryCopyFileRange}, Plain},
		{"from tmpfs to another filesystem a file is read and written if not with O_DIRECT", fromShm, 0, []*bool{&tryDirect}, Plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcDir, dstDir := tc.dirs(t)
			for _, k := range tc.off {
				*k = false
			}
			t.Cleanup(func() { tryReflink, tryDirect, tryCopyFileRange = true, true, true })
			size := cmp.Or(tc.size, size)
			data := randomBytes(t, int(size))
			src := writeFile(t, filepath.Join(srcDir, "src"), data)
			dst, err := os.Create(filepath.Join(dstDir, "dst"))
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			h := sha256.New()
			m, err := Copy(dst, src, size, h)
			if err != nil {
				t.Fatal(err)
			}
			if m != tc.want {
				t.Errorf("copied by %q, want %q", m, tc.want)
			}
			if got, want := h.Sum(nil), sha256.Sum256(data); !bytes.Equal(got, want[:]) {
				t.Errorf("hash %x, want %x", got, want)
			}
			if got, _ := os.ReadFile(dst.Name()); !bytes.Equal(got, data) {
				t.Errorf("the copy holds %d bytes that differ from the source's %d", len(got), len(data))
			}
			if flags, err := unix.FcntlInt(dst.Fd(), unix.F_GETFL, 0); err != nil || flags&unix.O_DIRECT != 0 {
				t.Errorf("the copy's file is left with flags %#x (%v): O_DIRECT is the copy's own", flags, err)
			}
		})
	}
}

// A DirectWriter writes whole blocks past the page cache and leaves
// anything else to it: a file whose only partial block is its last is
// written directly (its pages are not cached after), one with a partial
// block before its end is not, from there on; its bytes are right either
// way.
func TestADirectWriterTakesWholeBlocksAndLeavesTheRestToTheCache(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parts  []int
		direct bool
	}{
		{"whole blocks, then a tail", []int{chunk, chunk, 17}, true},
		{"whole blocks, then blocks and a tail in one part", []int{chunk, 3*alignment + 17}, true},
		{"whole blocks only", []int{chunk, 2 * alignment}, true},
		{"a part of odd size in the middle", []int{chunk, 100, chunk}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(filecopytest.Folder(t, "ext4"), "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			d := StartDirect(f)
			var all []byte
			for _, n := range tc.parts {
				p := AlignedBuffer(n)
				rand.Read(p)
				if _, err := d.WriteAt(p, int64(len(all))); err != nil {
					t.Fatal(err)
				}
				all = append(all, p...)
			}
			if got := d.End(); got != tc.direct {
				t.Errorf("End says direct %v, want %v", got, tc.direct)
			}
			if tc.direct {
				notCached(t, f.Name(), tc.parts[0])
			}
			if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, all) {
				t.Fatal("the file does not hold the parts written")
			}
		})
	}
}

// notCached fails the test if any of the first n bytes of the file at path
// is in the page cache.
func notCached(t *testing.T, path string, n int) {
	t.Helper()
	g, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	m, err := unix.Mmap(int(g.Fd()), 0, n, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	in := make([]byte, n/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&in[0]))); errno != 0 {
		t.Fatal(errno)
	}
	cached := 0
	for _, b := range in {
		cached += int(b & 1)
	}
	if cached > 0 {
		t.Errorf("%d pages of the first %d bytes written are in the page cache: they were not written with O_DIRECT", cached, n)
	}
}

// A source written, grown or cut short while it is copied is refused:
// its hash and its copy cannot be trusted to agree.
func TestASourceThatChangesWhileCopiedIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(f *os.File) error // runs as the first chunk is hashed
		size   int64                  // announced
	}{
		{"overwritten in place", func(f *os.File) error { _, err := f.WriteAt([]byte("x"), size-1); return err }, size},
		{"grown", func(f *os.File) error { _, err := f.WriteAt([]byte("x"), size); return err }, size},
		{"shorter than announced", nil, size + 1},
	} {
		for _, m := range []Method{Reflink, Direct, CopyFileRange, Plain} {
			t.Run(tc.name+" under "+string(m), func(t *testing.T) {
				tryReflink, tryDirect, tryCopyFileRange = m == Reflink, m == Direct, m == CopyFileRange
				t.Cleanup(func() { tryReflink, tryDirect, tryCopyFileRange = true, true, true })
				dir := t.TempDir()
				if m == Reflink {
					dir = filecopytest.Folder(t, "xfs")
				}
				src := writeFile(t, filepath.Join(dir, "src"), randomBytes(t, size))
				writer, err := os.OpenFile(src.Name(), os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer writer.Close()
				dst, err := os.Create(filepath.Join(dir, "dst"))
				if err != nil {
					t.Fatal(err)
				}
				defer dst.Close()
				h := &onFirstWrite{w: sha256.New()}
				if tc.change != nil {
					h.do = func() error { return tc.change(writer) }
				}
				_, err = Copy(dst, src, tc.size, h)
				if h.err != nil {
					t.Fatal(h.err)
				}
				if !errors.Is(err, ErrChanged) {
					t.Fatalf("err %v, want ErrChanged", err)
				}
			})
		}
	}
}

// An empty file has nothing to copy.
func TestAnEmptyFileIsCopiedByNoMethod(t *testing.T) {
	dir := t.TempDir()
	src := writeFile(t, filepath.Join(dir, "src"), nil)
	dst, err := os.Create(filepath.Join(dir, "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if m, err := Copy(dst, src, 0, sha256.New()); m != "" || err != nil {
		t.Fatalf("%q %v", m, err)
	}
}

func TestSlowerNamesTheSlowerMethod(t *testing.T) {
	for _, tc := range []struct{ a, b, want Method }{
		{"", Reflink, Reflink}, {Reflink, CopyFileRange, CopyFileRange}, {Plain, CopyFileRange, Plain}, {Reflink, "", Reflink},
		{Direct, Reflink, Direct}, {Direct, CopyFileRange, Direct}, {Plain, Direct, Plain},
	} {
		if got := Slower(tc.a, tc.b); got != tc.want {
			t.Errorf("Slower(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

// onFirstWrite is a hash that runs do when it is first written to.
type onFirstWrite struct {
	w   io.Writer
	do  func() error
	err error
}

func (o *onFirstWrite) Write(p []byte) (int, error) {
	if o.do != nil {
		o.err, o.do = o.do(), nil
	}
	return o.w.Write(p)
}

func sameDir(dir func(t *testing.T) string) func(t *testing.T) (string, string) {
	return func(t *testing.T) (string, string) { d := dir(t); return d, d }
}

// on is a source and destination in one folder on a filesystem of kind.
func on(kind string) func(t *testing.T) (string, string) {
	return sameDir(func(t *testing.T) string { return filecopytest.Folder(t, kind) })
}

// fromShm is a source folder on tmpfs and a destination in the test's
// temporary folder, when that is not tmpfs too.
func fromShm(t *testing.T) (string, string) {
	src, dst := filecopytest.Folder(t, "tmpfs"), t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skipf("%s is on tmpfs too: no second filesystem to copy to", dst)
	}
	return src, dst
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// writeFile writes data to a new file at p and returns it open for
// reading.
func writeFile(t *testing.T, p string, data []byte) *os.File {
	t.Helper()
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// OpenFile opens as os.OpenFile does: flags kept (an exclusive create
// refuses a file that is there, with fs.ErrExist), close-on-exec, and a
// file that reads and writes at offsets.
func TestOpenFileOpensAsOSDoes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	f, err := OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("hello"), 2); err != nil {
		t.Fatal(err)
	}
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("not close-on-exec: %#x, %v", flags, err)
	}
	f.Close()
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o640 || st.Size() != 7 {
		t.Fatalf("stat %v, %v; want mode 0640, 7 bytes", st, err)
	}
	if _, err := OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, os.ErrExist) {
		t.Fatalf("an exclusive create of a file that is there: %v, want os.ErrExist", err)
	}
	r, err := OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make([]byte, 5)
	if _, err := r.ReadAt(got, 2); err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := OpenFile(filepath.Join(t.TempDir(), "none"), os.O_RDONLY, 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("opening what is not there: %v, want os.ErrNotExist", err)
	}
}
