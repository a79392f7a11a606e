package capsule

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestATarThatIsNotWholeBlocksIsRefusedAsTruncated(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	tmp := t.TempDir()
	data := packTo(t, dir, filepath.Join(tmp, "a.tar"), PackOptions{})
	h, err := tar.NewReader(bytes.NewReader(data)).Next()
	if err != nil || h.Name != ManifestFile || h.Size%512 == 0 {
		t.Fatalf("the first entry is %+v (%v); want the manifest, its data not a whole number of blocks", h, err)
	}
	afterManifest := 512 + int(h.Size) // the manifest's data is whole; its padding follows
	verify := func(cut int) *Report {
		t.Helper()
		p := filepath.Join(tmp, "cut.tar")
		if err := os.WriteFile(p, data[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(p, VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for _, cut := range []int{afterManifest, afterManifest + 1, len(data) - 1, len(data) - 511} {
		rep := verify(cut)
		if len(rep.Problems) != 1 || !errors.Is(rep.Problems[0].Err, ErrUnsafeTar) {
			t.Errorf("cut at %d of %d: got %v, want one %v", cut, len(data), rep.Problems, ErrUnsafeTar)
		}
	}
	// Cut between two entries, the archive is whole but shorter: the
	// manifest says what is missing.
	rep := verify(512 + int((h.Size+511)/512*512))
	if rep.OK() || errors.Is(rep.Problems[0].Err, ErrUnsafeTar) {
		t.Errorf("cut after the manifest: got %v, want the missing files", rep.Problems)
	}
}
