package store

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

// stalledPeer is a peer that stopped reading: a write blocks until it is
// let go, then fails.
type stalledPeer struct {
	writing chan struct{} // closed at the first write
	letGo   chan struct{}
	started bool
}

func (p *stalledPeer) Write([]byte) (int, error) {
	if !p.started {
		p.started = true
		close(p.writing)
	}
	<-p.letGo
	return 0, os.ErrDeadlineExceeded
}

// returnsWithin runs f and fails the test if it has not returned after limit (a
// hang, not a measure: the latency is logged).
func returnsWithin(t *testing.T, what string, limit time.Duration, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s took %v", what, time.Since(began))
	case <-time.After(limit):
		t.Fatalf("%s did not return within %v", what, limit)
	}
}

// An export to a peer that stopped reading holds no lock while it waits:
// appends to another capsule go on, and so does an import that merges
// into the capsule being exported (which the old store-wide lock made
// wait for the export, and every use of any capsule wait behind it).
func TestAnExportToAStalledPeerHoldsUpNoOtherCapsuleNorAnImport(t *testing.T) {
	_, id, s := newTestStore(t)
	exported, dir := importNew(t, s, id, "exported")
	other, _ := importNew(t, s, id, "other")
	peer := &stalledPeer{writing: make(chan struct{}), letGo: make(chan struct{})}
	exportDone := make(chan error, 1)
	go func() { exportDone <- s.Export(exported, "", true, peer) }()
	<-peer.writing
	defer func() { close(peer.letGo); <-exportDone }()

	// A copy of the exported capsule with an event the store lacks.
	d, err := capsule.OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	draft := journal.Draft{Type: "message", Session: "s", Body: json.RawMessage(`{"role":"user","content":[{"type":"text","text":"from elsewhere"}]}`)}
	if _, err := d.Append(context.Background(), id, 0, draft); err != nil {
		t.Fatal(err)
	}
	d.Close()
	returnsWithin(t, "an import merging into the exported capsule", 10*time.Second, func() error {
		_, _, err := s.Import(dir)
		return err
	})
	returnsWithin(t, "an append to another capsule", 10*time.Second, func() error {
		_, err := s.Append(context.Background(), other, id, 0, []journal.Draft{draft})
		return err
	})
	returnsWithin(t, "an append to the exported capsule", 10*time.Second, func() error {
		_, err := s.Append(context.Background(), exported, id, 0, []journal.Draft{draft})
		return err
	})
}

// A kill between the two renames of a merging import leaves the held
// capsule moved aside in the import's folder: the next start moves it
// back, and removes the rest.
func TestAMergeKilledBetweenItsRenamesLeavesTheHeldCapsule(t *testing.T) {
	home, id, s := newTestStore(t)
	agent, _ := importNew(t, s, id, "merged")
	s.Close()
	aside := filepath.Join(home, CapsulesDir, importPrefix+"123", agent+heldSuffix)
	os.MkdirAll(filepath.Dir(aside), 0o700)
	if err := os.Rename(filepath.Join(home, CapsulesDir, agent), aside); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(home, CapsulesDir, importPrefix+"123", "merged"), 0o700) // the merge it was about to install
	s2, err := Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if !s2.Holds(agent) {
		t.Fatal("the held capsule was not moved back")
	}
	if rep, err := capsule.Verify(filepath.Join(home, CapsulesDir, agent), capsule.VerifyOptions{}); err != nil || !rep.OK() {
		t.Fatalf("the capsule moved back: %v %v", err, rep.Issues())
	}
	if left, _ := filepath.Glob(filepath.Join(home, CapsulesDir, importPrefix+"*")); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}
}
