package capsule

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestPackingTwiceGivesIdenticalBytes(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	tmp := t.TempDir()
	a := packTo(t, dir, filepath.Join(tmp, "a.tar"), PackOptions{})
	b := packTo(t, dir, filepath.Join(tmp, "b.tar"), PackOptions{})
	if !bytes.Equal(a, b) {
		t.Fatal("two packs of one capsule differ")
	}
	// Re-packing the tar itself gives the same bytes again.
	c := packTo(t, filepath.Join(tmp, "a.tar"), filepath.Join(tmp, "c.tar"), PackOptions{})
	if !bytes.Equal(a, c) {
		t.Fatal("packing the packed tar changed it")
	}
	// Signing is deterministic too (ed25519).
	sa := packTo(t, dir, filepath.Join(tmp, "sa.tar"), PackOptions{Signer: s})
	sb := packTo(t, dir, filepath.Join(tmp, "sb.tar"), PackOptions{Signer: s})
	if !bytes.Equal(sa, sb) {
		t.Fatal("two signed packs differ")
	}
}

func TestATarHoldsTheLayoutAtItsRootWithTheManifestFirst(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	data := packTo(t, dir, filepath.Join(t.TempDir(), "a.tar"), PackOptions{})
	tr := tar.NewReader(bytes.NewReader(data))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 0 || h.Uname != "" {
			t.Errorf("%s: owner or time not fixed: %+v", h.Name, h)
		}
		names = append(names, h.Name)
	}
	if names[0] != ManifestFile {
		t.Errorf("first entry %q, want %s", names[0], ManifestFile)
	}
	listing := strings.Join(names, "\n")
	for _, want := range append(Layout, "artifacts/blobs/") {
		if !strings.Contains(listing, want) {
			t.Errorf("tar lacks %s:\n%s", want, listing)
		}
	}
	if path, err := exec.LookPath("tar"); err == nil {
		tarFile := filepath.Join(t.TempDir(), "x.tar")
		os.WriteFile(tarFile, data, 0o644)
		out, err := exec.Command(path, "-tvf", tarFile).CombinedOutput()
		if err != nil {
			t.Fatalf("tar -tvf: %v\n%s", err, out)
		}
		for _, want := range Layout {
			if !strings.Contains(string(out), want) {
				t.Errorf("tar -tvf does not list %s:\n%s", want, out)
			}
		}
	}
}

func TestPackRefusesADamagedCapsuleAndLeavesNoTar(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	p := filepath.Join(dir, AgentFile)
	b, _ := os.ReadFile(p)
	b[3] ^= 1
	os.WriteFile(p, b, 0o644)
	c := mustOpen(t, dir)
	out := filepath.Join(t.TempDir(), "a.tar")
	err := PackFile(c, out, PackOptions{})
	if err == nil || !strings.Contains(err.Error(), AgentFile+" was edited by hand and the edit not accepted: run tern capsule accept") {
		t.Fatalf("pack of a capsule with an edit not accepted: %v; want it to say to accept it", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a partial tar was left behind")
	}
	left, _ := os.ReadDir(filepath.Dir(out))
	if len(left) != 0 {
		t.Fatalf("files left behind: %v", left)
	}
}

func TestATarUnpacksToAFolderThatVerifiesAndPacksToTheSameBytes(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	tmp := t.TempDir()
	a := packTo(t, dir, filepath.Join(tmp, "a.tar"), PackOptions{})
	out := filepath.Join(tmp, "copy")
	if err := Unpack(filepath.Join(tmp, "a.tar"), out, Limits{}); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, out)
	b := packTo(t, out, filepath.Join(tmp, "b.tar"), PackOptions{})
	if !bytes.Equal(a, b) {
		t.Fatal("unpack then pack changed the bytes")
	}
}
