package memory

import (
	"bytes"
	"context"
	"testing"

	"github.com/tern-dev/tern/journal"
)

// index.json is read from capsules anyone may send: it parses or fails,
// never panics, and what parses encodes to what parses back the same.
func FuzzParseIndex(f *testing.F) {
	items := []Item{{Note: "note_0000000000000001", Version: "v1", Text: "alpha beta"}, {File: "a.md", CID: "bafk", Text: "gamma"}}
	idx, _ := Build(context.Background(), items, Builtin{}, nil)
	f.Add(idx.Encode())
	f.Add(EmptyIndex)
	f.Add([]byte(`{"format":"tern.index/1","embedder":{"name":"x","dim":1},"entries":[{"note":"n","version":"v","vector":"AQ=="}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := ParseIndex(data)
		if err != nil {
			return
		}
		enc := idx.Encode()
		again, err := ParseIndex(enc)
		if err != nil || !bytes.Equal(again.Encode(), enc) {
			t.Fatalf("encode of a parsed index does not parse back the same: %v", err)
		}
		idx.Search(make([]float32, idx.Embedder.Dim), 3, nil)
	})
}

// A person's edit of working_memory.md gives note drafts that pass the
// checks of an append, or an error; never a panic.
func FuzzEdits(f *testing.F) {
	ms := newMachines(f, 1)
	e1, _ := ms[0].add("First note.\n# escaped", "x")
	e2, _ := ms[0].add("Second note.")
	notes := Fold([]*journal.Event{e1, e2})
	f.Add(Render(notes))
	f.Add([]byte("## new\nTags: a, b\n\ntext\n"))
	f.Add([]byte("# Working memory\n<!--\n## note_0000000000000000\n-->\n## " + notes[0].ID + "\n\\\\x\n"))
	f.Fuzz(func(t *testing.T, md []byte) {
		drafts, _, err := Edits(notes, md)
		if err != nil {
			return
		}
		for _, d := range drafts {
			if err := CheckNoteBody(d.Body); err != nil {
				t.Fatalf("an edit gave a draft an append refuses: %v\n%s", err, d.Body)
			}
		}
	})
}

func FuzzCheckNoteBody(f *testing.F) {
	f.Add([]byte(`{"note":"note_0123456789abcdef","op":"add","text":"x","tags":["a"]}`))
	f.Add([]byte(`{"note":"note_0123456789abcdef","op":"revise","revises":["e"],"text":"y"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_ = CheckNoteBody(body)
	})
}
