package memory

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/tern-dev/tern/journal"
)

// machine writes one chain of events, as a node would.
type machine struct {
	t     testing.TB
	s     journal.Signer
	seq   uint64
	prev  string
	clock *uint64 // shared by the machines of a test: a total order
}

func newMachines(t testing.TB, n int) []*machine {
	var clock uint64
	out := make([]*machine, n)
	for i := range out {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s, err := journal.NewKeySigner(k)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = &machine{t: t, s: s, clock: &clock}
	}
	return out
}

func (m *machine) write(d journal.Draft) *journal.Event {
	m.t.Helper()
	m.seq++
	*m.clock++
	e, err := journal.NewEvent(m.s, journal.Stamp{Seq: m.seq, Prev: m.prev, Clock: *m.clock, Time: time.Unix(1_800_000_000+int64(*m.clock), 0)}, d)
	if err != nil {
		m.t.Fatal(err)
	}
	m.prev = e.ID
	return e
}

func (m *machine) add(text string, tags ...string) (*journal.Event, string) {
	m.t.Helper()
	d, id, err := AddDraft(text, tags)
	if err != nil {
		m.t.Fatal(err)
	}
	return m.write(d), id
}

func view(events ...[]*journal.Event) []*journal.Event {
	var all []*journal.Event
	for _, e := range events {
		all = journal.Merge(all, e)
	}
	v, _ := journal.Readable(all)
	return v
}

func TestNotesWrittenApartAllSurviveAndTwoRevisionsOfOneNoteAreAConflict(t *testing.T) {
	ms := newMachines(t, 2)
	laptop, desktop := ms[0], ms[1]
	shared, id := laptop.add("The deploy goes through the staging cluster first.", "deploy")
	base := []*journal.Event{shared}
	desktop.clock = laptop.clock // both saw the add
	note := Fold(view(base)).Find(id)

	// Apart: each machine adds a note and revises the shared one.
	a1, _ := laptop.add("Prefers tabs over spaces.")
	d1, _ := desktop.add("The dev server listens on port 8080.")
	ra, _ := ReviseDraft(note, "The deploy goes through staging, then canary.", []string{"deploy"})
	rd, _ := ReviseDraft(note, "Deploys need a green CI run first.", nil)
	onLaptop := []*journal.Event{shared, a1, laptop.write(ra)}
	onDesktop := []*journal.Event{shared, d1, desktop.write(rd)}

	one, two := Fold(view(onLaptop, onDesktop)), Fold(view(onDesktop, onLaptop))
	if !bytes.Equal(Render(one), Render(two)) {
		t.Fatal("the merge order changed the working memory file")
	}
	if len(one.Live()) != 3 {
		t.Fatalf("%d notes after the merge, want 3", len(one.Live()))
	}
	c := one.Find(id)
	if !c.Conflict() || len(c.Heads) != 2 {
		t.Fatalf("the note revised on both machines has heads %+v, want a conflict of two", c.Heads)
	}
	md := string(Render(one))
	for _, want := range []string{"(conflict: 2 versions written apart)", "staging, then canary", "green CI run"} {
		if !strings.Contains(md, want) {
			t.Fatalf("the file does not show %q:\n%s", want, md)
		}
	}

	// A revision that names both settles it, wherever it is merged.
	settle, err := ReviseDraft(c, "Deploys need green CI, then staging, then canary.", []string{"deploy"})
	if err != nil {
		t.Fatal(err)
	}
	settled := Fold(view(onLaptop, onDesktop, []*journal.Event{laptop.write(settle)})).Find(id)
	if settled.Conflict() || settled.Text() != "Deploys need green CI, then staging, then canary." {
		t.Fatalf("after the settling revision: %+v", settled.Heads)
	}
}

func TestRemovedNotesLeaveTheFileAndARemovalApartFromARevisionIsAConflict(t *testing.T) {
	ms := newMachines(t, 2)
	a, b := ms[0], ms[1]
	e, id := a.add("Stand-up is at 9:30.")
	b.clock = a.clock
	n := Fold(view([]*journal.Event{e})).Find(id)
	rm, _ := RemoveDraft(n)
	rv, _ := ReviseDraft(n, "Stand-up moved to 10:00.", nil)
	removed := []*journal.Event{e, a.write(rm)}
	if got := Fold(view(removed)).Live(); len(got) != 0 || Render(Fold(view(removed))) != nil {
		t.Fatalf("a removed note is still live: %v", got)
	}
	notes := Fold(view(removed, []*journal.Event{e, b.write(rv)}))
	if both := notes.Find(id); !both.Conflict() || both.Removed() {
		t.Fatalf("removal and revision apart: %+v, want a conflict that is not removed", both.Heads)
	}
	if md := string(Render(notes)); !strings.Contains(md, "(removed)") || !strings.Contains(md, "moved to 10:00") {
		t.Fatalf("the conflict of a removal and a revision:\n%s", md)
	}
}

