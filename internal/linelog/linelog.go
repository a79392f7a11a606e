// Package linelog keeps what a process writes, line by line, so that a
// caller can wait for a line to come (a node's "api " line, a log record
// of a move) and show a person everything when something fails. The
// nemesis and the CLI's tests read the tern processes they run through it.
package linelog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
)

// Log is the lines written to it. The zero Log is ready; it is safe for
// concurrent use.
type Log struct {
	// Also, if set before the first Write, gets every byte written too (a
	// file a person reads after a failure).
	Also io.Writer

	mu      sync.Mutex
	lines   []string
	part    []byte        // the last line, not yet ended
	ended   bool          // nothing more comes (see End)
	changed chan struct{} // closed, and replaced, when a line comes or the log ends
}

// Write adds p; each complete line becomes one line of the log.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Also != nil {
		l.Also.Write(p)
	}
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

// End says that nothing more comes: the last line, if unended, is one, and
// an Await past the last line returns at once.
func (l *Log) End() {
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
func (l *Log) notify() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// Next returns the lines from index from on, whether the log has ended,
// and a channel closed at the next change.
func (l *Log) Next(from int) (lines []string, ended bool, changed <-chan struct{}) {
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

// Len is the number of complete lines so far: an Await from there waits
// for what comes next.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// String is everything written so far.
func (l *Log) String() string {
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

// ErrEnded is Await's error when the log ends without the line.
var ErrEnded = errors.New("the output ended without the line")

// Await waits for the first line from index from on that match accepts,
// and returns it with its index. It fails with ErrEnded if the log ends
// first, and with ctx's error if ctx does.
func (l *Log) Await(ctx context.Context, from int, match func(line string) bool) (int, string, error) {
	for {
		lines, ended, changed := l.Next(from)
		for i, line := range lines {
			if match(line) {
				return from + i, line, nil
			}
		}
		from += len(lines)
		if ended {
			return 0, "", ErrEnded
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, "", ctx.Err()
		}
	}
}

// Pipe returns the write end of a pipe whose bytes go to w, for a
// process's output; once every copy of the write end is closed, atEOF (if
// not nil) runs. Unlike an io.Writer as a process's output, the pipe does
// not make exec.Cmd.Wait wait for what the process started and left
// holding it. Close the returned file once the process has started.
func Pipe(w io.Writer, atEOF func()) (*os.File, error) {
	r, wf, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() {
		io.Copy(w, r)
		r.Close()
		if atEOF != nil {
			atEOF()
		}
	}()
	return wf, nil
}
