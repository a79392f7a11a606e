package nodesim

import (
	"fmt"
	"testing"

	"github.com/tern-dev/tern/simnet"
)

// The libp2p layer (libp2player.go): real nodes on go-libp2p's mocknet,
// migrating an agent at random while links are cut and healed at random.
// After every step at most one node runs the agent and no epoch is
// activated on two nodes; once every link is back, exactly one node runs
// it, none is frozen or staging, and every node holds the same events.
// CI runs a hundred seeds: tern simnet --layer libp2p.
func TestRandomMigrationsOverMocknet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs many nodes in real time")
	}
	seeds := uint64(3)
	if raceEnabled {
		seeds = 1
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			res := SimulateLibp2p(seed, t.TempDir(), simnet.DefaultOptions())
			if res.Failed() {
				t.Fatalf("%s\nlead (not a replay: the layer runs in real time): tern simnet --layer libp2p --seed %d", res.Violation, seed)
			}
			if res.Migrations == 0 {
				t.Fatalf("no migration ran: %+v", res)
			}
		})
	}
}
