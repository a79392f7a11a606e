package capsule

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filelock"
)

// FORMAT.md forbids links of any kind and folders outside the layout in a
// capsule folder; verify names each.
func TestVerifyRefusesLinksAndUnlistedFolders(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic and hard links need privileges there")
	}
	for _, tc := range []struct {
		name  string
		alter func(t *testing.T, dir string)
		file  string
	}{
		{"agent.json is a symbolic link to the same content outside", func(t *testing.T, dir string) {
			p := filepath.Join(dir, AgentFile)
			outside := filepath.Join(t.TempDir(), "agent.json")
			if err := os.Rename(p, outside); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
		}, AgentFile},
		{"the blob folder is a symbolic link", func(t *testing.T, dir string) {
			blobs := filepath.Join(dir, filepath.FromSlash(BlobDir))
			elsewhere := filepath.Join(t.TempDir(), "blobs")
			if err := os.Rename(blobs, elsewhere); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, blobs); err != nil {
				t.Fatal(err)
			}
		}, BlobDir},
		{"a blob is a hard link to a file outside", func(t *testing.T, dir string) {
			blob := firstBlob(t, dir)
			if err := os.Link(filepath.Join(dir, filepath.FromSlash(blob)), filepath.Join(t.TempDir(), "other-name")); err != nil {
				t.Fatal(err)
			}
		}, "blob"},
		{"an extra empty folder", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "notes"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "notes/"},
		{"an extra folder inside a layout folder", func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, "memory", "old"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "memory/old/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fullCapsule(t, newSigner(t))
			tc.alter(t, dir)
			rep, err := Verify(dir, VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() {
				t.Fatal("verify passed")
			}
			found := false
			for _, p := range rep.Problems {
				if p.File == tc.file || (tc.file == "blob" && blobName(p.File) != "") {
					found = true
				}
			}
			if !found {
				t.Fatalf("no problem names %s: %v", tc.file, rep.Problems)
			}
		})
	}
}

func firstBlob(t *testing.T, dir string) string {
	t.Helper()
	c := mustOpen(t, dir)
	defer c.Close()
	for _, n := range c.Manifest().Names() {
		if blobName(n) != "" {
			return n
		}
	}
	t.Fatal("no blob")
	return ""
}

// A file verify cannot read is not damage: it is reported as unchecked,
// and the capsule is not called damaged.
func TestAFileThatCannotBeReadIsUncheckedNotDamaged(t *testing.T) {
	rep := &Report{}
	rep.problem("artifacts/blobs/x", &fs.PathError{Op: "open", Path: "x", Err: syscall.EMFILE})
	rep.problem("agent.json", fmt.Errorf("missing: %w", fs.ErrNotExist))
	rep.problem("agent.json", ErrHashMismatch)
	if len(rep.Unchecked) != 1 || len(rep.Problems) != 2 || rep.OK() {
		t.Fatalf("unchecked %v, problems %v", rep.Unchecked, rep.Problems)
	}
}

// Under an open-files limit too low to read the capsule, verify of a
// healthy capsule says it could not check, never that it is damaged.
func TestVerifyUnderALowOpenFilesLimitReportsNoDamage(t *testing.T) {
	if runtime.GOOS != "linux" || testing.Short() {
		t.Skip("lowers the open-files limit in a child process (Linux)")
	}
	dir := fullCapsule(t, newSigner(t))
	cmd := exec.Command(os.Args[0], "-test.run=^TestLowNofileChild$", "-test.v")
	cmd.Env = append(os.Environ(), "TERN_LOW_NOFILE_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skipf("child skipped:\n%s", out)
	}
}

// TestLowNofileChild is the child of the test above.
func TestLowNofileChild(t *testing.T) {
	dir := os.Getenv("TERN_LOW_NOFILE_CHILD")
	if dir == "" {
		t.Skip("only runs as a child")
	}
	// The limit bounds descriptor numbers: set it to the lowest free one,
	// so that no file can be opened.
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	free := f.Fd()
	f.Close()
	var old syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old)
	lim := syscall.Rlimit{Cur: uint64(free), Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip(err)
	}
	rep, err := Verify(dir, VerifyOptions{Workers: 4})
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("a healthy capsule reported as damaged: %v", rep.Problems)
	}
	if len(rep.Unchecked) == 0 {
		t.Fatal("nothing unchecked: the limit did not bite, the test proved nothing")
	}
}

func TestWhatAKilledSnapshotLeftIsTidiedByTheNextWriter(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	// A snapshot killed before its event and manifest: blobs stored, unlisted.
	stray, err := putBlob(dir, strings.NewReader("a workspace file the killed snapshot stored"))
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"memory/.timeline_events.jsonl.tern-tmp-123": "half a rewrite"})
	rep := mustVerifyNotes(t, dir)
	if len(rep.Notes) != 2 {
		t.Fatalf("notes %q, want the stray blob and the temporary file named", rep.Notes)
	}
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(BlobPath(stray.SHA256)))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the stray blob is still there: %v", err)
	}
	if rep := mustVerify(t, dir); len(rep.Notes) != 0 {
		t.Fatalf("notes after the next writer: %q", rep.Notes)
	}
}

