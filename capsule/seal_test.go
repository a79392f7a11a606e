package capsule

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An append that changes no other file leaves the manifest alone: the
// journal's fsync makes the events durable, and a reader takes the lines
// after the seal (a note, not a problem). The seal catches up when the Dir
// closes, and when the journal runs sealLag past it.
func TestAppendsSealTheJournalLazilyAndClosingSealsTheRest(t *testing.T) {
	s := newSigner(t)
	dir := filepath.Join(t.TempDir(), "agent")
	c, err := New(dir, "lazy", s.Machine())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	ctx := context.Background()
	d, err := OpenDir(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	manifest := func() []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := manifest()
	var acked []string
	for i := range 10 {
		evs, err := d.Append(ctx, s, 0, userMessage(t, strings.Repeat("x", i)))
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, evs[0].ID)
	}
	if !bytes.Equal(manifest(), before) {
		t.Fatal("an append of a message rewrote the manifest")
	}

	// What a kill -9 now would leave: every acknowledged event, readable.
	crashed := filepath.Join(t.TempDir(), "crashed")
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(crashed, VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("the folder as a crash would leave it: %v, %v", err, rep.Issues())
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "after the manifest's seal") {
		t.Fatalf("notes %q, want the one about events after the seal", rep.Notes)
	}
	c2, err := OpenDir(ctx, crashed, nil)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := c2.Journal()
	c2.Close()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, e := range evs {
		have[e.ID] = true
	}
	for _, id := range acked {
		if !have[id] {
			t.Fatalf("acknowledged event %s is missing after the crash", id)
		}
	}

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err = Verify(dir, VerifyOptions{})
	if err != nil || !rep.OK() || len(rep.Notes) != 0 {
		t.Fatalf("after Close: %v, issues %v, notes %q; want the whole journal sealed", err, rep.Issues(), rep.Notes)
	}

	// Past sealLag, the seal catches up without a Close.
	d, err = OpenDir(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	big := strings.Repeat("y", 64<<10)
	for range sealLag/(64<<10) + 1 {
		if _, err := d.Append(ctx, s, 0, userMessage(t, big)); err != nil {
			t.Fatal(err)
		}
	}
	m := d.Manifest().Files[JournalFile]
	jl, err := d.journalLog()
	if err != nil {
		t.Fatal(err)
	}
	if lag := jl.Size() - m.Size; lag >= sealLag {
		t.Fatalf("the seal is %d bytes behind the journal, want less than %d", lag, sealLag)
	}
}
