package nodesim

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/tern-dev/tern/internal/flaws"
	"github.com/tern-dev/tern/simnet"
)

// simSeeds is how many seeds the node layer's tests run: TERN_NODE_SEEDS,
// or a few (CI runs thousands through tern simnet --layer node).
func simSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("TERN_NODE_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 10
}

// nodeLayer runs seeds first..first+n-1 of the node layer, each in a
// synctest bubble of this test.
func nodeLayer(t *testing.T, first uint64, n int, opt simnet.Options) simnet.Summary {
	return RunNodeLayer(first, n, opt, 0, func(f func()) {
		synctest.Test(t, func(*testing.T) { f() })
	})
}

func TestTheNodeLayerFindsNothingWrongWithTheSoundProtocol(t *testing.T) {
	s := nodeLayer(t, 1, simSeeds(), simnet.DefaultOptions())
	for _, f := range s.Failures {
		t.Errorf("seed %d (%s): %s\nreplay: tern simnet --layer node --seed %d --trace", f.Seed, f.Settings, f.Violation, f.Seed)
	}
	if s.Migrations == 0 {
		t.Fatalf("no migration ran: %+v", s)
	}
}

// A seed's run is a function of the seed, under the race detector's
// scheduling too: the same trace, line for line (every message, every
// node's log, every fault), and so the same hash.
func TestTheNodeLayerGivesTheSameTraceForTheSameSeed(t *testing.T) {
	run := func(seed uint64) (simnet.Summary, string) {
		var trace strings.Builder
		o := simnet.DefaultOptions()
		o.Trace = &trace
		return nodeLayer(t, seed, 1, o), trace.String()
	}
	for seed := uint64(1); seed <= uint64(simSeeds()); seed++ {
		a, ta := run(seed)
		b, tb := run(seed)
		if a.TraceHash == b.TraceHash && a.Steps == b.Steps && a.Violations == b.Violations && ta == tb {
			continue
		}
		la, lb := strings.Split(ta, "\n"), strings.Split(tb, "\n")
		i := firstDifference(ta, tb) - 1
		at := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end)"
		}
		t.Errorf("seed %d: two runs differ: hash %x, %d steps, %d violations / hash %x, %d steps, %d violations; first differing trace line %d:\n%s\n%s",
			seed, a.TraceHash, a.Steps, a.Violations, b.TraceHash, b.Steps, b.Violations, i+1, at(la), at(lb))
	}
}

// firstDifference is the number of the first line where two traces differ.
func firstDifference(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	i := 0
	for i < len(la) && i < len(lb) && la[i] == lb[i] {
		i++
	}
	return i + 1
}

// Each deliberately broken variant of the protocol fails the node layer's
// checker within a hundred seeds (it stops at the first that does; CI runs
// 300 seeds of each through tern simnet --layer node --flaw).
func TestTheNodeLayerCatchesEveryHistoricalBug(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("runs up to hundreds of seeds")
	}
	for _, f := range []flaws.Flaw{flaws.FlawQueryWithoutFence, flaws.FlawQueryHeldEpoch, flaws.FlawRetireWithoutCompare} {
		t.Run(f.String(), func(t *testing.T) {
			opt := simnet.DefaultOptions()
			opt.Flaw = f
			for seed := uint64(1); seed <= 100; seed++ {
				s := nodeLayer(t, seed, 1, opt)
				if s.Violations > 0 {
					t.Logf("%v: seed %d: %s", f, seed, s.Failures[0].Violation)
					return
				}
			}
			t.Fatalf("the node layer found nothing wrong with %v in 100 seeds", f)
		})
	}
}
