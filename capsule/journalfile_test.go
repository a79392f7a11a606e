package capsule

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The lines of a capsule folder's journal are a set: their order carries
// no meaning and a repeated line is the same event. Verify accepts both,
// and Pack writes the set, in total order, each event once.
func TestAJournalIsReadAsASetOfLines(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	tmp := t.TempDir()
	want := packTo(t, dir, filepath.Join(tmp, "want.tar"), PackOptions{})

	jpath := filepath.Join(dir, filepath.FromSlash(JournalFile))
	orig, err := os.ReadFile(jpath)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(orig, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty piece after the last newline
	tests := map[string][]byte{
		"lines in reverse order": bytes.Join(reversed(lines), nil),
		"a line written twice":   append(slices.Clone(orig), lines[1]...),
		"every line twice":       append(slices.Clone(orig), orig...),
	}
	for name, journal := range tests {
		t.Run(name, func(t *testing.T) {
			c := copyCapsuleWithJournal(t, dir, journal)
			if rep := mustVerify(t, c); rep.Events != len(lines) {
				t.Errorf("verify counted %d events, want each of the %d once", rep.Events, len(lines))
			}
			got := packTo(t, c, filepath.Join(t.TempDir(), "got.tar"), PackOptions{})
			if !bytes.Equal(got, want) {
				t.Fatal("the pack differs from the pack of the journal in total order, each event once")
			}
		})
	}
}

func reversed(s [][]byte) [][]byte {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// copyCapsuleWithJournal copies the capsule folder dir with journal as its
// journal, sealed in a new manifest, and returns the copy's path.
func copyCapsuleWithJournal(t *testing.T, dir string, journal []byte) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(out, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, filepath.FromSlash(JournalFile)), journal, 0o644); err != nil {
		t.Fatal(err)
	}
	m := *mustOpen(t, dir).Manifest()
	m.Files = maps.Clone(m.Files)
	m.Files[JournalFile] = entryOf(journal)
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, ManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}
