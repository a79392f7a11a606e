package store

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/filecopy"
	"github.com/tern-dev/tern/internal/filecopy/filecopytest"
	"github.com/tern-dev/tern/journal"
)

// A folder import copies each blob into the store by the cheapest method
// its filesystems offer, says which, and holds the capsule verified; on
// every method, a blob whose bytes are not its name is refused and
// nothing of the import is left in the store.
func TestAFolderImportTakesTheCheapestCopyAndRefusesADamagedBlobOnEach(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src, dst string // filesystems of the folder and the store
		want     filecopy.Method
	}{
		{"reflinked on XFS", "xfs", "xfs", filecopy.Reflink},
		{"reflinked on btrfs", "btrfs", "btrfs", filecopy.Reflink},
		{"written with O_DIRECT on ext4", "ext4", "ext4", filecopy.Direct},
		{"read and written from tmpfs to ext4 (its small blobs; the slowest method is said)", "tmpfs", "ext4", filecopy.Plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, id, _ := newTestStore(t) // the identity; the store is made below
			srcFS := filecopytest.Folder(t, tc.src)
			home := filepath.Join(srcFS, "home")
			if tc.dst != tc.src {
				home = filepath.Join(filecopytest.Folder(t, tc.dst), "home")
			}
			s, err := Open(home, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })

			good := capsuleWithABlob(t, id, filepath.Join(srcFS, "good"))
			agent, merged, copied, err := s.ImportFolder(good, nil)
			if err != nil {
				t.Fatal(err)
			}
			if merged || copied != tc.want {
				t.Errorf("merged %v, copied by %q; want a new capsule copied by %q", merged, copied, tc.want)
			}
			rep, err := capsule.Verify(filepath.Join(home, CapsulesDir, agent), capsule.VerifyOptions{})
			if err != nil || !rep.OK() {
				t.Fatalf("the imported capsule: %v %v", err, rep.Issues())
			}

			bad := capsuleWithABlob(t, id, filepath.Join(srcFS, "bad"))
			blob := damageTheBlob(t, bad)
			badAgent := mustOpenID(t, bad)
			_, _, _, err = s.ImportFolder(bad, nil)
			if err == nil || !strings.Contains(err.Error(), blob) || !strings.Contains(err.Error(), "sha256") {
				t.Fatalf("a blob whose bytes are not its name: %v", err)
			}
			if s.Holds(badAgent) {
				t.Error("the store holds the refused capsule")
			}
			if left, _ := filepath.Glob(filepath.Join(home, CapsulesDir, ".*")); len(left) > 0 {
				t.Errorf("the refused import left %v", left)
			}
		})
	}
}

// capsuleWithABlob makes at dir a capsule held by id whose workspace
// snapshot holds one file of 3 MiB of random bytes.
func capsuleWithABlob(t *testing.T, id journal.Signer, dir string) string {
	t.Helper()
	c, err := capsule.New(dir, "blob", id)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	ws := t.TempDir()
	data := make([]byte, 3<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(ws, "big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := capsule.OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Snapshot(context.Background(), id, ws); err != nil {
		t.Fatal(err)
	}
	return dir
}

// damageTheBlob changes a byte of the capsule's largest blob, keeping its
// size, and returns the blob's capsule name.
func damageTheBlob(t *testing.T, dir string) string {
	t.Helper()
	c, err := capsule.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var name string
	var size int64
	for n, e := range c.Manifest().Files {
		if strings.HasPrefix(n, capsule.BlobDir+"/") && e.Size > size {
			name, size = n, e.Size
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, filepath.FromSlash(name)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, size/2); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, size/2); err != nil {
		t.Fatal(err)
	}
	return name
}

func mustOpenID(t *testing.T, dir string) string {
	t.Helper()
	c, err := capsule.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ID()
}
