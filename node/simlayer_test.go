package node

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/tern-dev/tern/simnet"
)

// simSeeds is how many seeds TestNodeLayer runs: TERN_NODE_SEEDS, or a few.
func simSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("TERN_NODE_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 10
}

func simulate(t *testing.T, seed uint64, opt simnet.Options) simnet.Result {
	var res simnet.Result
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		res = SimulateNodes(seed, dir, opt)
	})
	return res
}

func TestNodeLayer(t *testing.T) {
	opt := simnet.DefaultOptions()
	opt.Migrations = 8
	for seed := uint64(1); seed <= uint64(simSeeds()); seed++ {
		res := simulate(t, seed, opt)
		t.Logf("seed %d: %d steps, %d ms, migrations %d, operator %d, coverage %v, hash %x", seed, res.Steps, res.Ticks, res.Migrations, res.Operator, res.Coverage, res.TraceHash)
		if res.Failed() {
			t.Errorf("seed %d (%s): %s", seed, res.Settings, res.Violation)
		}
	}
}

func TestNodeLayerTrace(t *testing.T) {
	seed, _ := strconv.ParseUint(os.Getenv("TERN_NODE_SEED"), 10, 64)
	if seed == 0 {
		t.Skip("set TERN_NODE_SEED")
	}
	opt := simnet.DefaultOptions()
	opt.Migrations = 8
	opt.Trace = os.Stdout
	res := simulate(t, seed, opt)
	fmt.Println(res.Violation)
}

func TestNodeLayerSameSeedSameTrace(t *testing.T) {
	opt := simnet.DefaultOptions()
	opt.Migrations = 8
	for seed := uint64(1); seed <= uint64(simSeeds()); seed++ {
		a, b := simulate(t, seed, opt), simulate(t, seed, opt)
		if a.TraceHash != b.TraceHash || a.Violation != b.Violation || a.Steps != b.Steps {
			t.Errorf("seed %d: two runs differ: %x %d %q / %x %d %q", seed, a.TraceHash, a.Steps, a.Violation, b.TraceHash, b.Steps, b.Violation)
		}
	}
}
