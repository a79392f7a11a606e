package capsule

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// An append that changes no other file leaves the manifest alone: the
// journal's fsync makes the events durable, and a reader takes the lines
// after the seal (a note, not a problem). The seal catches up when the Dir
// closes, and when the journal runs sealLag past it.
func TestAppendsSealTheJournalLazilyAndClosingSealsTheRest(t *testing.T) {
	s := newSigner(t)
	dir := newFolder(t, t.TempDir(), "lazy", s)
	ctx := context.Background()
	d := openDir(t, dir, time.Hour)
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
	d = openDir(t, dir, time.Hour)
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

// Events left after the seal are sealed sealAfter later without a Close,
// so the part of a journal that verify could not tell was cut is bounded
// in time as well as in bytes. The bubble's clock runs the timer.
func TestEventsLeftAfterTheSealAreSealedSoonWithoutAClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSigner(t)
		dir := newFolder(t, t.TempDir(), "timed", s)
		ctx := context.Background()
		d := openDir(t, dir, sealAfter)
		if _, err := d.Append(ctx, s, 0, userMessage(t, "hello")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !d.sealBehind() {
			t.Fatal("the append sealed at once; want the seal left to the timer")
		}
		waitSealed(t, d)
		rep, err := Verify(dir, VerifyOptions{})
		if err != nil || !rep.OK() || len(rep.Notes) != 0 {
			t.Fatalf("after the timed seal: %v, issues %v, notes %q", err, rep.Issues(), rep.Notes)
		}
	})
}

// A second Close does nothing, even after its first failed to seal and
// another writer took the folder: it must not write this Dir's older
// manifest over the newer one.
func TestClosingADirAgainWritesNothing(t *testing.T) {
	s := newSigner(t)
	dir := newFolder(t, t.TempDir(), "twice", s)
	ctx := context.Background()
	first := openDir(t, dir, time.Hour)
	if _, err := first.Append(ctx, s, 0, userMessage(t, "one")); err != nil {
		t.Fatal(err)
	}
	// The seal fails: where manifest.json goes stands a folder.
	mpath := filepath.Join(dir, ManifestFile)
	if err := os.Rename(mpath, mpath+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(mpath, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err == nil {
		t.Fatal("Close sealed over a folder")
	}
	if err := os.RemoveAll(mpath); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(mpath+".aside", mpath); err != nil {
		t.Fatal(err)
	}
	second := openDir(t, dir, time.Hour)
	if _, err := second.Append(ctx, s, 0, userMessage(t, "two")); err != nil {
		t.Fatal(err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	sealed, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	first.Close() // again
	if now, _ := os.ReadFile(filepath.Join(dir, ManifestFile)); !bytes.Equal(now, sealed) {
		t.Fatal("closing a Dir again rewrote the manifest")
	}
}

// The first append to a capsule whose manifest is signed seals at once,
// dropping the signature: a signature must not stand beside events it
// does not cover.
func TestAnAppendToASignedCapsuleDropsTheSignatureAtOnce(t *testing.T) {
	s := newSigner(t)
	root := t.TempDir()
	dir := newFolder(t, root, "signed", s)
	tarPath := filepath.Join(root, "signed.tar")
	packTo(t, dir, tarPath, PackOptions{Signer: s})
	unpacked := filepath.Join(root, "unpacked")
	if err := Unpack(tarPath, unpacked, Limits{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d := openDir(t, unpacked, time.Hour)
	if d.Manifest().Signature == nil {
		t.Fatal("the unpacked capsule is not signed")
	}
	if _, err := d.Append(ctx, s, 0, userMessage(t, "after the signature")); err != nil {
		t.Fatal(err)
	}
	if d.Manifest().Signature != nil || d.sealBehind() {
		t.Fatal("the signed manifest still stands beside an event it does not cover")
	}
}

// Events a writer stored and did not seal before it died are sealed by
// the next writer that opens the journal, when it closes (or sealAfter
// after it opened it), even if it stores nothing itself. The bubble's
// clock runs the timer.
func TestTheNextWriterSealsWhatACrashedOneLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSigner(t)
		root := t.TempDir()
		dir := newFolder(t, root, "crashed", s)
		ctx := context.Background()
		d := openDir(t, dir, time.Hour)
		if _, err := d.Append(ctx, s, 0, userMessage(t, "unsealed")); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"closed", "timed"} {
			crashed := filepath.Join(root, name)
			if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil { // what a kill -9 leaves
				t.Fatal(err)
			}
			delay := time.Hour
			if name == "timed" {
				delay = sealAfter
			}
			next := openDir(t, crashed, delay)
			if _, err := next.Events(); err != nil {
				t.Fatal(err)
			}
			if name == "timed" {
				waitSealed(t, next)
			}
			if err := next.Close(); err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(crashed, VerifyOptions{})
			if err != nil || !rep.OK() || len(rep.Notes) != 0 {
				t.Fatalf("%s: %v, issues %v, notes %q; want the crashed writer's events sealed", name, err, rep.Issues(), rep.Notes)
			}
		}
	})
}

// newFolder creates a capsule folder named name under root, held by s's
// machine, and returns its path.
func newFolder(t *testing.T, root, name string, s *testSigner) string {
	t.Helper()
	dir := filepath.Join(root, name)
	c, err := New(dir, name, s)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	return dir
}

// openDir opens dir for writing with its timed seal delay after the
// first event it leaves unsealed; the test's end closes it (closing again
// does nothing).
func openDir(t *testing.T, dir string, delay time.Duration) *Dir {
	t.Helper()
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.sealDelay = delay
	t.Cleanup(func() { d.Close() })
	return d
}

// waitSealed lets d's seal delay pass on the clock of the bubble the test
// runs in, and fails unless the timed seal then sealed all of d's journal.
func waitSealed(t *testing.T, d *Dir) {
	t.Helper()
	<-time.After(d.sealDelay)
	synctest.Wait() // the timed seal, started at the same instant, is done
	if d.sealBehind() {
		t.Fatalf("the journal is not sealed %v after the seal was left to the timer", d.sealDelay)
	}
}
