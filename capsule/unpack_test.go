package capsule

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// tarEntry describes one entry of a hand-made tar.
type rawEntry struct {
	hdr  tar.Header
	body []byte
}

// goodEntries returns the entries of a valid packed capsule.
func goodEntries(t *testing.T) []rawEntry {
	t.Helper()
	dir := fullCapsule(t, newSigner(t))
	data := packTo(t, dir, filepath.Join(t.TempDir(), "a.tar"), PackOptions{})
	tr := tar.NewReader(bytes.NewReader(data))
	var out []rawEntry
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		var buf bytes.Buffer
		buf.ReadFrom(tr)
		out = append(out, rawEntry{*h, buf.Bytes()})
	}
	return out
}

func buildTar(t *testing.T, entries []rawEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if len(e.body) > 0 {
			tw.Write(e.body)
		}
	}
	tw.Close()
	return buf.Bytes()
}

func reg(name string, body []byte) rawEntry {
	return rawEntry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, body}
}

func TestUnpackRefusesBadTarsAndLeavesNothingBehind(t *testing.T) {
	good := goodEntries(t)
	withExtra := func(extra ...rawEntry) []byte { return buildTar(t, append(append([]rawEntry{}, good...), extra...)) }
	manifestOf := func(edit func([]byte) []byte) []byte {
		var es []rawEntry
		for _, e := range good {
			if e.hdr.Name == ManifestFile {
				e.body = edit(e.body)
				e.hdr.Size = int64(len(e.body))
			}
			es = append(es, e)
		}
		return buildTar(t, es)
	}
	goodTar := buildTar(t, good)
	blob := strings.Repeat("ab", 32)

	cases := []struct {
		name string
		tar  []byte
		lim  Limits
		want string // in the error
	}{
		{"a path that climbs out with ../", withExtra(reg("../evil", []byte("x"))), Limits{}, `"../evil"`},
		{"a path inside that climbs out", withExtra(reg("memory/../../evil", []byte("x"))), Limits{}, `memory/../../evil`},
		{"an absolute path", withExtra(reg("/etc/evil", []byte("x"))), Limits{}, `"/etc/evil"`},
		{"a symbolic link", withExtra(rawEntry{tar.Header{Typeflag: tar.TypeSymlink, Name: "memory/link", Linkname: "/etc/passwd"}, nil}), Limits{}, "symbolic link"},
		{"a hard link", withExtra(rawEntry{tar.Header{Typeflag: tar.TypeLink, Name: "memory/hard", Linkname: AgentFile}, nil}), Limits{}, "hard link"},
		{"a device", withExtra(rawEntry{tar.Header{Typeflag: tar.TypeChar, Name: "memory/dev", Devmajor: 1, Devminor: 3}, nil}), Limits{}, "device"},
		{"a duplicate entry", withExtra(reg(AgentFile, []byte(`{"name":"evil"}`))), Limits{}, "duplicate"},
		{"a file outside the layout", withExtra(reg("memory/extra.txt", []byte("x"))), Limits{}, "memory/extra.txt"},
		{"a blob the manifest does not list", withExtra(reg(BlobPath(blob), []byte("x"))), Limits{}, blob},
		{"a file over the size limit", goodTar, Limits{MaxFileSize: 64}, "size limit"},
		{"a manifest over its size limit", buildTar(t, []rawEntry{{tar.Header{Typeflag: tar.TypeReg, Name: ManifestFile, Size: MaxManifestSize + 1}, nil}}), Limits{}, "manifest"},
		{"a truncated tar", goodTar[:len(goodTar)/2+100], Limits{}, "truncated"},
		{"a tar cut inside a header", goodTar[:700], Limits{}, "truncated"},
		{"a future format version", manifestOf(func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"tern.capsule/1"`), []byte(`"tern.capsule/2"`), 1)
		}), Limits{}, "upgrade tern"},
		{"a manifest that was edited", manifestOf(func(b []byte) []byte { return append(b, ' ') }), Limits{}, "canonical"},
		{"no manifest at all", buildTar(t, good[1:]), Limits{}, ManifestFile},
		{"not a tar at all", []byte("hello, this is not a tar file, just some text that goes on for a while"), Limits{}, "unsafe or malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			in := filepath.Join(root, "in.tar")
			if err := os.WriteFile(in, tc.tar, 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(root, "out")
			for _, unpack := range []struct {
				how string
				run func() error
			}{
				{"from the file", func() error { return Unpack(in, out, tc.lim) }},
				{"from a stream", func() error { return UnpackFrom(bytes.NewReader(tc.tar), out, tc.lim) }},
			} {
				err := unpack.run()
				if err == nil {
					t.Fatalf("unpack %s succeeded", unpack.how)
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("unpack %s: error %q does not mention %q", unpack.how, err, tc.want)
				}
				left, _ := os.ReadDir(root)
				if len(left) != 1 {
					t.Errorf("unpack %s left things behind: %v", unpack.how, left)
				}
			}
			// verify sees the same damage, with exit 1 semantics: a problem, not an error
			rep, verr := Verify(in, VerifyOptions{Limits: tc.lim})
			if verr != nil || rep.OK() {
				t.Errorf("verify of the bad tar: err %v, report %+v", verr, rep)
			}
		})
	}
}

func TestUnpackRefusesAnExistingTarget(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	root := t.TempDir()
	in := filepath.Join(root, "a.tar")
	packTo(t, dir, in, PackOptions{})
	err := Unpack(in, root, Limits{})
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("unpack over an existing folder: %v", err)
	}
}

func TestAnUnsafeTarErrorWrapsErrUnsafeTar(t *testing.T) {
	good := goodEntries(t)
	data := buildTar(t, append(good, reg("../x", []byte("1"))))
	_, err := indexTar(bytes.NewReader(data), Limits{})
	if !errors.Is(err, ErrUnsafeTar) {
		t.Fatalf("err = %v", err)
	}
}

func TestUnpackFromAStreamMakesTheSameCapsuleAsFromTheFile(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	root := t.TempDir()
	data := packTo(t, dir, filepath.Join(root, "a.tar"), PackOptions{})
	if err := Unpack(filepath.Join(root, "a.tar"), filepath.Join(root, "from-file"), Limits{}); err != nil {
		t.Fatal(err)
	}
	// A reader that hands out a few bytes at a time, as a network does.
	if err := UnpackFrom(iotest.HalfReader(bytes.NewReader(data)), filepath.Join(root, "from-stream"), Limits{}); err != nil {
		t.Fatal(err)
	}
	a := packTo(t, filepath.Join(root, "from-file"), filepath.Join(root, "b.tar"), PackOptions{})
	b := packTo(t, filepath.Join(root, "from-stream"), filepath.Join(root, "c.tar"), PackOptions{})
	if !bytes.Equal(a, b) || !bytes.Equal(a, data) {
		t.Fatal("the capsule unpacked from a stream packs to other bytes than the one unpacked from the file")
	}
	mustVerify(t, filepath.Join(root, "from-stream"))
}

func TestUnpackFromReadsEachFileOnceAndStillCatchesADamagedOne(t *testing.T) {
	good := goodEntries(t)
	var es []rawEntry
	for _, e := range good {
		if e.hdr.Name == AgentFile {
			e.body = bytes.Replace(e.body, []byte("{"), []byte(" "), 1) // same size, other bytes
		}
		es = append(es, e)
	}
	err := UnpackFrom(bytes.NewReader(buildTar(t, es)), filepath.Join(t.TempDir(), "out"), Limits{})
	if err == nil || !strings.Contains(err.Error(), AgentFile) || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("a file whose bytes differ from the manifest's hash: %v", err)
	}
}
