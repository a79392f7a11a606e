package node

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tern-dev/tern/journal"
)

// gossipN appends count events on n through the node, as a user would:
// they are gossiped at once.
func gossipN(t *testing.T, n *Node, agent string, count int) {
	t.Helper()
	for range count {
		body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": "written during a partition"}}})
		if _, err := n.Append(context.Background(), agent, []journal.Draft{{Type: "message", Session: "s", Body: body}}); err != nil {
			t.Fatal(err)
		}
	}
}

// Five nodes cut into two sides, at random, three times; both sides
// write. Nothing crosses a cut, and once it heals (the nodes redial each
// other at their next round) every node holds every event.
func TestPartitionsThatHealConverge(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			bubble(t, func(t *testing.T, mn *memNodes) {
				var nodes []*Node
				for range 5 {
					nodes = append(nodes, mn.start(t.TempDir(), 5*time.Second))
				}
				for i, a := range nodes {
					for _, b := range nodes[i+1:] {
						mn.pair(a, b)
					}
				}
				agent := sharedCapsule(t, nodes...)
				r := rand.New(rand.NewPCG(seed, 5))
				total := 0
				for round := range 3 {
					side := make([]bool, len(nodes))
					for i := range side {
						side[i] = r.IntN(2) == 1
					}
					side[0], side[1] = false, true // two sides, never one
					type cut struct {
						a, b   *Node
						ab, ba int // the dials across it before
					}
					var cuts []cut
					for i, a := range nodes {
						for j, b := range nodes[i+1:] {
							if side[i] != side[i+1+j] {
								mn.net.Cut(a.host.ID(), b.host.ID())
								cuts = append(cuts, cut{a, b, mn.dials(a, b), mn.dials(b, a)})
							}
						}
					}
					want := func(i int) int {
						if side[i] {
							return total + 2
						}
						return total + 3 + round
					}
					// Both sides write, and a minute of rounds passes: twelve
					// ticks of every node's sync timer, at each of which it
					// dials each node across the cut, in vain.
					gossipN(t, nodes[0], agent, 3+round)
					gossipN(t, nodes[1], agent, 2)
					within(t, 2*time.Minute, "every node has dialed each across the cut twelve times, and each side holds its own events", func() bool {
						for _, c := range cuts {
							if mn.dials(c.a, c.b) < c.ab+12 || mn.dials(c.b, c.a) < c.ba+12 {
								return false
							}
						}
						for i, n := range nodes {
							if eventCount(t, n, agent) < want(i) {
								return false
							}
						}
						return true
					})
					for i, n := range nodes {
						want := want(i)
						if got := eventCount(t, n, agent); got != want {
							t.Fatalf("round %d: node %d (side %v) holds %d events, want %d: something crossed the cut", round, i, side[i], got, want)
						}
					}
					total += 5 + round
					for _, c := range cuts {
						mn.net.Mend(c.a.host.ID(), c.b.host.ID())
					}
					converged(t, agent, total, nodes...)
				}
			})
		})
	}
}
