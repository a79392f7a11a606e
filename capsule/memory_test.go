package capsule

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

// notesIn appends drafts made from the folder's current notes.
func notesIn(t *testing.T, dir string, s journal.Signer, make func(memory.Notes) []journal.Draft) {
	t.Helper()
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, err := d.Memory()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Append(context.Background(), s, 0, make(m.Notes)...); err != nil {
		t.Fatal(err)
	}
}

func addNote(t *testing.T, text string) journal.Draft {
	t.Helper()
	d, _, err := memory.AddDraft(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Notes written on two machines apart all survive the merge, in either
// order, with the same bytes; a note revised on both is a conflict; the
// merged index is what a rebuild makes.
func TestNotesWrittenApartSurviveTheMergeAsTheSameBytes(t *testing.T) {
	a, b, laptop, desktop := diverge(t)
	notesIn(t, a, laptop, func(memory.Notes) []journal.Draft {
		return []journal.Draft{addNote(t, "The deploy goes through staging first.")}
	})
	// Both copies get the shared note (b learns it by a merge), then go apart.
	shared := filepath.Join(t.TempDir(), "shared")
	merge(t, a, b, shared)
	os.RemoveAll(b)
	os.Rename(shared, b)
	revise := func(text string) func(memory.Notes) []journal.Draft {
		return func(ns memory.Notes) []journal.Draft {
			d, err := memory.ReviseDraft(ns.Live()[0], text, nil)
			if err != nil {
				t.Fatal(err)
			}
			return []journal.Draft{d, addNote(t, "Written apart: "+text)}
		}
	}
	notesIn(t, a, laptop, revise("staging, then canary"))
	notesIn(t, b, desktop, revise("green CI before any deploy"))

	root := t.TempDir()
	ab, ba := filepath.Join(root, "ab"), filepath.Join(root, "ba")
	merge(t, a, b, ab)
	merge(t, b, a, ba)
	for _, name := range []string{NotesFile, IndexFile} {
		if !bytes.Equal(readFile(t, ab, name), readFile(t, ba, name)) {
			t.Fatalf("%s differs between the merge orders", name)
		}
	}
	md := string(readFile(t, ab, NotesFile))
	for _, want := range []string{"Written apart: staging, then canary", "Written apart: green CI", "(conflict: 2 versions written apart)"} {
		if !strings.Contains(md, want) {
			t.Fatalf("the merged notes lack %q:\n%s", want, md)
		}
	}
	mustVerify(t, ab)

	d, err := OpenDir(context.Background(), ab, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := d.Memory()
	rebuilt, err := memory.Build(context.Background(), m.Items, memory.Builtin{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if !bytes.Equal(rebuilt.Encode(), readFile(t, ab, IndexFile)) {
		t.Fatal("the merged index differs from one rebuilt from the notes")
	}
}

// An index altered, manifest and all, is caught by verify, and WriteIndex
// of a rebuilt one makes the capsule whole again.
func TestATamperedIndexIsCaughtAndRebuilt(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	notesIn(t, dir, s, func(memory.Notes) []journal.Draft {
		return []journal.Draft{addNote(t, "one"), addNote(t, "two")}
	})
	good := readFile(t, dir, IndexFile)
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := memory.ParseIndex(good)
	idx.Entries = idx.Entries[:1] // a note's vector gone
	if err := d.commit(map[string][]byte{IndexFile: idx.Encode()}, nil); err != nil {
		t.Fatal(err)
	}
	d.Close()
	rep, _ := Verify(dir, VerifyOptions{})
	if rep.OK() || !strings.Contains(rep.Issues()[0].String(), "does not match the notes") {
		t.Fatalf("verify of an altered index: %v", rep.Issues())
	}
	d, _ = OpenDir(context.Background(), dir, nil)
	m, _ := d.Memory()
	rebuilt, _ := memory.Build(context.Background(), m.Items, memory.Builtin{}, nil)
	if err := d.WriteIndex(rebuilt); err != nil {
		t.Fatal(err)
	}
	d.Close()
	mustVerify(t, dir)
	if !bytes.Equal(readFile(t, dir, IndexFile), good) {
		t.Fatal("the rebuilt index is not the one the notes derive")
	}
}

// An edit of working_memory.md, accepted, becomes note events, and the
// file becomes what the journal derives.
func TestAnAcceptedEditOfTheNotesBecomesNoteEvents(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	notesIn(t, dir, s, func(memory.Notes) []journal.Draft {
		return []journal.Draft{addNote(t, "Keep"), addNote(t, "Change me"), addNote(t, "Drop me")}
	})
	md := string(readFile(t, dir, NotesFile))
	md = strings.Replace(md, "Change me", "Changed", 1)
	i, j := strings.LastIndex(md, "## note_"), strings.LastIndex(md, "<!-- shown:")
	md = md[:i] + "## new\n\nAdded by hand\n\n" + md[j:]
	os.WriteFile(filepath.Join(dir, filepath.FromSlash(NotesFile)), []byte(md), 0o644)

	// A note written before the edit is accepted neither loses the edit nor
	// is removed by it.
	notesIn(t, dir, s, func(memory.Notes) []journal.Draft { return []journal.Draft{addNote(t, "Written meanwhile")} })
	if got := string(readFile(t, dir, NotesFile)); got != md {
		t.Fatalf("a note appended overwrote the unaccepted edit:\n%s", got)
	}

	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := d.Events()
	n := len(before)
	accepted, err := d.AcceptEdits(context.Background(), s)
	if err != nil || len(accepted) != 1 || accepted[0] != NotesFile+" (1 revised, 1 removed, 1 added)" {
		t.Fatalf("accept: %v, %v", accepted, err)
	}
	after, _ := d.Events()
	m, _ := d.Memory()
	d.Close()
	if len(after)-n != 3 {
		t.Fatalf("%d events for a revision, a removal and an addition", len(after)-n)
	}
	var texts []string
	for _, v := range m.Notes.Views() {
		texts = append(texts, v.Text)
	}
	if strings.Join(texts, "|") != "Keep|Changed|Written meanwhile|Added by hand" {
		t.Fatalf("notes after the accept: %v", texts)
	}
	if !bytes.Equal(readFile(t, dir, NotesFile), memory.Render(m.Notes)) {
		t.Fatal("the file is not what the journal derives")
	}
	mustVerify(t, dir)
}
