package node

import (
	"context"
	"testing"
	"testing/synctest"
)

// gateHolds is a harness's gate that lets goroutines go only when the test
// says.
type gateHolds struct{ turns []chan struct{} }

func (g *gateHolds) Hold() <-chan struct{} {
	ch := make(chan struct{})
	g.turns = append(g.turns, ch)
	return ch
}

func TestAFetchLockGoesToItsWaitersInTheOrderTheyCame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &Node{ctx: context.Background(), fetchLocks: map[string]*fetchLock{}}
		unlock, ok := n.lockFetch(context.Background(), "h")
		if !ok {
			t.Fatal("a free lock was not taken")
		}
		got := make(chan string, 3)
		wait := func(name string, ctx context.Context) {
			go func() {
				if unlock, ok := n.lockFetch(ctx, "h"); ok {
					got <- name
					unlock()
				} else {
					got <- name + " gave up"
				}
			}()
			synctest.Wait()
		}
		gone, leave := context.WithCancel(context.Background())
		wait("first", context.Background())
		wait("second", gone)
		wait("third", context.Background())
		leave()
		if g := <-got; g != "second gave up" {
			t.Fatalf("%s, want the second waiter to give up", g)
		}
		unlock()
		for _, want := range []string{"first", "third"} {
			if g := <-got; g != want {
				t.Fatalf("%s took the lock, want %s", g, want)
			}
		}
		synctest.Wait()
		if len(n.fetchLocks) != 0 {
			t.Fatalf("%d locks left", len(n.fetchLocks))
		}
	})
}

func TestAFetchLockHandedOnWakesItsWaiterInItsTurnAtTheGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := &gateHolds{}
		n := &Node{ctx: context.Background(), fetchLocks: map[string]*fetchLock{}, cfg: Config{Harness: &Harness{Gate: gate}}}
		unlock, _ := n.lockFetch(context.Background(), "h")
		took := make(chan struct{})
		go func() {
			if _, ok := n.lockFetch(context.Background(), "h"); ok {
				close(took)
			}
		}()
		synctest.Wait()
		unlock()
		synctest.Wait()
		select {
		case <-took:
			t.Fatal("the waiter went on beside the goroutine that handed it the lock")
		default:
		}
		if len(gate.turns) != 1 {
			t.Fatalf("%d turns asked of the gate, want 1", len(gate.turns))
		}
		close(gate.turns[0])
		<-took
	})
}
