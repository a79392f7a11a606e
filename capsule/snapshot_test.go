package capsule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestAWorkspaceComesBackWithItsContentAndModes(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	ws := filepath.Join(t.TempDir(), "ws")
	writeTree(t, ws, map[string]string{
		"run.sh":         "#!/bin/sh\necho hi\n",
		"deep/er/x.txt":  "x",
		"same1.txt":      "dup",
		"same2.txt":      "dup",
		"emptydir/":      "",
		"ro/readme.txt":  "read only folder",
		"unicode/é ü.md": "ünïcödé",
	})
	os.Chmod(filepath.Join(ws, "run.sh"), 0o755)
	os.Chmod(filepath.Join(ws, "ro"), 0o555)
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "ro"), 0o755) })

	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := d.Snapshot(context.Background(), s, ws)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	if body.Files != 6 {
		t.Errorf("files = %d, want 6", body.Files)
	}
	mustVerify(t, dir)

	for _, from := range []string{"folder", "tar"} {
		t.Run("from a "+from, func(t *testing.T) {
			src := dir
			if from == "tar" {
				src = filepath.Join(t.TempDir(), "a.tar")
				packTo(t, dir, src, PackOptions{})
			}
			out := filepath.Join(t.TempDir(), "out")
			if err := mustOpen(t, src).Materialize(out); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(filepath.Join(out, "ro"), 0o755) })
			assertSameTree(t, ws, out)
		})
	}
}

func assertSameTree(t *testing.T, want, got string) {
	t.Helper()
	walk := func(root string) map[string]string {
		m := map[string]string{}
		filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil || p == root {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			v := info.Mode().String()
			if info.Mode().IsRegular() {
				b, _ := os.ReadFile(p)
				v += " " + string(b)
			}
			m[filepath.ToSlash(rel)] = v
			return nil
		})
		return m
	}
	w, g := walk(want), walk(got)
	for k, v := range w {
		if g[k] != v {
			t.Errorf("%s: got %q, want %q", k, g[k], v)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("%s: not in the original workspace", k)
		}
	}
}

func TestASymlinkInTheWorkspaceIsRefusedByName(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	ws := filepath.Join(t.TempDir(), "ws")
	writeTree(t, ws, map[string]string{"a.txt": "a"})
	os.Symlink("/etc/passwd", filepath.Join(ws, "link"))
	before, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	d, _ := OpenDir(context.Background(), dir, nil)
	_, err := d.Snapshot(context.Background(), s, ws)
	d.Close()
	if err == nil || !strings.Contains(err.Error(), "link") || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("snapshot with a symlink: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	if string(before) != string(after) {
		t.Fatal("a refused snapshot changed the manifest")
	}
	mustVerify(t, dir)
}

func TestMaterializeCatchesADamagedBlobAndWritesNothing(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	c := mustOpen(t, dir)
	snap, _ := c.Snapshot()
	h, _ := ParseBlobCID(snap.Entries["a.txt"].CID)
	os.WriteFile(filepath.Join(dir, filepath.FromSlash(BlobPath(h))), []byte("ALPHA\n"), 0o644)
	root := t.TempDir()
	err := c.Materialize(filepath.Join(root, "out"))
	if err == nil || !strings.Contains(err.Error(), "a.txt") {
		t.Fatalf("materialize of a damaged blob: %v", err)
	}
	if left, _ := os.ReadDir(root); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestBlobNamesAndCIDsConvertBothWays(t *testing.T) {
	hex := "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" // sha256("hello")
	c, err := CIDFromSHA256(hex)
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq" {
		t.Errorf("CID = %s", c)
	}
	back, err := SHA256FromCID(c)
	if err != nil || back != hex {
		t.Fatalf("back = %q, %v", back, err)
	}
	for _, bad := range []string{"", "xyz", "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"} {
		if _, err := ParseBlobCID(bad); err == nil {
			t.Errorf("ParseBlobCID(%q) accepted", bad)
		}
	}
}

func TestAWorkspaceIsUpdatedFromOneSnapshotToTheNextWritingOnlyWhatChanged(t *testing.T) {
	s := newSigner(t)
	dir := emptyCapsule(t, s, "helper")
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"keep.txt": "same", "change.txt": "before", "gone/old.txt": "x", "sub/": ""})
	take := func() {
		d, err := OpenDir(context.Background(), dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.Snapshot(context.Background(), s, ws); err != nil {
			t.Fatal(err)
		}
	}
	take()
	out := filepath.Join(t.TempDir(), "out")
	c := mustOpen(t, dir)
	have, err := c.UpdateWorkspace(out, nil)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	keep, _ := os.Stat(filepath.Join(out, "keep.txt"))

	os.WriteFile(filepath.Join(ws, "change.txt"), []byte("after"), 0o644)
	os.RemoveAll(filepath.Join(ws, "gone"))
	writeTree(t, ws, map[string]string{"new/file.txt": "new"})
	take()
	c = mustOpen(t, dir)
	defer c.Close()
	if _, err := c.UpdateWorkspace(out, have); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(t.TempDir(), "again")
	if err := c.Materialize(again); err != nil {
		t.Fatal(err)
	}
	if a, b := treeOf(t, out), treeOf(t, again); a != b {
		t.Fatalf("the updated workspace differs from one materialized anew:\n%s\n--\n%s", a, b)
	}
	if after, _ := os.Stat(filepath.Join(out, "keep.txt")); !os.SameFile(keep, after) {
		t.Fatal("an unchanged file was written again")
	}
}

