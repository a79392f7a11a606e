// Package clock is the time tern's network code waits on: the real clock,
// or a simulator's that fires every timer itself, one at a time and in an
// order of its choosing, so that a simulated run does not depend on how
// the goroutines that timers wake were scheduled (docs/MIGRATION.md,
// "simnet node layer").
//
// Only waits go through a Clock; the time itself is always time.Now (a
// simulator runs inside a synctest bubble, whose time.Now is its
// fake clock).
package clock

import (
	"context"
	"errors"
	"time"
)

// Clock runs functions after a delay. A nil Clock is the real one.
type Clock interface {
	// AfterFunc calls f in its own goroutine once d has passed, unless
	// stop is called first; stop reports whether it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Real is the real clock: time.AfterFunc.
var Real Clock = real{}

type real struct{}

func (real) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// WithTimeout is context.WithTimeout on c: the context is done once c's
// timer fires d from now (its Err is then context.DeadlineExceeded), its
// parent is done, or cancel is called. On a clock other than the real one,
// a context derived from it that the timer ends reports context.Canceled,
// with context.DeadlineExceeded as its cause.
func WithTimeout(c Clock, parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if c == nil || c == Real {
		return context.WithTimeout(parent, d)
	}
	deadline := time.Now().Add(d)
	if cur, ok := parent.Deadline(); ok && cur.Before(deadline) {
		return context.WithCancel(parent) // the parent ends first, as context.WithDeadline does
	}
	ctx, cancel := context.WithCancelCause(parent)
	stop := c.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return &timeout{Context: ctx, deadline: deadline}, func() {
		stop()
		cancel(context.Canceled)
	}
}

// timeout is a context that c's timer ends at deadline.
type timeout struct {
	context.Context
	deadline time.Time
}

func (t *timeout) Deadline() (time.Time, bool) { return t.deadline, true }

func (t *timeout) Err() error {
	err := t.Context.Err()
	if err != nil && errors.Is(context.Cause(t.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}

// Sleep waits d on c, or until ctx is done; it reports whether d passed.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	if c == nil {
		c = Real
	}
	passed := make(chan struct{})
	stop := c.AfterFunc(d, func() { close(passed) })
	select {
	case <-passed:
		return true
	case <-ctx.Done():
		stop()
		return false
	}
}
