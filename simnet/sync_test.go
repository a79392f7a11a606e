package simnet

import (
	"strings"
	"testing"

	"github.com/tern-dev/tern/internal/flaws"
)

// The sync layer runs beside the fencing machines under the same faults:
// every branch of the policy and of the model's network happens in a
// batch, and every seed ends with the copies converged.
func TestTheSyncLayerConvergesAndGoesThroughEveryBranch(t *testing.T) {
	cases := []struct {
		name string
		opt  Options
	}{
		{"every fault", DefaultOptions()},
		{"no fault", Options{Nodes: 3, Migrations: 20}},
		{"two nodes", Options{Nodes: 2, Migrations: 20, Faults: AllFaults}},
		{"five nodes", Options{Nodes: 5, Migrations: 30, Faults: AllFaults}},
		{"homes restored from backups, with crashes and cuts", Options{Nodes: 3, Migrations: 20, Faults: FaultRestore | FaultCrash | FaultPartition | FaultOneWay}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := RunBatch(1, 300, tc.opt, 0)
			for _, f := range s.Failures {
				t.Errorf("seed %d (%s): %s\nreplay: %s", f.Seed, f.Settings, f.Violation, ReplayCommand(f.Seed, tc.opt))
			}
			c := s.Sync
			counts := map[string]int{"writes": c.Writes, "passes": c.Passes, "rounds": c.Rounds, "alike": c.Alike,
				"exchanges": c.Exchanges, "skipped held": c.SkippedHeld, "dials": c.Dials}
			if tc.opt.Faults != 0 {
				counts["skipped responding"] = c.SkippedResponding
				counts["broken streams"] = c.Broken
				counts["failed dials"] = c.FailedDials
			}
			for name, n := range counts {
				if n == 0 {
					t.Errorf("no %s in %d seeds: %+v", name, s.Seeds, c)
				}
			}
		})
	}
}

// The sync layer draws from a random stream of its own and never touches
// the fencing machines: each seed's fencing side does what it does
// without the sync layer.
func TestTheSyncLayerLeavesTheFencingSideAsItWas(t *testing.T) {
	alone := DefaultOptions()
	alone.withoutSync = true
	with, without := NewRunner(DefaultOptions()), NewRunner(alone)
	for seed := uint64(1); seed <= 300; seed++ {
		a, b := with.Run(seed), without.Run(seed)
		if a.Coverage != b.Coverage || a.Migrations != b.Migrations || a.Operator != b.Operator || a.Violation != b.Violation {
			t.Fatalf("seed %d: with the sync layer %+v, without %+v", seed, a, b)
		}
		if b.Sync != (SyncCounts{Writes: b.Sync.Writes}) || a.Sync.Rounds == 0 {
			t.Fatalf("seed %d: the sync layer ran %+v without, %+v with", seed, b.Sync, a.Sync)
		}
	}
}

// A flaw of the sync policy is caught by the convergence check, names the
// copies that differ, and replays.
func TestTheCheckerNamesTheCopiesThatDiffer(t *testing.T) {
	opt := DefaultOptions()
	opt.Flaw = flaws.FlawFollowerSkips
	s := RunBatch(1, 300, opt, 0)
	if s.Violations == 0 {
		t.Fatal("follower-skips was not caught")
	}
	f := s.Failures[0]
	if !strings.Contains(f.Violation, "paired copies differ") || !strings.Contains(f.Violation, "holds {") {
		t.Fatalf("violation %q does not say which copies differ", f.Violation)
	}
}