// treeOf lists a folder's entries with their modes and contents.
func treeOf(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		info, _ := d.Info()
		data := ""
		if d.Type().IsRegular() {
			bs, _ := os.ReadFile(p)
			data = string(bs)
		}
		fmt.Fprintf(&b, "%s %v %q\n", rel, info.Mode(), data)
		return nil
	})
	return b.String()
}

// A snapshot of a tree where one file changed reads the others to check
// them but stores only the changed one: the blobs of the unchanged files
// are the same files as before, and a file changed in place at the same
// size is stored anew all the same.
func TestASnapshotAgainStoresOnlyTheFilesThatChanged(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	ws := filepath.Join(t.TempDir(), "ws")
	writeTree(t, ws, map[string]string{"a.txt": "alpha", "b.txt": "bravo", "c/d.txt": "delta"})
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Snapshot(context.Background(), s, ws); err != nil {
		t.Fatal(err)
	}
	inode := func(content string) uint64 {
		sum := sha256.Sum256([]byte(content))
		st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(BlobPath(hex.EncodeToString(sum[:])))))
		if err != nil {
			t.Fatalf("no blob of %q: %v", content, err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	before := inode("alpha")
	writeTree(t, ws, map[string]string{"b.txt": "BRAVO"}) // same size, other bytes
	var stored atomic.Int64
	blobStored = func() { stored.Add(1) }
	defer func() { blobStored = nil }()
	if _, err := d.Snapshot(context.Background(), s, ws); err != nil {
		t.Fatal(err)
	}
	if inode("alpha") != before {
		t.Error("the unchanged file's blob was replaced")
	}
	inode("BRAVO") // the changed one is stored
	if n := stored.Load(); n != 2 {
		t.Errorf("%d blobs written, want 2: the changed file and the new snapshot.json", n)
	}
	mustVerify(t, dir)
	out := filepath.Join(t.TempDir(), "out")
	if err := mustOpen(t, dir).Materialize(out); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, ws, out)
}

// With a Seen, a snapshot of a folder takes the files whose stat says the
// same as when the last one read them without reading them again; a file
// written since is read (its change time moved, whatever its size and
// modification time say), and one written just before a snapshot is read
// the next time too.
func TestASnapshotWithSeenReadsOnlyTheFilesThatChanged(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	ws := filepath.Join(t.TempDir(), "ws")
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("src/f%02d.txt", i)] = fmt.Sprintf("file %02d", i)
	}
	writeTree(t, ws, files)
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var reread atomic.Int64
	fileReread = func() { reread.Add(1) }
	defer func() { fileReread = nil }()
	snapshot := func(seen *Seen) {
		t.Helper()
		reread.Store(0)
		if _, _, err := d.SnapshotWith(context.Background(), s, 0, ws, SnapshotOptions{Seen: seen}); err != nil {
			t.Fatal(err)
		}
	}

	defer func(w, c time.Duration) { racyWindow, coarseRacyWindow = w, c }(racyWindow, coarseRacyWindow)
	racyWindow, coarseRacyWindow = time.Hour, time.Hour // every file changed "just now"
	seen := NewSeen()
	snapshot(seen)
	snapshot(seen)
	if n := reread.Load(); n != 20 {
		t.Fatalf("%d files read again after files written just before the snapshot, want all 20", n)
	}

	racyWindow, coarseRacyWindow = 0, 0 // as if time had passed since they were written
	snapshot(seen)
	snapshot(seen)
	if n := reread.Load(); n != 0 {
		t.Fatalf("%d files read again with none changed, want 0", n)
	}

	// Same size, same modification time, other bytes: the change time moved.
	p := filepath.Join(ws, "src", "f07.txt")
	st, _ := os.Stat(p)
	if err := os.WriteFile(p, []byte("FILE 07"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, st.ModTime(), st.ModTime())
	snapshot(seen)
	if n := reread.Load(); n != 1 {
		t.Fatalf("%d files read again, want 1: the one whose change time moved", n)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := mustOpen(t, dir).Materialize(out); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "src", "f07.txt")); string(got) != "FILE 07" {
		t.Fatalf("the changed file reads %q in the snapshot", got)
	}
	mustVerify(t, dir)
}
