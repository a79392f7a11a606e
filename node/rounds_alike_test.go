package node

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/syncpolicy"
)

// Two nodes that hold the same capsules learn it from the capsule list's
// digests, in its one round trip: the round runs no exchange for them.
// A capsule that differs is still exchanged.
func TestARoundSkipsTheCapsulesAPeerHoldsAlike(t *testing.T) {
	a, b := startNodeEvery(t, t.TempDir(), time.Hour), startNodeEvery(t, t.TempDir(), time.Hour) // the connect's round only
	var dirs []string
	for range 3 {
		dir := filepath.Join(t.TempDir(), "agent")
		c, err := capsule.New(dir, "same", a.id)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		d, err := capsule.OpenDir(context.Background(), dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.AddMember(context.Background(), a.id, b.id.Machine()); err != nil {
			t.Fatal(err)
		}
		d.Close()
		dirs = append(dirs, dir)
		for _, n := range []*Node{a, b} {
			if _, _, err := n.Import(dir); err != nil {
				t.Fatal(err)
			}
		}
	}
	leader, other := a, b
	if !syncpolicy.Leads(string(a.host.ID()), string(b.host.ID())) {
		leader, other = b, a
	}
	// One capsule differs: an event the other lacks.
	differs, _, err := leader.Import(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	say(t, leader, differs, "only on the leader")

	connectAll(t, a, b)
	eventually(t, "the leader's first round ends", func() bool { return testutil.ToFloat64(leader.stats.rounds) >= 1 })
	if alike := testutil.ToFloat64(leader.stats.alike); alike != 2 {
		t.Fatalf("%v capsules found alike, want 2", alike)
	}
	if ex := testutil.ToFloat64(leader.stats.syncs.WithLabelValues("ok")); ex != 1 {
		t.Fatalf("%v exchanges, want 1 (the capsule that differs)", ex)
	}
	want, err := leader.store.Events(differs, "")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other holds the event", func() bool {
		evs, err := other.store.Events(differs, "")
		return err == nil && len(evs) == len(want)
	})
}
