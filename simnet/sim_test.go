package simnet

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/flaws"
)

// seeds is how many seeds TestManySeeds runs; CI asks for tens of
// thousands (or calls tern simnet), go test ./... for a few.
var seeds = flag.Int("simnet.seeds", 0, "run this many seeds of the default workload in TestManySeeds")

func TestSameSeedGivesTheSameTrace(t *testing.T) {
	opt := DefaultOptions()
	r1, r2 := NewRunner(opt), NewRunner(opt) // r1 reuses its memory across seeds
	distinct := map[uint64]bool{}
	for seed := uint64(1); seed <= 200; seed++ {
		a, b := r1.Run(seed), r2.Run(seed)
		fresh := NewRunner(opt).Run(seed)
		if a.TraceHash != b.TraceHash || a.TraceHash != fresh.TraceHash || a.Steps != fresh.Steps {
			t.Fatalf("seed %d: trace hashes %x, %x, %x (steps %d, %d): a run is not a function of its seed",
				seed, a.TraceHash, b.TraceHash, fresh.TraceHash, a.Steps, fresh.Steps)
		}
		distinct[a.TraceHash] = true
	}
	if len(distinct) < 199 {
		t.Errorf("200 seeds gave only %d different traces", len(distinct))
	}
}

func TestTracingDoesNotChangeTheRun(t *testing.T) {
	opt := DefaultOptions()
	for seed := uint64(1); seed <= 20; seed++ {
		var buf bytes.Buffer
		traced := opt
		traced.Trace = &buf
		a, b := NewRunner(opt).Run(seed), NewRunner(traced).Run(seed)
		if a.TraceHash != b.TraceHash {
			t.Fatalf("seed %d: tracing changed the trace hash", seed)
		}
		if !strings.Contains(buf.String(), "deliver propose") {
			t.Fatalf("seed %d: the trace shows no proposal:\n%s", seed, buf.String())
		}
	}
}

func TestBatchSummaryDoesNotDependOnWorkers(t *testing.T) {
	opt := DefaultOptions()
	one, three := RunBatch(1, 300, opt, 1), RunBatch(1, 300, opt, 3)
	if one.Steps != three.Steps || one.Coverage != three.Coverage || one.Violations != three.Violations {
		t.Errorf("1 worker: %+v\n3 workers: %+v", one, three)
	}
}

func TestDefaultWorkloadKeepsTheInvariantAndCoversEveryOutcome(t *testing.T) {
	opt := DefaultOptions()
	s := RunBatch(1, 1000, opt, 0)
	for _, f := range s.Failures {
		t.Errorf("seed %d (%s): %s\nreplay: %s", f.Seed, f.Settings, f.Violation, ReplayCommand(f.Seed, opt))
	}
	if miss := s.Uncovered(opt, Outcomes); len(miss) > 0 {
		t.Errorf("outcomes that never happened in 1000 seeds: %v (coverage %v)", miss, s.Coverage)
	}
	if s.Migrations < int64(s.Seeds*opt.Migrations/2) {
		t.Errorf("only %d migrations started in %d seeds", s.Migrations, s.Seeds)
	}
}

func TestOtherShapesKeepTheInvariant(t *testing.T) {
	cases := []struct {
		name string
		opt  Options
	}{
		{"two nodes migrate back and forth", Options{Nodes: 2, Migrations: 20, Faults: AllFaults}},
		{"five nodes migrate in chains", Options{Nodes: 5, Migrations: 30, Faults: AllFaults}},
		{"only lost registries and stale wake-ups", Options{Nodes: 3, Migrations: 20, Faults: FaultLoseRegistry | FaultPause | FaultReplay}},
		{"tails that fail, with crashes, pauses and cuts during them", Options{Nodes: 3, Migrations: 20, Faults: FaultTail | FaultCrash | FaultPause | FaultPartition | FaultOneWay}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := RunBatch(1, 300, tc.opt, 0)
			for _, f := range s.Failures {
				t.Errorf("seed %d (%s): %s\nreplay: %s", f.Seed, f.Settings, f.Violation, ReplayCommand(f.Seed, tc.opt))
			}
		})
	}
}

func TestWithoutFaultsEveryMigrationCommits(t *testing.T) {
	opt := Options{Nodes: 3, Migrations: 20, Faults: 0}
	s := RunBatch(1, 100, opt, 0)
	if s.Violations > 0 {
		t.Fatalf("%d violations: %s", s.Violations, s.Failures[0].Violation)
	}
	if s.Migrations != 100*20 || s.Coverage[fencing.EvCommit] != 100*20 {
		t.Errorf("%d migrations, %d commits; want 2000 of each", s.Migrations, s.Coverage[fencing.EvCommit])
	}
	for _, k := range []fencing.EventKind{fencing.EvAbort, fencing.EvRetireByQuery, fencing.EvResumeByQuery, fencing.EvOverride} {
		if s.Coverage[k] != 0 {
			t.Errorf("%v happened %d times without faults", k, s.Coverage[k])
		}
	}
}

