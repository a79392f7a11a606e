package simnet

import (
	"math/rand/v2"
	"testing"
)

// TestTheCalendarGivesEventsInTheOrderOfAHeap drives the calendar queue
// and a plain heap with the same random schedule, as the runner does (time
// only moves forward; events are scheduled at least a tick ahead, some far
// ahead), and checks they hand out the same events in the same order.
func TestTheCalendarGivesEventsInTheOrderOfAHeap(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		var cal calendar
		var heap eventHeap
		seq := uint64(0)
		schedule := func(now int64, n int) {
			for range n {
				seq++
				d := int64(1 + rng.IntN(8))
				if rng.IntN(10) == 0 {
					d += int64(rng.IntN(3 * ringSize))
				}
				e := event{at: now + d, seq: seq}
				cal.push(e)
				heap.push(e)
			}
		}
		now := int64(0)
		schedule(now, 300)
		for n := 0; n < 5000 && len(heap) > 0; n++ {
			next, ok := cal.earliest(now + 1)
			if !ok || next != heap[0].at {
				t.Fatalf("seed %d: calendar says next at %d (%v), heap %d", seed, next, ok, heap[0].at)
			}
			now = next
			cal.advance(now)
			for {
				q := cal.peek(now)
				if q == nil {
					break
				}
				got := *q
				cal.take(now)
				want := heap.pop()
				if got != want {
					t.Fatalf("seed %d: calendar gave %+v, heap %+v", seed, got, want)
				}
				if seq < 20000 {
					schedule(now, rng.IntN(3)) // one on average: the queue neither dies nor explodes
				}
			}
			if len(heap) > 0 && heap[0].at <= now {
				t.Fatalf("seed %d: the calendar missed %+v", seed, heap[0])
			}
		}
		if len(heap) == 0 {
			if at, ok := cal.earliest(now + 1); ok {
				t.Fatalf("seed %d: the heap is empty, the calendar still has an event at %d", seed, at)
			}
		}
		if seq < 1000 {
			t.Fatalf("seed %d: only %d events went through", seed, seq)
		}
	}
}
