package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
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

// lineLog keeps the lines written to it, so that a test can wait for one:
// a line a process prints is a moment the test can act on. It is safe for
// concurrent use.
type lineLog struct {
	mu      sync.Mutex
	lines   []string
	part    []byte        // the last line, not yet ended
	ended   bool          // nothing more comes (see end)
	changed chan struct{} // closed, and replaced, when a line comes or the log ends
}

// Write adds p; each complete line becomes one line of the log.
func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	added := false
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.part[:i]))
		l.part = l.part[i+1:]
		added = true
	}
	if added {
		l.notify()
	}
	return len(p), nil
}

// end says that nothing more comes: an await past the last line returns
// at once.
func (l *lineLog) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.part) > 0 {
		l.lines = append(l.lines, string(l.part))
		l.part = nil
	}
	l.ended = true
	l.notify()
}

// notify wakes those waiting for a change. l.mu held.
func (l *lineLog) notify() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// next returns the lines from index from on, whether the log has ended,
// and a channel closed at the next change.
func (l *lineLog) next(from int) (lines []string, ended bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	if from < len(l.lines) {
		lines = l.lines[from:len(l.lines):len(l.lines)]
	}
	return lines, l.ended, l.changed
}

// len is the number of complete lines so far: an await from there waits
// for what comes next.
func (l *lineLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// String is everything written so far.
func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, line := range l.lines {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.Write(l.part)
	return b.String()
}

// await waits for the first line from index from on that match accepts,
// and returns it with its index. It fails with an error if the log ends
// or within passes first.
func (l *lineLog) await(from int, within time.Duration, match func(line string) bool) (int, string, error) {
	deadline := time.After(within)
	for {
		lines, ended, changed := l.next(from)
		for i, line := range lines {
			if match(line) {
				return from + i, line, nil
			}
		}
		from += len(lines)
		if ended {
			return 0, "", fmt.Errorf("the output ended without the line")
		}
		select {
		case <-changed:
		case <-deadline:
			return 0, "", fmt.Errorf("not within %v", within)
		}
	}
}

// pipeTo returns the write end of a pipe whose bytes go to l, for a
// process's output; once every copy of the write end is closed, atEOF
// (if not nil) runs. Unlike an io.Writer as a process's output, the pipe
// does not make exec.Cmd.Wait wait for what the process started and left
// holding it. Close the returned file once the process has started.
func pipeTo(l *lineLog, atEOF func()) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() {
		io.Copy(l, r)
		r.Close()
		if atEOF != nil {
			atEOF()
		}
	}()
	return w, nil
}
