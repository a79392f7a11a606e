package capsule

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

func TestANewCapsuleHasEveryFileOfTheLayoutAndVerifies(t *testing.T) {
	s := newSigner(t)
	dir := filepath.Join(t.TempDir(), "agent")
	c, err := New(dir, "helper", s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, name := range append([]string{ManifestFile}, Layout...) {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, BlobDir)); err != nil || !st.IsDir() {
		t.Errorf("%s is not a folder: %v", BlobDir, err)
	}
	rep := mustVerify(t, dir)
	if rep.Events != 1 || rep.Signer != "" || len(rep.Notes) != 0 {
		t.Errorf("report = %+v, want one event (the creator naming itself the first member), unsigned, no notes", rep)
	}
	evs, err := c.Journal()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != journal.MemberAddedType || evs[0].Machine != s.Machine() || journal.MembersOf(c.ID(), evs).List()[0].Peer != s.Machine() {
		t.Errorf("the new journal %v does not name its creator the first member", evs)
	}
	if c.Manifest().Holder != (Holder{Peer: s.Machine(), Epoch: 0}) {
		t.Errorf("holder = %+v", c.Manifest().Holder)
	}
}

func TestNewRefusesAFolderThatIsNotEmptyButTakesAnEmptyOne(t *testing.T) {
	s := newSigner(t)
	full := t.TempDir()
	writeTree(t, full, map[string]string{"x": "1"})
	if _, err := New(full, "a", s); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("New on a full folder: %v", err)
	}
	empty := t.TempDir()
	c, err := New(empty, "a", s)
	if err != nil {
		t.Fatalf("New on an empty folder: %v", err)
	}
	c.Close()
	mustVerify(t, empty)
}

func TestACapsuleMadeByNewAppendAndSnapshotVerifies(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	rep := mustVerify(t, dir)
	if rep.Events != 5 { // the creator's member.added, three appended, one workspace.snapshot
		t.Errorf("events = %d, want 5", rep.Events)
	}
	if len(rep.Notes) != 0 {
		t.Errorf("notes on a clean capsule: %v", rep.Notes)
	}
}

