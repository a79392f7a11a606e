package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/fencing"
)

// mocknetSeeds is how many seeds TestRandomMigrationsOverMocknet runs:
// TERN_MOCKNET_SEEDS, or a few.
func mocknetSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("TERN_MOCKNET_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 5
}

// startFencedMockNodes is startMockNodes with fast fencing ticks.
func startFencedMockNodes(t *testing.T, mn mocknet.Mocknet, k int) []*Node {
	t.Helper()
	var nodes []*Node
	for i := range k {
		addr := ma.StringCast(fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", i+1))
		cfg := Config{NoMDNS: true, SyncInterval: 200 * time.Millisecond, tick: 10 * time.Millisecond,
			newHost: func(id *Identity, _ *gater, _ Config) (host.Host, error) { return mn.AddPeer(id.PrivKey(), addr) }}
		n, err := Start(t.TempDir(), cfg, testLog(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	for i, a := range nodes {
		for _, b := range nodes[i+1:] {
			pair(t, a, b)
		}
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	if err := mn.ConnectAllButSelf(); err != nil {
		t.Fatal(err)
	}
	return nodes
}

// The libp2p layer: real nodes on go-libp2p's mocknet, migrating an agent
// at random while links are cut and healed at random. After every step
// at most one node runs the agent and no epoch is activated on two nodes;
// once every link is back, exactly one node runs it, none is frozen or
// staging, and every node holds the same events.
func TestRandomMigrationsOverMocknet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs many nodes")
	}
	for seed := uint64(1); seed <= uint64(mocknetSeeds()); seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Logf("replay: TERN_MOCKNET_SEEDS=%d go test ./node -run 'TestRandomMigrationsOverMocknet/seed_%d$'", seed, seed)
			randomMigrations(t, seed)
		})
	}
}

func randomMigrations(t *testing.T, seed uint64) {
	mn := mocknet.New()
	t.Cleanup(func() { mn.Close() })
	nodes := startFencedMockNodes(t, mn, 3)
	agent := heldBy(t, nodes[0], nil)
	r := rand.New(rand.NewPCG(seed, 11))

	activatedOn := map[uint64]string{} // epoch → the node that activated it
	check := func(when string) {
		t.Helper()
		runners := 0
		for _, n := range nodes {
			if n.runs(agent) {
				runners++
			}
			rec, ok, err := n.holders.reg.Load(agent)
			if err != nil || !ok {
				continue
			}
			for _, d := range rec.Decisions {
				if d.Decision != fencing.Activated {
					continue
				}
				if other, seen := activatedOn[d.Epoch]; seen && other != n.info.PeerID {
					t.Fatalf("%s: epoch %d activated on %s and on %s", when, d.Epoch, other, n.info.PeerID)
				}
				activatedOn[d.Epoch] = n.info.PeerID
			}
		}
		if runners > 1 {
			t.Fatalf("%s: %d nodes run the agent", when, runners)
		}
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[string]int{}
	)
	defer wg.Wait()
	cut := map[[2]int]bool{}
	for step := range 12 {
		switch k := r.IntN(10); {
		case k < 4: // move the agent from whoever runs it
			from := -1
			for i, n := range nodes {
				if n.runs(agent) {
					from = i
				}
			}
			if from < 0 {
				break
			}
			to := (from + 1 + r.IntN(len(nodes)-1)) % len(nodes)
			if r.IntN(2) == 0 { // cut the link in the middle of the move, for a while
				cutAfter, healAfter := time.Duration(r.IntN(15))*time.Millisecond, time.Duration(r.IntN(400))*time.Millisecond
				a, b := nodes[from], nodes[to]
				wg.Go(func() {
					time.Sleep(cutAfter)
					mn.UnlinkPeers(a.host.ID(), b.host.ID())
					a.host.Network().ClosePeer(b.host.ID())
					b.host.Network().ClosePeer(a.host.ID())
					time.Sleep(healAfter)
					mn.LinkPeers(a.host.ID(), b.host.ID())
					mn.ConnectPeers(a.host.ID(), b.host.ID())
				})
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				out, err := nodes[from].Migrate(ctx, agent, nodes[to].host.ID())
				mu.Lock()
				if err != nil {
					outcomes["refused"]++
				} else {
					outcomes[out.Outcome]++
				}
				mu.Unlock()
			})
		case k < 6: // cut a link
			i, j := r.IntN(3), r.IntN(3)
			if i == j {
				break
			}
			a, b := nodes[i], nodes[j]
			mn.UnlinkPeers(a.host.ID(), b.host.ID())
			a.host.Network().ClosePeer(b.host.ID())
			b.host.Network().ClosePeer(a.host.ID())
			cut[[2]int{min(i, j), max(i, j)}] = true
		case k < 7: // heal every link
			mn.LinkAll()
			mn.ConnectAllButSelf()
			clear(cut)
		case k < 8: // the runner appends
			for _, n := range nodes {
				if n.runs(agent) {
					say(t, n, agent, fmt.Sprint("step ", step))
				}
			}
		}
		time.Sleep(time.Duration(r.IntN(80)) * time.Millisecond)
		check(fmt.Sprint("step ", step))
	}
	wg.Wait()
	mn.LinkAll()
	mn.ConnectAllButSelf()
	deadline := time.Now().Add(30 * time.Second)
	for {
		check("healing")
		runners, busy := 0, 0
		for _, n := range nodes {
			if n.runs(agent) {
				runners++
			}
			if st, _ := holderState(t, n, agent); st == "frozen" || st == "staging" {
				busy++
			}
		}
		v0, _ := nodes[0].store.Vector(agent)
		same := true
		for _, n := range nodes[1:] {
			v, _ := n.store.Vector(agent)
			same = same && vecEqual(v0, v)
		}
		if runners == 1 && busy == 0 && same {
			t.Logf("moves: %v", outcomes)
			return
		}
		if time.Now().After(deadline) {
			for _, n := range nodes {
				st, e := holderState(t, n, agent)
				t.Logf("%s: %s at %d, runs %v", n.host.ID().ShortString(), st, e, n.runs(agent))
			}
			t.Fatalf("after healing: %d runners, %d frozen or staging, events the same: %v", runners, busy, same)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
