package capsule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tern-dev/tern/journal"
)

// copyOut copies a blob of capsule dir to a temporary file, as a transfer would.
func copyOut(t *testing.T, dir, h string) string {
	t.Helper()
	src, err := os.Open(filepath.Join(dir, filepath.FromSlash(BlobPath(h))))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(t.TempDir(), h)
	f, _ := os.Create(dst)
	io.Copy(f, src)
	f.Close()
	return dst
}

func TestACopyThatReceivedEventsWantsTheirBlobsAndCatchesUpWhenTheyArrive(t *testing.T) {
	a, b, laptop, _ := diverge(t)
	ws := filepath.Join(t.TempDir(), "ws")
	writeTree(t, ws, map[string]string{"x.txt": "only on a", "y/z.bin": strings.Repeat("z", 5000)})
	da, _ := OpenDir(context.Background(), a, nil)
	if _, err := da.Snapshot(context.Background(), laptop, ws); err != nil {
		t.Fatal(err)
	}
	evsA, _ := da.Events()
	da.Close()

	db, err := OpenDir(context.Background(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if want, err := db.Wanted(); err != nil || len(want) != 0 {
		t.Fatalf("before the events, b wants %v (%v)", want, err)
	}
	if _, err := db.AddEvents(context.Background(), evsA); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, b) // events without their blobs are a consistent capsule
	rounds := 0
	for {
		want, err := db.Wanted()
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			break
		}
		if rounds++; rounds > 3 {
			t.Fatalf("still wanting %v", want)
		}
		for i, h := range want {
			adopt := db.AdoptBlob // half of them as a fetch, which checked them already
			if i%2 == 1 {
				adopt = db.AdoptCheckedBlob
			}
			if err := adopt(h, copyOut(t, a, h)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rounds != 2 {
		t.Errorf("took %d rounds, want 2 (the snapshot, then its files)", rounds)
	}
	mustVerify(t, b)
	out := filepath.Join(t.TempDir(), "out")
	if err := mustOpen(t, b).Materialize(out); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, ws, out)
}

// A fetch of a tree of small files adopts them in batches: one adoption
// lists every blob of the batch and brings the snapshot up to date once
// they complete it.
func TestABatchOfFetchedBlobsIsAdoptedInOneCommit(t *testing.T) {
	files := map[string]string{}
	for i := range 40 {
		files[fmt.Sprintf("src/f%02d.txt", i)] = strings.Repeat(fmt.Sprint(i), 100+i)
	}
	a, b, db, ws, _ := snapshotEventOnB(t, files)
	for range 2 { // the snapshot's blob, then its files
		want, err := db.Wanted()
		if err != nil {
			t.Fatal(err)
		}
		batch := map[string]string{}
		for _, h := range want {
			batch[h] = copyOut(t, a, h)
		}
		before := db.Manifest()
		if err := db.AdoptCheckedBlobs(batch); err != nil {
			t.Fatal(err)
		}
		if db.Manifest() == before {
			t.Fatal("the batch was not committed")
		}
		for h, path := range batch {
			if !db.HoldsBlob(h) {
				t.Errorf("blob %s is not listed after its batch", h)
			}
			if _, err := os.Stat(path); err == nil {
				t.Errorf("the fetched file %s was left behind", path)
			}
		}
	}
	if want, _ := db.Wanted(); len(want) != 0 {
		t.Fatalf("still wanting %d blobs", len(want))
	}
	mustVerify(t, b)
	out := filepath.Join(t.TempDir(), "out")
	if err := mustOpen(t, b).Materialize(out); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, ws, out)
}

// Batches adopted at once (a fetch runs several) that together complete
// a snapshot install it, whichever commits last: each sees what the others
// committed before it, so none finds the snapshot incomplete for want of
// another batch's blobs.
func TestBatchesAdoptedAtOnceInstallTheSnapshotTheyComplete(t *testing.T) {
	a, b, laptop, _ := diverge(t)
	ws := filepath.Join(t.TempDir(), "ws")
	files := map[string]string{}
	for i := range 8 {
		files[fmt.Sprintf("f%d.txt", i)] = strings.Repeat(fmt.Sprint(i), 1000+i)
	}
	writeTree(t, ws, files)
	da, _ := OpenDir(context.Background(), a, nil)
	body, err := da.Snapshot(context.Background(), laptop, ws)
	if err != nil {
		t.Fatal(err)
	}
	evsA, _ := da.Events()
	snapData, err := os.ReadFile(filepath.Join(a, filepath.FromSlash(SnapshotFile)))
	if err != nil {
		t.Fatal(err)
	}
	da.Close()
	snapHex, _ := ParseBlobCID(body.Snapshot)
	snap, err := ParseSnapshot(snapData)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		copyB := filepath.Join(t.TempDir(), "b")
		if err := os.CopyFS(copyB, os.DirFS(b)); err != nil {
			t.Fatal(err)
		}
		db, err := OpenDir(context.Background(), copyB, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.AddEvents(context.Background(), evsA); err != nil {
			t.Fatal(err)
		}
		// One batch a blob, the snapshot's own among them, all at once.
		blobs := append([]string{snapHex}, snap.Blobs()...)
		var wg sync.WaitGroup
		errs := make([]error, len(blobs))
		start := make(chan struct{})
		for i, h := range blobs {
			batch := map[string]string{h: copyOut(t, a, h)}
			wg.Go(func() {
				<-start
				errs[i] = db.AdoptCheckedBlobs(batch)
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if want, _ := db.Wanted(); len(want) != 0 {
			t.Fatalf("round %d: still wanting %d blobs", round, len(want))
		}
		got, _ := db.ReadFile(SnapshotFile)
		db.Close()
		if !bytes.Equal(got, snapData) {
			t.Fatalf("round %d: every blob is held and none wanted, but snapshot.json is not the snapshot they complete", round)
		}
	}
}

func TestAdoptBlobRefusesBytesThatDoNotMatchTheName(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	d, _ := OpenDir(context.Background(), dir, nil)
	defer d.Close()
	p := filepath.Join(t.TempDir(), "x")
	os.WriteFile(p, []byte("hello"), 0o644)
	err := d.AdoptBlob(strings.Repeat("0", 64), p)
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("adopt of a mismatching blob: %v", err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal("the refused file was moved")
	}
	if err := d.AdoptCheckedBlob("../../manifest", p); err == nil {
		t.Fatal("a blob name that is not a sha256 was adopted")
	}
	mustVerify(t, dir)
}

func TestNamesBlobsSeesEveryKindOfReference(t *testing.T) {
	s := newSigner(t)
	cid := BlobCID(strings.Repeat("ab", 32))
	for _, c := range []struct {
		typ, body string
		names     bool
	}{
		{"message", `{"role":"user","content":[{"type":"text","text":"hi"}]}`, false},
		{"message", `{"role":"user","content":[{"type":"image","cid":"` + cid + `","media_type":"image/png"}]}`, true},
		{"tool_result", `{"call_id":"c","content":[{"type":"file","cid":"` + cid + `","media_type":"text/plain","name":"out.txt"}],"is_error":false}`, true},
		{SnapshotEventType, `{"snapshot":"` + cid + `","files":1,"bytes":3}`, true},
		{FileUpdatedEventType, `{"path":"memory.md","cid":"` + cid + `"}`, true},
	} {
		e, err := journal.NewEvent(s, journal.Stamp{Seq: 1, Clock: 1}, journal.Draft{Type: c.typ, Body: json.RawMessage(c.body)})
		if err != nil {
			t.Fatal(err)
		}
		if got := NamesBlobs([]*journal.Event{e}); got != c.names {
			t.Errorf("%s %s: NamesBlobs %v, want %v", c.typ, c.body, got, c.names)
		}
	}
}

func TestAForkArrivingByAddEventsTakesTheSnapshotBackToTheLastReadableOne(t *testing.T) {
	s := newSigner(t)
	dir := emptyCapsule(t, s, "forked")
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	var bodies []SnapshotEventBody
	for _, text := range []string{"first", "second"} {
		ws := t.TempDir()
		writeTree(t, ws, map[string]string{"note.txt": text})
		b, err := d.Snapshot(ctx, s, ws)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	snapshotIs := func(b SnapshotEventBody) bool {
		data, err := os.ReadFile(filepath.Join(dir, SnapshotFile))
		h, _ := ParseBlobCID(b.Snapshot)
		return err == nil && entryOf(data).SHA256 == h
	}
	if !snapshotIs(bodies[1]) {
		t.Fatal("snapshot.json is not the second snapshot")
	}
	// The same machine's key signs another event at the second snapshot's
	// seq: a fork. The chain is quarantined from there, second snapshot
	// included, though the forking event names no content.
	evs, _ := d.Events()
	second := evs[len(evs)-1]
	var before *journal.Event
	for _, e := range evs {
		if e.Machine == second.Machine && e.Seq == second.Seq-1 {
			before = e
		}
	}
	fork, err := journal.NewEvent(s, journal.Stamp{Seq: second.Seq, Prev: before.ID, Clock: second.Clock + 1}, journal.Draft{Type: "message", Body: json.RawMessage(`{"role":"user","content":[{"type":"text","text":"forked"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddEvents(ctx, []*journal.Event{fork}); err != nil {
		t.Fatal(err)
	}
	if !snapshotIs(bodies[0]) {
		t.Fatal("after the fork, snapshot.json still shows the quarantined snapshot")
	}
}

// Once a snapshot's listing is at hand (a node has it aside), the files it
// names are wanted at once: adopted with the listing, the capsule is whole
// after one adoption, not two.
func TestTheFilesOfAListingAtHandAreWantedWithIt(t *testing.T) {
	a, b, db, ws, body := snapshotEventOnB(t, map[string]string{"x.txt": "only on a", "y/z.bin": strings.Repeat("z", 5000)})
	listing, _ := ParseBlobCID(body.Snapshot)
	want, err := db.Wanted()
	if err != nil || len(want) != 1 || want[0] != listing {
		t.Fatalf("b wants %v (%v), want the listing %s alone", want, err, listing)
	}
	aside := map[string]string{listing: copyOut(t, a, listing)}
	files, err := db.WantedOnceHeld(aside)
	if err != nil || len(files) != 2 {
		t.Fatalf("once the listing is held, b wants %v (%v), want its two files", files, err)
	}
	for _, h := range files {
		aside[h] = copyOut(t, a, h)
	}
	if rest, err := db.WantedOnceHeld(aside); err != nil || len(rest) != 0 {
		t.Fatalf("with its files too, b wants %v (%v)", rest, err)
	}
	if err := db.AdoptCheckedBlobs(aside); err != nil {
		t.Fatal(err)
	}
	if want, err := db.Wanted(); err != nil || len(want) != 0 {
		t.Fatalf("after one adoption, b wants %v (%v)", want, err)
	}
	mustVerify(t, b)
	out := filepath.Join(t.TempDir(), "out")
	if err := mustOpen(t, b).Materialize(out); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, ws, out)
}

// snapshotEventOnB makes two copies a and b of a capsule, a snapshot on a
// of a workspace holding files, and gives b its events only: b (db, open
// until the test ends) then wants the snapshot's blobs.
func snapshotEventOnB(t *testing.T, files map[string]string) (a, b string, db *Dir, ws string, body SnapshotEventBody) {
	t.Helper()
	a, b, laptop, _ := diverge(t)
	ws = filepath.Join(t.TempDir(), "ws")
	writeTree(t, ws, files)
	da, _ := OpenDir(context.Background(), a, nil)
	body, err := da.Snapshot(context.Background(), laptop, ws)
	if err != nil {
		t.Fatal(err)
	}
	evsA, _ := da.Events()
	da.Close()
	if db, err = OpenDir(context.Background(), b, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.AddEvents(context.Background(), evsA); err != nil {
		t.Fatal(err)
	}
	return a, b, db, ws, body
}