func TestAnUnchangedFileGivesNoEditsAndEachKindOfEditItsEvent(t *testing.T) {
	ms := newMachines(t, 1)
	m := ms[0]
	e1, id1 := m.add("First line.\n# not a heading\n\\ a backslash\nTags: not tags", "x")
	e2, id2 := m.add("Second note.")
	e3, id3 := m.add("Third note.")
	notes := Fold(view([]*journal.Event{e1, e2, e3}))
	md := Render(notes)
	if edits, _, err := Edits(notes, md); err != nil || len(edits) != 0 {
		t.Fatalf("the unchanged file gives %v, %v", edits, err)
	}
	if got := notes.Find(id1).Text(); got != "First line.\n# not a heading\n\\ a backslash\nTags: not tags" {
		t.Fatalf("text %q", got)
	}

	edited := strings.Replace(string(md), "Second note.", "Second note, revised.", 1)
	start, shown := strings.Index(edited, "## "+id3), strings.Index(edited, mdShown)
	edited = edited[:start] + "## new\nTags: fresh\n\nA note written by hand.\n\n" + edited[shown:]
	// A note written after the file was rendered is not in its last line:
	// the edit leaves it alone.
	later, _ := m.add("Written after the file.")
	edits, sum, err := Edits(Fold(view([]*journal.Event{e1, e2, e3, later})), []byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	if sum != (EditSummary{Revised: 1, Removed: 1, Added: 1}) {
		t.Fatalf("summary %v", sum)
	}
	var ops []string
	for _, d := range edits {
		var b NoteBody
		json.Unmarshal(d.Body, &b)
		ops = append(ops, b.Op+" "+b.Note+" "+b.Text+" "+strings.Join(b.Tags, ","))
		if d.Type != NoteType {
			t.Fatalf("type %q", d.Type)
		}
	}
	if len(ops) != 3 || ops[0] != "revise "+id2+" Second note, revised. " || !strings.HasPrefix(ops[1], "add note_") ||
		!strings.HasSuffix(ops[1], " A note written by hand. fresh") || ops[2] != "remove "+id3+"  " {
		t.Fatalf("edits:\n%s", strings.Join(ops, "\n"))
	}

	// An emptied file (a truncation, an editor's crash) removes nothing.
	if edits, _, err := Edits(notes, nil); err != nil || len(edits) != 0 {
		t.Fatalf("an empty file gives %v, %v", edits, err)
	}
	for _, bad := range []struct{ md, says string }{
		{"## note_0000000000000000\n\ntext\n", "no such note"},
		{string(md) + "\n#### stray\n", "a heading tern does not know"},
		{strings.Replace(string(md), "Second note.", "", 1), "delete its whole section"},
		{strings.Replace(string(md), "## "+id1, "stray words\n\n## "+id1, 1), "text outside a note's section"},
	} {
		if _, _, err := Edits(notes, []byte(bad.md)); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%q: %v, want %q", bad.md, err, bad.says)
		}
	}
}

func TestAConflictKeptAsItIsStaysAndOneVersionKeptSettlesIt(t *testing.T) {
	ms := newMachines(t, 2)
	a, b := ms[0], ms[1]
	e, id := a.add("Lunch at noon.")
	b.clock = a.clock
	n := Fold(view([]*journal.Event{e})).Find(id)
	r1, _ := ReviseDraft(n, "Lunch at one.", nil)
	r2, _ := ReviseDraft(n, "Lunch at half past twelve.", nil)
	notes := Fold(view([]*journal.Event{e, a.write(r1)}, []*journal.Event{e, b.write(r2)}))
	md := string(Render(notes))
	if edits, _, err := Edits(notes, []byte(md)); err != nil || len(edits) != 0 {
		t.Fatalf("the conflict left alone gives %v, %v", edits, err)
	}
	// Keep the first version's section only.
	i := strings.Index(md, "### version")
	j := strings.Index(md[i+1:], "### version") + i + 1
	edits, _, err := Edits(notes, []byte(md[:j]))
	if err != nil || len(edits) != 1 {
		t.Fatalf("one version kept: %v, %v", edits, err)
	}
	var body NoteBody
	json.Unmarshal(edits[0].Body, &body)
	if body.Op != OpRevise || len(body.Revises) != 2 || body.Text != notes.Find(id).Heads[0].Text {
		t.Fatalf("the settling revision: %+v", body)
	}
}

func TestADraftOfAnotherShapeIsRefusedNamingTheField(t *testing.T) {
	for body, says := range map[string]string{
		`{"note":"n1","op":"add","text":"x"}`:                                          "body.note",
		`{"note":"note_0123456789abcdef","op":"edit","text":"x"}`:                      "body.op",
		`{"note":"note_0123456789abcdef","op":"add"}`:                                  "body.text",
		`{"note":"note_0123456789abcdef","op":"revise","text":"x"}`:                    "body.revises",
		`{"note":"note_0123456789abcdef","op":"add","text":" x"}`:                      "trimmed",
		`{"note":"note_0123456789abcdef","op":"add","text":"x","tags":["B"]}`:          "body.tags[0]",
		`{"note":"note_0123456789abcdef","op":"add","text":"x","colour":"red"}`:        "colour",
		`{"note":"note_0123456789abcdef","op":"remove","revises":["e"],"text":"gone"}`: "no text",
	} {
		if err := CheckNoteBody([]byte(body)); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want it to say %q", body, err, says)
		}
	}
}

