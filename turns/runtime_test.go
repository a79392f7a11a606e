package turns

import (
	"context"
	"testing"
	"time"
)

// A turn asked to start while the node closes gets no runner, and stopping
// its session does not wait for one that never started.
func TestATurnStartedWhileTheNodeClosesLeavesNothingToWaitFor(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the node has closed
	rt := New(ctx, nil, Config{Home: t.TempDir(), Spawn: func(func()) bool { return false }})
	rt.start("agent", "ses_closing", "turn_closing")
	stopped := make(chan struct{})
	go func() {
		rt.stop("ses_closing")
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stopping the session waited 10 s for a runner that never started")
	}
}
