package linelog

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// A line is one once its newline is written, however the writes cut it;
// an Await finds one written after it started, and Also gets every byte.
func TestAnAwaitSeesALineWrittenAfterItStarted(t *testing.T) {
	var also bytes.Buffer
	l := &Log{Also: &also}
	l.Write([]byte("peer 12D3\napi 127.0"))
	found, from := make(chan string), l.Len()
	go func() {
		_, line, err := l.Await(context.Background(), from, func(s string) bool { return strings.HasPrefix(s, "api ") })
		if err != nil {
			t.Error(err)
		}
		found <- line
	}()
	l.Write([]byte(".0.1:4001\n"))
	if got := <-found; got != "api 127.0.0.1:4001" {
		t.Fatalf("found %q", got)
	}
	if also.String() != "peer 12D3\napi 127.0.0.1:4001\n" || l.String() != also.String() {
		t.Fatalf("Also %q, String %q", also.String(), l.String())
	}
}

// Past the end, an Await returns at once; a cancelled one, with why.
func TestAnAwaitEndsWithTheLogOrItsContext(t *testing.T) {
	l := &Log{}
	l.Write([]byte("one\ntwo, unended"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := l.Await(ctx, 0, func(string) bool { return false }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	l.End()
	if i, line, err := l.Await(context.Background(), 0, func(s string) bool { return strings.HasPrefix(s, "two") }); err != nil || i != 1 || line != "two, unended" {
		t.Fatalf("the unended line after End: %d %q %v", i, line, err)
	}
	if _, _, err := l.Await(context.Background(), 2, func(string) bool { return true }); !errors.Is(err, ErrEnded) {
		t.Fatalf("past the end: %v", err)
	}
}
