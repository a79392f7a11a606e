package nemesis

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
)

// lines is what a node process logs, line by line, kept across its
// restarts, and copied to a file for the person reading a failure.
type lines struct {
	mu      sync.Mutex
	all     []string
	part    []byte
	changed chan struct{} // closed, and replaced, when a line comes
	file    io.Writer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		l.file.Write(p)
	}
	l.part = append(l.part, p...)
	added := false
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		l.all = append(l.all, string(l.part[:i]))
		l.part = l.part[i+1:]
		added = true
	}
	if added && l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return len(p), nil
}

// len is the number of lines so far: an await from there waits for what
// comes next.
func (l *lines) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// next returns the lines from index from on and a channel closed at the
// next line.
func (l *lines) next(from int) ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	var out []string
	if from < len(l.all) {
		out = l.all[from:len(l.all):len(l.all)]
	}
	return out, l.changed
}

// await waits for the first line from index from on that contains s, and
// returns the index after it; false if ctx ends first.
func (l *lines) await(ctx context.Context, from int, s string) (int, bool) {
	for {
		got, changed := l.next(from)
		for i, line := range got {
			if strings.Contains(line, s) {
				return from + i + 1, true
			}
		}
		from += len(got)
		select {
		case <-changed:
		case <-ctx.Done():
			return from, false
		}
	}
}

// pipe returns the write end of a pipe whose bytes go to w, for a
// process's output (unlike an io.Writer, it does not make exec.Cmd.Wait
// wait for what the process left holding it). Close it once the process
// started.
func pipe(w io.Writer) (*os.File, error) {
	r, wf, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() {
		io.Copy(w, r)
		r.Close()
	}()
	return wf, nil
}