func TestBlobsAKilledSnapshotStoredAreKeptWhenItsEventIsDurable(t *testing.T) {
	s := newSigner(t)
	dir := emptyCapsule(t, s, "helper")
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"a.txt": "alpha\n", "b/c.txt": "gamma\n"})
	body, err := d.Snapshot(context.Background(), s, ws)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	// Undo the commit: the state of a snapshot killed after its event was
	// appended but before the manifest listed its blobs and snapshot.json.
	c := mustOpen(t, dir)
	m := *c.Manifest()
	c.Close()
	m.Files = map[string]FileEntry{}
	for k, v := range c.Manifest().Files {
		if blobName(k) == "" {
			m.Files[k] = v
		}
	}
	empty, _ := (&Snapshot{}).Encode()
	m.Files[SnapshotFile] = entryOf(empty)
	writeManifest(t, dir, &m)
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(SnapshotFile)), empty, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err = OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	rep := mustVerify(t, dir)
	if len(rep.Notes) > 0 {
		t.Fatalf("notes: %q", rep.Notes)
	}
	c = mustOpen(t, dir)
	defer c.Close()
	snap, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if body.Files != 2 || len(snap.Entries) != 3 {
		t.Fatalf("snapshot.json has %d entries after recovery, want the killed snapshot's 3", len(snap.Entries))
	}
	out := filepath.Join(t.TempDir(), "ws")
	if err := c.Materialize(out); err != nil {
		t.Fatalf("the snapshot's files were not all kept: %v", err)
	}
}

func writeManifest(t *testing.T, dir string, m *Manifest) {
	t.Helper()
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustVerifyNotes(t *testing.T, dir string) *Report {
	t.Helper()
	rep, err := Verify(dir, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("leftovers are reported as damage: %v %v", rep.Problems, rep.Unchecked)
	}
	return rep
}

// Killed unpacks, merges and packs leave a hidden staging folder or
// temporary file beside their output; the next run for the same output
// removes them, but never one a live run holds.
func TestTheNextRunForAnOutputRemovesWhatKilledRunsLeftBesideIt(t *testing.T) {
	s := newSigner(t)
	src := fullCapsule(t, s)
	root := t.TempDir()
	tarPath := filepath.Join(root, "agent.tar")
	for _, tc := range []struct {
		name   string
		output string
		run    func(out string) error
	}{
		{"pack", tarPath, func(out string) error { return PackFile(mustOpen(t, src), out, PackOptions{}) }},
		{"unpack", filepath.Join(root, "copy"), func(out string) error { return Unpack(tarPath, out, Limits{}) }},
		{"merge", filepath.Join(root, "merged"), func(out string) error {
			_, err := Merge(mustOpen(t, src), mustOpen(t, src), out)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dead := filepath.Join(root, "."+filepath.Base(tc.output)+atomicfile.TempPrefix+"killed")
			if err := os.MkdirAll(filepath.Join(dead, "memory"), 0o755); err != nil {
				t.Fatal(err)
			}
			live := filepath.Join(root, "."+filepath.Base(tc.output)+atomicfile.TempPrefix+"live")
			if err := os.Mkdir(live, 0o755); err != nil {
				t.Fatal(err)
			}
			lock, err := filelock.TryLock(live)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Unlock()
			other := filepath.Join(root, ".other"+atomicfile.TempPrefix+"x")
			os.WriteFile(other, nil, 0o644)
			if err := tc.run(tc.output); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dead); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the killed run's leftover is still there: %v", err)
			}
			if _, err := os.Stat(live); err != nil {
				t.Errorf("a live run's staging folder was removed: %v", err)
			}
			if _, err := os.Stat(other); err != nil {
				t.Errorf("another output's leftover was removed: %v", err)
			}
			os.Remove(other)
		})
	}
}

// A file of 8 GiB or more does not fit a USTAR header: pack writes a PAX
// header for it, and a tar reader accepts PAX and GNU headers.
func TestAFileOf8GiBOrMoreGetsAPAXHeader(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("hashes 8 GiB")
	}
	const size = 8<<30 + 3
	if tarFormat(size) != tar.FormatPAX || tarFormat(maxUSTARSize) != tar.FormatUSTAR {
		t.Fatal("tarFormat picks the wrong format at the USTAR limit")
	}
	s := newSigner(t)
	dir := emptyCapsule(t, s, "big")
	// A sparse blob of 8 GiB + 3 zero bytes, listed in the manifest with
	// its real hash (computed once with: head -c 8589934595 /dev/zero | sha256sum).
	const h = "827dc82a2648d7e0d536b83a502ccac615a32dfb47e5b86c2f190e7328755142"
	f, err := os.Create(filepath.Join(dir, filepath.FromSlash(BlobPath(h))))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	f.Close()
	c := mustOpen(t, dir)
	m := *c.Manifest()
	c.Close()
	m.Files = map[string]FileEntry{BlobPath(h): {SHA256: h, Size: size}}
	for k, v := range c.Manifest().Files {
		m.Files[k] = v
	}
	writeManifest(t, dir, &m)

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(Pack(mustOpen(t, dir), pw, PackOptions{})) }()
	tr := tar.NewReader(pr)
	found := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name == BlobPath(h) {
			found = true
			if hdr.Size != size || hdr.Format&tar.FormatPAX == 0 {
				t.Fatalf("header of the big blob: size %d, format %v", hdr.Size, hdr.Format)
			}
		} else if hdr.Format != tar.FormatUSTAR {
			t.Errorf("%s: format %v, want USTAR", hdr.Name, hdr.Format)
		}
	}
	if !found {
		t.Fatal("the big blob is not in the tar")
	}

	// A GNU-format header for a large file indexes too.
	gnu := filepath.Join(t.TempDir(), "gnu.tar")
	g, _ := os.Create(gnu)
	tw := tar.NewWriter(g)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: BlobPath(h), Size: size, Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatGNU}); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if err := os.Truncate(gnu, 512+(size+511)/512*512+1024); err != nil {
		t.Fatal(err)
	}
	src, err := openTar(gnu, Limits{})
	if err != nil {
		t.Fatalf("a GNU header for a big file: %v", err)
	}
	if e := src.entries[BlobPath(h)]; e.size != size {
		t.Fatalf("indexed size %d", e.size)
	}
	src.close()
}