// TestTheCheckerCatchesEveryHistoricalBug runs each deliberately broken
// variant of the protocol: the checker must fail it within a few hundred
// seeds, or it proves nothing about the sound one.
func TestTheCheckerCatchesEveryHistoricalBug(t *testing.T) {
	cases := []struct {
		name string
		flaw flaws.Flaw
	}{
		{"a query that does not fence lets a late activate win", flaws.FlawQueryWithoutFence},
		{"a query that asks which epoch the target holds misses that the agent moved on", flaws.FlawQueryHeldEpoch},
		{"a retire that is not compare-and-clear retires a node that holds a newer epoch", flaws.FlawRetireWithoutCompare},
		{"a follower that leaves its timer rounds to the leader lets both sides skip what it wrote", flaws.FlawFollowerSkips},
		{"a committing source that takes a silent target for a refusal runs beside the target that activated", flaws.FlawResumeOnSilence},
	}
	const bound = 300
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opt := DefaultOptions()
			opt.Flaw = tc.flaw
			s := RunBatch(1, bound, opt, 0)
			if s.Violations == 0 {
				t.Fatalf("the checker found nothing wrong with %v in %d seeds", tc.flaw, bound)
			}
			f := s.Failures[0]
			again := NewRunner(opt).Run(f.Seed)
			if again.Violation != f.Violation || again.TraceHash != f.TraceHash {
				t.Errorf("seed %d does not replay: %q then %q", f.Seed, f.Violation, again.Violation)
			}
			t.Logf("%v: %d of %d seeds fail; first: seed %d: %s\nreplay: %s", tc.flaw, s.Violations, bound, f.Seed, f.Violation, ReplayCommand(f.Seed, opt))
		})
	}
}

func TestManySeeds(t *testing.T) {
	if *seeds == 0 {
		t.Skip("run with -simnet.seeds N (CI uses tern simnet --seeds 20000)")
	}
	opt := DefaultOptions()
	s := RunBatch(1, *seeds, opt, 0)
	for _, f := range s.Failures {
		t.Errorf("seed %d (%s): %s\nreplay: %s", f.Seed, f.Settings, f.Violation, ReplayCommand(f.Seed, opt))
	}
	if miss := s.Uncovered(opt, Outcomes); len(miss) > 0 {
		t.Errorf("outcomes that never happened: %v", miss)
	}
}

func TestParseFaults(t *testing.T) {
	cases := []struct {
		in   string
		want Faults
		bad  bool
	}{
		{"", AllFaults, false},
		{"all", AllFaults, false},
		{"none", 0, false},
		{"drop", FaultDrop, false},
		{"drop, lose,pause", FaultDrop | FaultLoseRegistry | FaultPause, false},
		{"drop,teleport", 0, true},
	}
	for _, tc := range cases {
		got, err := ParseFaults(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseFaults(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
		if err == nil {
			back, err := ParseFaults(got.String())
			if err != nil || back != got {
				t.Errorf("ParseFaults(%q) does not read back: %v", got.String(), err)
			}
		}
	}
}

func TestReplayCommandNamesEverythingThatShapesTheRun(t *testing.T) {
	opt := Options{Nodes: 4, Migrations: 7, Faults: FaultDrop | FaultPause, Flaw: flaws.FlawQueryHeldEpoch}
	got := ReplayCommand(42, opt)
	want := "tern simnet --seed 42 --nodes 4 --migrations 7 --faults drop,pause --flaw query-held-epoch --trace"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// The tail of a move is where the source is frozen with nothing durable
// yet: a tail that fails resumes the agent there at its epoch, one cut
// short by a crash leaves it active to check with its peers, one a pause
// outlasts is given up by the machine. In every batch, tails fail and
// moves still commit.
func TestTailsThatFailResumeTheSourceAndOthersCommit(t *testing.T) {
	opt := Options{Nodes: 3, Migrations: 20, Faults: FaultTail}
	s := RunBatch(1, 300, opt, 0)
	if s.Violations > 0 {
		t.Fatalf("%d violations: %s", s.Violations, s.Failures[0].Violation)
	}
	if s.Coverage[fencing.EvAbort] == 0 || s.Coverage[fencing.EvCommit] == 0 {
		t.Fatalf("aborts %d, commits %d: want both", s.Coverage[fencing.EvAbort], s.Coverage[fencing.EvCommit])
	}
	if s.Coverage[fencing.EvFrozen] != int(s.Migrations) {
		t.Fatalf("%d freezes for %d migrations", s.Coverage[fencing.EvFrozen], s.Migrations)
	}
}
