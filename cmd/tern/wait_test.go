package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tern-dev/tern/internal/linelog"
)

// pollEvery is how often eventually and poll ask again. Most checks run
// a tern process, which takes about as long.
const pollEvery = 50 * time.Millisecond

// eventually calls check at once and then every pollEvery until it
// returns nil, and fails the test with check's last error if within
// passes first. It is for what a test can only ask about, a real
// process's state through the CLI: the deadline guards against a hang and
// is no threshold the code must meet.
func eventually(t *testing.T, within time.Duration, check func() error) {
	t.Helper()
	if err := poll(within, check); err != nil {
		t.Fatalf("not within %v: %v", within, err)
	}
}

// poll is eventually without the test: it returns check's last error if
// within passes before check returns nil.
func poll(within time.Duration, check func() error) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	deadline := time.After(within)
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline:
			return err
		}
	}
}

// awaitLine is l.Await for at most within.
func awaitLine(l *linelog.Log, from int, within time.Duration, match func(line string) bool) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	i, line, err := l.Await(ctx, from, match)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("not within %v", within)
	}
	return i, line, err
}
