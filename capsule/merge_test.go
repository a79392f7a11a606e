package capsule

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// diverge unpacks one capsule into two copies and appends different events
// to each, as two machines would offline.
func diverge(t *testing.T) (a, b string, laptop, desktop *testSigner) {
	t.Helper()
	laptop, desktop = newSigner(t), newSigner(t)
	dir := fullCapsule(t, laptop)
	addMember(t, dir, laptop, desktop)
	root := t.TempDir()
	tarPath := filepath.Join(root, "x.tar")
	packTo(t, dir, tarPath, PackOptions{})
	a, b = filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, side := range []struct {
		dir string
		s   *testSigner
		n   int
	}{{a, laptop, 3}, {b, desktop, 5}} {
		if err := Unpack(tarPath, side.dir, Limits{}); err != nil {
			t.Fatal(err)
		}
		d, err := OpenDir(context.Background(), side.dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < side.n; i++ {
			if _, err := d.Append(context.Background(), side.s, 0, userMessage(t, side.dir)); err != nil {
				t.Fatal(err)
			}
		}
		d.Close()
	}
	return a, b, laptop, desktop
}

func eventIDs(t *testing.T, path string) []string {
	t.Helper()
	evs, err := mustOpen(t, path).Journal()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	sort.Strings(ids)
	return ids
}

func merge(t *testing.T, a, b, out string) *MergeResult {
	t.Helper()
	res, err := Merge(mustOpen(t, a), mustOpen(t, b), out)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestDivergedCopiesMergeInEitherOrderToTheSameBytes(t *testing.T) {
	a, b, _, _ := diverge(t)
	root := t.TempDir()
	ab, ba := filepath.Join(root, "ab"), filepath.Join(root, "ba")
	res := merge(t, a, b, ab)
	merge(t, b, a, ba)
	if res.Events != 6+3+5 || len(res.Forks) != 0 { // the two copies' 6 (two member.added), then 3 and 5 apart
		t.Errorf("merge result %+v, want 14 events and no fork", res)
	}
	mustVerify(t, ab)
	if got, want := eventIDs(t, ab), eventIDs(t, ba); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatal("the two merge orders hold different event sets")
	}
	pa := packTo(t, ab, filepath.Join(root, "ab.tar"), PackOptions{})
	pb := packTo(t, ba, filepath.Join(root, "ba.tar"), PackOptions{})
	if !bytes.Equal(pa, pb) {
		t.Fatal("the packed exports of the two merge orders differ")
	}
	// merging into a tar directly gives the same bytes as well
	merge(t, a, b, filepath.Join(root, "direct.tar"))
	direct, _ := os.ReadFile(filepath.Join(root, "direct.tar"))
	if !bytes.Equal(direct, pa) {
		t.Fatal("merge -o x.tar differs from merge then pack")
	}
}

func TestMergingAgainChangesNothing(t *testing.T) {
	a, b, _, _ := diverge(t)
	root := t.TempDir()
	ab := filepath.Join(root, "ab")
	merge(t, a, b, ab)
	again := filepath.Join(root, "again")
	merge(t, ab, a, again)
	self := filepath.Join(root, "self")
	merge(t, ab, ab, self)
	p1 := packTo(t, ab, filepath.Join(root, "1.tar"), PackOptions{})
	for _, other := range []string{again, self} {
		p := packTo(t, other, filepath.Join(root, filepath.Base(other)+".tar"), PackOptions{})
		if !bytes.Equal(p1, p) {
			t.Fatalf("merging %s changed the capsule", other)
		}
	}
}

func TestAppendingAfterAMergeContinuesTheLamportClock(t *testing.T) {
	a, b, laptop, _ := diverge(t)
	ab := filepath.Join(t.TempDir(), "ab")
	merge(t, a, b, ab)
	evs, _ := mustOpen(t, ab).Journal()
	var max uint64
	for _, e := range evs {
		max = max0(max, e.Clock)
	}
	d, err := OpenDir(context.Background(), ab, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := d.Append(context.Background(), laptop, 0, userMessage(t, "after"))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Clock != max+1 {
		t.Fatalf("clock after merge = %d, want %d", got[0].Clock, max+1)
	}
	mustVerify(t, ab)
}

func max0(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

func TestMergeRefusesTwoDifferentAgents(t *testing.T) {
	s := newSigner(t)
	x, y := fullCapsule(t, s), fullCapsule(t, s)
	_, err := Merge(mustOpen(t, x), mustOpen(t, y), filepath.Join(t.TempDir(), "out"))
	if err == nil || !strings.Contains(err.Error(), "only copies of one agent merge") {
		t.Fatalf("merge of two agents: %v", err)
	}
}

func TestMergeRefusesADamagedCopyAndWritesNothing(t *testing.T) {
	a, b, _, _ := diverge(t)
	p := filepath.Join(b, SnapshotFile)
	data, _ := os.ReadFile(p)
	data[5] ^= 1
	os.WriteFile(p, data, 0o644)
	root := t.TempDir()
	_, err := Merge(mustOpen(t, a), mustOpen(t, b), filepath.Join(root, "out"))
	if err == nil || !strings.Contains(err.Error(), SnapshotFile) {
		t.Fatalf("merge with a damaged copy: %v", err)
	}
	if left, _ := os.ReadDir(root); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestTheLatestSnapshotWinsTheMerge(t *testing.T) {
	a, b, _, desktop := diverge(t)
	ws := filepath.Join(t.TempDir(), "ws")
	writeTree(t, ws, map[string]string{"new.txt": "from the desktop"})
	d, err := OpenDir(context.Background(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Snapshot(context.Background(), desktop, ws); err != nil {
		t.Fatal(err)
	}
	d.Close()
	for _, order := range [][2]string{{a, b}, {b, a}} {
		out := filepath.Join(t.TempDir(), "m")
		merge(t, order[0], order[1], out)
		snap, err := mustOpen(t, out).Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := snap.Entries["new.txt"]; !ok || len(snap.Entries) != 1 {
			t.Fatalf("merged snapshot %v, want the desktop's", snap.Entries)
		}
		mustVerify(t, out)
	}
}
