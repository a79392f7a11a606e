package node

import (
	"testing"
	"time"
)

// pollEvery is how often poll asks its condition again.
const pollEvery = 20 * time.Millisecond

// poll asks cond on a ticker until it holds or d has passed, and reports
// whether it held. Every wait of this package's tests for something to
// happen is a poll; none waits a fixed time. Inside a synctest bubble its
// ticker and deadline run on the bubble's fake clock.
func poll(d time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return true
			}
		case <-deadline.C:
			return cond()
		}
	}
}

// eventually fails the test unless cond holds within 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	within(t, 10*time.Second, what, cond)
}

// within is eventually with its own deadline.
func within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(d, cond) {
		t.Fatalf("timed out waiting until %s", what)
	}
}
