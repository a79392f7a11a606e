package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tern-dev/tern/simnet/memnet"
	"github.com/tern-dev/tern/store"
	"github.com/tern-dev/tern/syncpolicy"
)

// bubble runs test inside a synctest bubble with a memnet network that
// delivers every message as soon as it is sent. Nodes started on it keep
// their own timers (sync rounds, fencing ticks), which run on the bubble's
// fake clock: a test that waits for rounds or retries waits no real time,
// and a check that nothing happened, made once the rounds or dials that
// would have done it are counted, does not depend on how slow the machine
// is.
func bubble(t *testing.T, test func(t *testing.T, mn *memNodes)) {
	synctest.Test(t, func(t *testing.T) {
		mn := &memNodes{t: t, net: memnet.New(nil), addrs: map[string]ma.Multiaddr{}, dialed: map[[2]peer.ID]int{}}
		done, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-mn.net.Woken():
					for _, m := range mn.net.Sent() {
						mn.net.Deliver(m)
					}
				case <-done:
					return
				}
			}
		}()
		t.Cleanup(func() { close(done); <-stopped }) // registered first: runs after the nodes close
		test(t, mn)
	})
}

// memNodes starts nodes on a bubble's network.
type memNodes struct {
	t     *testing.T
	net   *memnet.Network
	addrs map[string]ma.Multiaddr // by home: a restarted node keeps its address

	mu     sync.Mutex
	dialed map[[2]peer.ID]int // dials by a node's host of another, whatever came of them
}

// dialingHost is a node's memnet host, counting its dials in mn.
type dialingHost struct {
	*memnet.Host
	mn *memNodes
}

func (h dialingHost) Connect(ctx context.Context, ai peer.AddrInfo) error {
	h.mn.mu.Lock()
	h.mn.dialed[[2]peer.ID{h.ID(), ai.ID}]++
	h.mn.mu.Unlock()
	return h.Host.Connect(ctx, ai)
}

// dials is how many times a's host has dialed b's.
func (mn *memNodes) dials(a, b *Node) int {
	mn.mu.Lock()
	defer mn.mu.Unlock()
	return mn.dialed[[2]peer.ID{a.host.ID(), b.host.ID()}]
}

// start runs a node on home (a restart if home held one before), with
// sync rounds every interval.
func (mn *memNodes) start(home string, interval ...time.Duration) *Node {
	mn.t.Helper()
	addr, ok := mn.addrs[home]
	if !ok {
		addr = ma.StringCast(fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", len(mn.addrs)+1))
		mn.addrs[home] = addr
	}
	cfg := Config{NoMDNS: true, Harness: &Harness{},
		newHost: func(id *Identity, _ *gater, _ Config) (host.Host, error) {
			h, err := mn.net.AddHost(id.PrivKey(), addr)
			if err != nil {
				return nil, err
			}
			return dialingHost{h, mn}, nil
		}}
	if len(interval) > 0 {
		cfg.SyncInterval = interval[0]
	}
	n, err := Start(home, cfg, testLog(home))
	if err != nil {
		mn.t.Fatal(err)
	}
	mn.t.Cleanup(func() { n.Close() })
	return n
}

// pair pairs a and b (with their addresses, so each redials the other)
// and connects them.
func (mn *memNodes) pair(a, b *Node) {
	mn.t.Helper()
	pair(mn.t, a, b)
	if err := mn.net.Connect(a.host.ID(), b.host.ID()); err != nil {
		mn.t.Fatal(err)
	}
}

func TestANodeThatWasOfflineCatchesUpWhenItComesBack(t *testing.T) {
	bubble(t, func(t *testing.T, mn *memNodes) {
		homeB := t.TempDir()
		a, b := mn.start(t.TempDir(), 5*time.Second), mn.start(homeB, 5*time.Second)
		mn.pair(a, b)
		agent := sharedCapsule(t, a, b)
		appendN(t, a, agent, 3)
		converged(t, agent, 3, a, b)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		appendN(t, a, agent, 10000)        // b is away: no gossip reaches it
		b = mn.start(homeB, 5*time.Second) // same home, same key, same address
		converged(t, agent, 10003, a, b)   // a redials it at its next round
	})
}

func TestAnUnsharedCapsuleStaysHome(t *testing.T) {
	bubble(t, func(t *testing.T, mn *memNodes) {
		a, b := mn.start(t.TempDir(), 5*time.Second), mn.start(t.TempDir(), 5*time.Second)
		kept := sharedCapsule(t, a)
		given := sharedCapsule(t, a)
		if err := a.store.Shares().Set(kept, b.info.PeerID, false); err != nil {
			t.Fatal(err)
		}
		appendN(t, a, given, 2)
		mn.pair(a, b)
		converged(t, given, 2, a, b)
		// Each of b's rounds asks a which capsules it shares and takes
		// those b lacks.
		rounds := testutil.ToFloat64(b.stats.rounds)
		within(t, 2*time.Minute, "b has run twelve more rounds with a", func() bool {
			return testutil.ToFloat64(b.stats.rounds) >= rounds+12
		})
		if b.store.Holds(kept) {
			t.Fatal("b took a capsule a does not share with it")
		}
		// Sharing it again lets it through.
		if err := a.store.Shares().Set(kept, b.info.PeerID, true); err != nil {
			t.Fatal(err)
		}
		converged(t, kept, 0, a, b)
		again, err := store.LoadShares(a.home)
		if err != nil || !again.Shared(kept, b.info.PeerID) {
			t.Fatalf("shares after reload: %v", err)
		}
	})
}

func TestATimerRoundLeavesACapsuleToTheExchangeThePeerIsRunning(t *testing.T) {
	bubble(t, func(t *testing.T, mn *memNodes) {
		a, b := mn.start(t.TempDir(), 5*time.Second), mn.start(t.TempDir(), 5*time.Second)
		mn.pair(a, b)
		agent := sharedCapsule(t, a, b)
		appendN(t, a, agent, 1)
		converged(t, agent, 1, a, b)

		// b is sending a's node an exchange of the agent: until it ends,
		// a's timer rounds would carry the same events again.
		end := offerAware{a.store, a}.Exchanging(agent, b.info.PeerID)
		appendN(t, a, agent, 5)
		before := testutil.ToFloat64(a.stats.syncs.WithLabelValues("ok"))
		a.syncRound(context.Background(), b.host.ID(), syncpolicy.ChangedOnly)
		if evs, _ := b.store.Events(agent, ""); len(withoutMembers(evs)) != 1 {
			t.Fatalf("b holds %d events: a's timer round exchanged the capsule b was exchanging", len(evs))
		}
		if after := testutil.ToFloat64(a.stats.syncs.WithLabelValues("ok")); after != before {
			t.Fatalf("a ran %v exchanges", after-before)
		}
		end()
		converged(t, agent, 6, a, b) // the next timer round brings them
	})
}