// capsuleFiles lists every file of a capsule folder, relative.
func capsuleFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := dirSource{dir: dir}.list()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// positions picks the byte offsets to flip in a file of n bytes: all of
// them for a small file, an even spread and both ends otherwise.
func positions(n int) []int {
	if n <= 100 {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	var out []int
	for i := 0; i < 100; i++ {
		out = append(out, i*(n-1)/99)
	}
	return out
}

func TestFlippingAnyByteOfAnyFileIsCaughtAndNamed(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	for _, name := range capsuleFiles(t, dir) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		orig, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(orig) == 0 {
			continue // working_memory.md starts empty; truncation below covers it
		}
		for k, i := range positions(len(orig)) {
			for _, mask := range []byte{[]byte{0x01, 0x80, 0x20}[k%3]} {
				b := append([]byte(nil), orig...)
				b[i] ^= mask
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
				rep, err := Verify(dir, VerifyOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !namesFile(rep, name) {
					t.Fatalf("%s: byte %d ^ %#x: verify problems %v, want one naming %s", name, i, mask, rep.Problems, name)
				}
			}
		}
		if err := os.WriteFile(p, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, dir)
}

func TestTruncatingAnyFileIsCaughtAndNamed(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	// Give the notes a body so that their truncation can be seen too.
	writeNotes(t, dir, s, "remember the milk")
	for _, name := range capsuleFiles(t, dir) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		orig, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, len(orig) / 2, len(orig) - 1} {
			if err := os.WriteFile(p, orig[:n], 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(dir, VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !namesFile(rep, name) {
				t.Fatalf("%s truncated to %d of %d bytes: problems %v", name, n, len(orig), rep.Problems)
			}
		}
		if err := os.WriteFile(p, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustVerify(t, dir)
}

// writeNotes adds a note, signed by s, so the notes file has a body.
func writeNotes(t *testing.T, dir string, s journal.Signer, text string) {
	t.Helper()
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	draft, _, err := memory.AddDraft(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Append(context.Background(), s, 0, draft); err != nil {
		t.Fatal(err)
	}
}

func namesFile(rep *Report, name string) bool {
	for _, p := range rep.Problems {
		if p.File == name {
			return true
		}
	}
	return false
}

func TestVerifyReportsAFileTheManifestDoesNotList(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	writeTree(t, dir, map[string]string{"memory/extra.txt": "sneaky"})
	rep, _ := Verify(dir, VerifyOptions{})
	if !namesFile(rep, "memory/extra.txt") {
		t.Fatalf("problems %v", rep.Problems)
	}
}

func TestVerifyOfAnUnreadableManifestFailsAndNamesIt(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":          "{{{",
		"pretty-printed":    "{\n  \"format\": \"tern.capsule/1\"\n}",
		"a future format":   `{"format":"tern.capsule/2"}`,
		"another tool's":    `{"format":"letta.af/1"}`,
		"no format at all":  `{}`,
		"an empty manifest": ``,
	} {
		t.Run(name, func(t *testing.T) {
			dir := fullCapsule(t, newSigner(t))
			if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(dir, VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !namesFile(rep, ManifestFile) {
				t.Fatalf("problems %v", rep.Problems)
			}
		})
	}
}

func TestAMissingManifestIsAProblemNotAnError(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	os.Remove(filepath.Join(dir, ManifestFile))
	rep, err := Verify(dir, VerifyOptions{})
	if err != nil || !namesFile(rep, ManifestFile) {
		t.Fatalf("err %v, problems %v", err, rep)
	}
}

func TestASignedPackVerifiesAndNamesItsSigner(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	out := filepath.Join(t.TempDir(), "a.tar")
	packTo(t, dir, out, PackOptions{Signer: s})

	rep, err := Verify(out, VerifyOptions{Signer: s.Machine()})
	if err != nil || !rep.OK() || rep.Signer != s.Machine() {
		t.Fatalf("verify signed tar: err %v, report %+v", err, rep)
	}
	other := newSigner(t)
	rep, _ = Verify(out, VerifyOptions{Signer: other.Machine()})
	if !namesFile(rep, ManifestFile) {
		t.Errorf("a signature by someone else passed --signer: %+v", rep)
	}
	unsigned := filepath.Join(t.TempDir(), "u.tar")
	packTo(t, dir, unsigned, PackOptions{})
	rep, _ = Verify(unsigned, VerifyOptions{Signer: s.Machine()})
	if !namesFile(rep, ManifestFile) {
		t.Errorf("an unsigned tar passed --signer: %+v", rep)
	}
}

func TestAForgedSignatureIsCaught(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	c := mustOpen(t, dir)
	m := *c.Manifest()
	if err := m.Sign(s); err != nil {
		t.Fatal(err)
	}
	m.Signature.Signer = newSigner(t).Machine() // claim someone else signed it
	data, err := m.Encode()                     // a correct digest over the forgery
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, _ := Verify(dir, VerifyOptions{})
	if !namesFile(rep, ManifestFile) {
		t.Fatalf("forged signature passed: %+v", rep)
	}
}

func TestVerifyNamesTheBadJournalLine(t *testing.T) {
	s := newSigner(t)
	// setup returns a fresh capsule and the next two valid events signed by
	// s, which the cases append after the seal in some damaged form.
	setup := func(t *testing.T) (dir string, next [2][]byte) {
		dir = fullCapsule(t, s)
		before, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
		jpath := filepath.Join(dir, filepath.FromSlash(JournalFile))
		j, _ := os.ReadFile(jpath)
		d, _ := OpenDir(context.Background(), dir, nil)
		evs, err := d.Append(context.Background(), s, 0, userMessage(t, "last"), userMessage(t, "after"))
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		// Roll the journal and manifest back to before that append.
		os.WriteFile(jpath, j, 0o644)
		os.WriteFile(filepath.Join(dir, ManifestFile), before, 0o644)
		return dir, [2][]byte{evs[0].Line(), evs[1].Line()}
	}
	cases := []struct {
		name string
		tail func(next [2][]byte) []byte
		want string
	}{
		{"a line that is not JSON", func([2][]byte) []byte { return []byte("this is not json") }, "line 6"},
		{"a bad signature", func(n [2][]byte) []byte {
			return bytes.Replace(n[0], []byte(`"text":"last"`), []byte(`"text":"lost"`), 1)
		}, "line 6"},
		{"a future format", func(n [2][]byte) []byte { return bytes.Replace(n[0], []byte(`"v":1`), []byte(`"v":2`), 1) }, "newer"},
		{"a broken chain (seq 6 missing)", func(n [2][]byte) []byte { return n[1] }, "seq"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, next := setup(t)
			mustVerify(t, dir)
			f, _ := os.OpenFile(filepath.Join(dir, filepath.FromSlash(JournalFile)), os.O_APPEND|os.O_WRONLY, 0)
			f.Write(append(tc.tail(next), '\n'))
			f.Close()
			rep, err := Verify(dir, VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !namesFile(rep, JournalFile) || !strings.Contains(fmt.Sprint(rep.Problems), tc.want) {
				t.Fatalf("problems %v, want %s named with %q", rep.Problems, JournalFile, tc.want)
			}
		})
	}
}

func TestVerifyRefusesASecretStoredUnderEnv(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := []byte(`{"workdir":"w","packages":[],"env":{"AWS_SECRET_ACCESS_KEY":"AKIA..."},"secrets":[]}`)
	if err := d.commit(map[string][]byte{EnvironmentFile: spec}, nil); err != nil {
		t.Fatal(err)
	}
	d.Close()
	rep, _ := Verify(dir, VerifyOptions{})
	if !namesFile(rep, EnvironmentFile) || !strings.Contains(fmt.Sprint(rep.Problems), "secrets") {
		t.Fatalf("problems %v", rep.Problems)
	}
}
