package clock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// later is after every timer a test sets.
var later = time.Now().Add(100 * 365 * 24 * time.Hour)

func TestAManualClockFiresItsTimersOneAtATimeByDueTimeThenOrderSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m Manual
		fired := make(chan string, 4)
		set := func(name string, d time.Duration) func() bool {
			return m.AfterFunc(d, func() { fired <- name })
		}
		set("b", 2*time.Second)
		set("a", time.Second)
		stop := set("stopped", time.Second)
		set("c", 2*time.Second)
		if !stop() || stop() {
			t.Fatal("stop did not report stopping the timer once")
		}
		if due, ok := m.Next(); !ok || !due.Equal(time.Now().Add(time.Second)) {
			t.Fatalf("next due %v %v, want in a second", due, ok)
		}
		if m.Fire(time.Now()) {
			t.Fatal("fired a timer before it was due")
		}
		var got []string
		for m.Fire(later) {
			synctest.Wait()
			got = append(got, <-fired)
		}
		if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
			t.Fatalf("fired %v, want %v", got, want)
		}
		if _, ok := m.Next(); ok {
			t.Fatal("a timer is left")
		}
	})
}

func TestATimeoutOnAClockEndsWhenItsTimerFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m Manual
		ctx, cancel := WithTimeout(&m, context.Background(), time.Minute)
		defer cancel()
		if dl, ok := ctx.Deadline(); !ok || !dl.Equal(time.Now().Add(time.Minute)) {
			t.Fatalf("deadline %v %v, want a minute from now", dl, ok)
		}
		time.Sleep(time.Hour) // synctest: fake time passes, exactly; nobody fires the clock's timer, so nothing may end
		if ctx.Err() != nil {
			t.Fatalf("ended before its clock's timer fired: %v", ctx.Err())
		}
		child, stop := context.WithCancel(ctx)
		defer stop()
		m.Fire(later)
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err %v, want context.DeadlineExceeded", ctx.Err())
		}
		if <-child.Done(); !errors.Is(context.Cause(child), context.DeadlineExceeded) {
			t.Fatalf("a child's cause %v, want context.DeadlineExceeded", context.Cause(child))
		}
	})
}

func TestATimeoutOnAClockStopsItsTimerWhenCancelled(t *testing.T) {
	var m Manual
	ctx, cancel := WithTimeout(&m, context.Background(), time.Minute)
	cancel()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("Err %v, want context.Canceled", ctx.Err())
	}
	if _, ok := m.Next(); ok {
		t.Fatal("the timer is still set")
	}
}

func TestATimeoutEndsWithAParentThatEndsFirst(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration // of the parent; 0: it is cancelled
		want    error
	}{
		{"a parent cancelled", 0, context.Canceled},
		{"a parent timed out", time.Second, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				parent, end := context.WithCancel(context.Background())
				if tc.timeout > 0 {
					parent, end = context.WithTimeout(context.Background(), tc.timeout)
				}
				defer end()
				var m Manual
				ctx, cancel := WithTimeout(&m, parent, time.Minute)
				defer cancel()
				if tc.timeout > 0 {
					if dl, _ := ctx.Deadline(); !dl.Equal(time.Now().Add(tc.timeout)) {
						t.Fatalf("deadline %v, want the parent's", dl)
					}
				} else {
					end()
				}
				<-ctx.Done()
				if !errors.Is(ctx.Err(), tc.want) {
					t.Fatalf("Err %v, want %v", ctx.Err(), tc.want)
				}
			})
		})
	}
}

func TestTheRealClockTimesOutOnTime(t *testing.T) {
	for _, c := range []Clock{nil, Real} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := WithTimeout(c, context.Background(), time.Minute)
			defer cancel()
			<-ctx.Done()
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) || time.Since(start) != time.Minute {
				t.Fatalf("%v after %v, want context.DeadlineExceeded after a minute", ctx.Err(), time.Since(start))
			}
			if !Sleep(context.Background(), c, time.Second) || time.Since(start) != time.Minute+time.Second {
				t.Fatalf("Sleep returned after %v, want a second", time.Since(start)-time.Minute)
			}
		})
	}
}

func TestSleepEndsWithItsTimerOrItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m Manual
		done := make(chan bool)
		go func() { done <- Sleep(context.Background(), &m, time.Minute) }()
		synctest.Wait()
		m.Fire(later)
		if !<-done {
			t.Fatal("Sleep reported a cut wait when its timer fired")
		}

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if Sleep(ctx, &m, time.Minute) {
			t.Fatal("Sleep reported a full wait when its context was done")
		}
		if _, ok := m.Next(); ok {
			t.Fatal("the timer of a cut wait is still set")
		}
	})
}
