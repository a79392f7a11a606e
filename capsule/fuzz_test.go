package capsule

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tern-dev/tern/journal"
)

// The fuzz targets cover every parser of outside bytes in this package.
// Their seed corpora run with every go test; .ci/run also fuzzes each
// briefly.

func FuzzParseManifest(f *testing.F) {
	dir := fullCapsule(f, newSigner(f))
	good, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"epoch"`), []byte(`"Epoch"`), 1))
	f.Add([]byte(`{"format":"tern.capsule/2"}`))
	f.Add([]byte(`{"format":"tern.capsule/1","files":{"../x":{"sha256":"","size":-1}}}`))
	f.Add([]byte(`null`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		// Whatever parses is exactly what tern would write.
		again, err := m.Encode()
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("a parsed manifest does not re-encode to its bytes: %v", err)
		}
		for name := range m.Files {
			if err := checkName(name); err != nil {
				t.Fatalf("accepted a bad path: %v", err)
			}
		}
	})
}

func FuzzTarReader(f *testing.F) {
	dir := fullCapsule(f, newSigner(f))
	var buf bytes.Buffer
	c, err := Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	if err := Pack(c, &buf, PackOptions{}); err != nil {
		f.Fatal(err)
	}
	c.Close()
	good := buf.Bytes()
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:512])
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := indexTar(bytes.NewReader(data), Limits{MaxFileSize: 1 << 20, MaxTotalSize: 4 << 20, MaxEntries: 1000})
		if err != nil {
			return
		}
		for name, e := range entries {
			if name != ManifestFile {
				if err := checkName(name); err != nil {
					t.Fatalf("accepted entry %q: %v", name, err)
				}
			}
			if e.offset < 0 || e.offset+e.size > int64(len(data)) {
				t.Fatalf("entry %q points outside the tar", name)
			}
		}
		// The whole pipeline must not panic on whatever the index accepts.
		tmp := filepath.Join(t.TempDir(), "x.tar")
		os.WriteFile(tmp, data, 0o644)
		if rep, err := Verify(tmp, VerifyOptions{Workers: 1}); err == nil && rep.OK() && !bytes.Equal(data, good) {
			// A different tar that verifies must still hold a consistent capsule.
			if _, err := Open(tmp); err != nil {
				t.Fatalf("verified but does not open: %v", err)
			}
		}
	})
}

// A tar read as a stream (a peer's, an upload) is unpacked whole or not
// at all: on an error nothing is left, and what it unpacks verifies.
func FuzzUnpackFrom(f *testing.F) {
	dir := fullCapsule(f, newSigner(f))
	c, err := Open(dir)
	if err != nil {
		f.Fatal(err)
	}
	var whole, bare bytes.Buffer
	if err := Pack(c, &whole, PackOptions{}); err != nil {
		f.Fatal(err)
	}
	if err := Pack(c, &bare, PackOptions{BlobsUpTo: -1}); err != nil {
		f.Fatal(err)
	}
	c.Close()
	f.Add(whole.Bytes())
	f.Add(bare.Bytes())
	f.Add(whole.Bytes()[:whole.Len()/2])
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		out := filepath.Join(root, "out")
		err := UnpackFrom(bytes.NewReader(data), out, Limits{MaxFileSize: 1 << 20, MaxTotalSize: 4 << 20, MaxEntries: 1000})
		if err != nil {
			if left, _ := os.ReadDir(root); len(left) > 0 {
				t.Fatalf("a refused tar left %v", left)
			}
			return
		}
		rep, err := Verify(out, VerifyOptions{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range rep.Problems {
			if !errors.Is(p.Err, journal.ErrFork) {
				t.Fatalf("unpacked a capsule that does not verify: %v", p)
			}
		}
	})
}

func FuzzParseEnvSpec(f *testing.F) {
	f.Add([]byte(`{"workdir":"w","packages":[],"env":{},"secrets":[]}`))
	f.Add([]byte(`{"workdir":"w","packages":["git"],"env":{"GITHUB_TOKEN":"x"},"secrets":[]}`))
	f.Add([]byte(`{"workdir":"w","packages":[],"env":{"A":"1"},"secrets":["A","B"]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseEnvSpec(data)
		if err != nil {
			return
		}
		for name := range s.Env {
			if LooksSecret(name) {
				t.Fatalf("accepted the secret-looking variable %s under env", name)
			}
		}
	})
}