func TestTheBuiltinIndexIsTheSameBytesWhateverItReuses(t *testing.T) {
	ms := newMachines(t, 1)
	var evs []*journal.Event
	for _, s := range []string{"alpha beta", "gamma delta", "epsilon"} {
		e, _ := ms[0].add(s)
		evs = append(evs, e)
	}
	_, fresh, err := Derive(context.Background(), view(evs), BuiltinSpec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	more, _ := ms[0].add("zeta")
	_, grown, _ := Derive(context.Background(), view(append(evs, more)), BuiltinSpec, nil, fresh)
	_, rebuilt, _ := Derive(context.Background(), view(append(evs, more)), BuiltinSpec, nil, nil)
	if !bytes.Equal(grown.Encode(), rebuilt.Encode()) {
		t.Fatal("an index grown from the last one differs from one built afresh")
	}
	enc := rebuilt.Encode()
	idx, err := ParseIndex(enc)
	if err != nil || len(idx.Entries) != 4 || idx.Embedder != BuiltinSpec {
		t.Fatalf("parse: %v, %+v", err, idx)
	}
	if !bytes.Equal(idx.Encode(), enc) {
		t.Fatal("parse and encode do not round-trip")
	}
	// Encode writes what encoding/json writes, a path that needs escaping
	// included.
	idx.Entries = append(idx.Entries[:1], Entry{File: "docs/\"quoted\" <&> é.md", CID: "bafk", Vector: idx.Entries[0].Vector})
	for _, line := range bytes.Split(idx.Encode(), []byte("\n"))[1:3] {
		line = bytes.TrimSuffix(line, []byte(","))
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if want, _ := json.Marshal(&e); !bytes.Equal(want, line) {
			t.Fatalf("Encode wrote %s, encoding/json %s", line, want)
		}
	}
	if _, none, _ := Derive(context.Background(), nil, BuiltinSpec, nil, nil); !bytes.Equal(none.Encode(), EmptyIndex) {
		t.Fatalf("no notes: %s", none.Encode())
	}
}

// The labelled set in testdata: each query's expected note should come
// first; recall@5 is reported.
func TestSearchFindsTheLabelledNotes(t *testing.T) {
	data, err := os.ReadFile("testdata/labelled.json")
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Notes []struct {
			ID   string   `json:"id"`
			Text string   `json:"text"`
			Tags []string `json:"tags"`
		} `json:"notes"`
		Queries []struct {
			Query  string `json:"query"`
			Expect string `json:"expect"`
		} `json:"queries"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatal(err)
	}
	m := newMachines(t, 1)[0]
	var evs []*journal.Event
	noteOf := map[string]string{}
	for _, n := range set.Notes {
		e, id := m.add(n.Text, n.Tags...)
		evs = append(evs, e)
		noteOf[n.ID] = id
	}
	notes := Fold(view(evs))
	idx, err := Build(context.Background(), NoteItems(notes), Builtin{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, at5 := 0, 0
	for _, q := range set.Queries {
		results, _, err := Search(context.Background(), notes, NoteItems(notes), idx, Builtin{}, Query{Text: q.Query, K: 5})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range results {
			if r.Note == noteOf[q.Expect] {
				at5++
				if i == 0 {
					first++
				}
			}
		}
	}
	n := len(set.Queries)
	t.Logf("labelled set: %d queries, expected note first for %d, recall@5 %.2f", n, first, float64(at5)/float64(n))
	if at5 < n*9/10 || first < n*3/4 {
		t.Fatalf("recall@5 %d/%d, first %d/%d: the built-in embedder finds too little", at5, n, first, n)
	}
}

// The built-in embedder's buckets collide (384 of them); a search judges
// its candidates by their features, so a word that shares only a bucket
// with the query finds nothing, and the note that says it comes first.
func TestASearchFindsWhatSharesWordsAndNothingElse(t *testing.T) {
	m := newMachines(t, 1)[0]
	var evs []*journal.Event
	for _, s := range []string{"Printer fixed, floor 2", "via node folder", "Deploys need a green CI run first."} {
		e, _ := m.add(s)
		evs = append(evs, e)
	}
	notes := Fold(view(evs))
	search := func(q string) []Result {
		r, _, err := Search(context.Background(), notes, NoteItems(notes), nil, Builtin{}, Query{Text: q})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := search("printer"); len(r) != 1 || r[0].Text != "Printer fixed, floor 2" {
		t.Fatalf("printer: %+v", r)
	}
	for _, q := range []string{"zebra", "xylophone", "stand"} {
		if r := search(q); len(r) != 0 {
			t.Fatalf("%s found %+v", q, r)
		}
	}
}
