//go:build linux

package filecopy

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

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
		off  []*bool // methods turned off
		want Method
	}{
		{"on XFS a file is reflinked", on("xfs"), nil, Reflink},
		{"on btrfs a file is reflinked", on("btrfs"), nil, Reflink},
		{"on ext4 a file is copied by copy_file_range", on("ext4"), nil, CopyFileRange},
		{"without reflinks a file is copied by copy_file_range", sameDir(func(t *testing.T) string { return t.TempDir() }), []*bool{&tryReflink}, CopyFileRange},
		{"without either a file is read and written", sameDir(func(t *testing.T) string { return t.TempDir() }), []*bool{&tryReflink, &tryCopyFileRange}, Plain},
		{"from tmpfs to another filesystem a file is read and written", fromShm, nil, Plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcDir, dstDir := tc.dirs(t)
			for _, k := range tc.off {
				*k = false
			}
			t.Cleanup(func() { tryReflink, tryCopyFileRange = true, true })
			data := randomBytes(t, size)
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
		})
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
		for _, m := range []Method{Reflink, CopyFileRange, Plain} {
			t.Run(tc.name+" under "+string(m), func(t *testing.T) {
				tryReflink, tryCopyFileRange = m == Reflink, m != Plain
				t.Cleanup(func() { tryReflink, tryCopyFileRange = true, true })
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
