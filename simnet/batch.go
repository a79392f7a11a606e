package simnet

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/flaws"
)

// MinCoverageSeeds is the smallest batch whose coverage is enforced: a
// smaller one (a replay of one seed, say) reports coverage but cannot be
// expected to see every outcome. The rarest outcome, an operator override,
// happens in about 2.5% of seeds of the default workload, so a batch this
// big misses it with a probability below 1e-10.
const MinCoverageSeeds = 1000

// MaxReported bounds the failing runs a Summary keeps.
const MaxReported = 10

// Summary is what a batch of seeds found.
type Summary struct {
	Seeds      int
	Steps      int64
	Ticks      int64
	Migrations int64
	Operator   int64    // operator overrides needed
	Violations int      // runs that failed
	Failures   []Result // the failing runs with the lowest seeds, at most MaxReported
	Coverage   Coverage
	Sync       SyncCounts
	// TraceHash combines every run's trace hash (whatever order they ran
	// in): the same seeds give the same TraceHash.
	TraceHash uint64
}

// Uncovered returns the outcomes the batch never saw of those given, if
// the batch is big enough for coverage to be enforced (MinCoverageSeeds)
// and runs every fault; otherwise nil.
func (s *Summary) Uncovered(opt Options, outcomes []fencing.EventKind) []string {
	if s.Seeds < MinCoverageSeeds || opt.Faults != AllFaults {
		return nil
	}
	var names []string
	for _, k := range outcomes {
		if s.Coverage[k] == 0 {
			names = append(names, k.String())
		}
	}
	return names
}

// RunBatch runs seeds first, first+1, …, first+n-1 of the model on
// workers goroutines (0 means GOMAXPROCS). The summary does not depend on
// workers.
func RunBatch(first uint64, n int, opt Options, workers int) Summary {
	return RunSeeds(first, n, workers, func() func(uint64) Result { return NewRunner(opt).Run })
}

// RunSeeds runs seeds first, first+1, …, first+n-1 on workers goroutines
// (0 means GOMAXPROCS), each worker with a run function of its own from
// newRun, and sums up what they found: the batch runner of every layer.
// The summary does not depend on workers.
func RunSeeds(first uint64, n, workers int, newRun func() func(seed uint64) Result) Summary {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, n))
	var next atomic.Int64
	parts := make([]Summary, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			run := newRun()
			p := &parts[w]
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				res := run(first + uint64(i))
				p.add(&res)
			}
		})
	}
	wg.Wait()
	var s Summary
	for i := range parts {
		s.merge(&parts[i])
	}
	return s
}

func (s *Summary) add(r *Result) {
	s.Seeds++
	s.Steps += int64(r.Steps)
	s.Ticks += r.Ticks
	s.Migrations += int64(r.Migrations)
	s.Operator += int64(r.Operator)
	s.Coverage.Add(&r.Coverage)
	s.Sync.Add(&r.Sync)
	s.TraceHash ^= r.TraceHash * (r.Seed | 1)
	if r.Failed() {
		s.Violations++
		s.Failures = append(s.Failures, *r)
		s.trim()
	}
}

func (s *Summary) merge(o *Summary) {
	s.Seeds += o.Seeds
	s.Steps += o.Steps
	s.Ticks += o.Ticks
	s.Migrations += o.Migrations
	s.Operator += o.Operator
	s.Violations += o.Violations
	s.Coverage.Add(&o.Coverage)
	s.Sync.Add(&o.Sync)
	s.TraceHash ^= o.TraceHash
	s.Failures = append(s.Failures, o.Failures...)
	s.trim()
}

func (s *Summary) trim() {
	slices.SortFunc(s.Failures, func(a, b Result) int {
		switch {
		case a.Seed < b.Seed:
			return -1
		case a.Seed > b.Seed:
			return 1
		}
		return 0
	})
	if len(s.Failures) > MaxReported {
		s.Failures = s.Failures[:MaxReported]
	}
}

// ReplayCommand is the command line that replays seed with opt, step by
// step.
func ReplayCommand(seed uint64, opt Options) string {
	opt = opt.orDefault()
	s := fmt.Sprintf("tern simnet --seed %d --nodes %d --migrations %d --faults %s", seed, opt.Nodes, opt.Migrations, opt.Faults)
	if opt.Flaw != flaws.Sound {
		s += " --flaw " + opt.Flaw.String()
	}
	return s + " --trace"
}
