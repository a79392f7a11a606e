package journal

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
)

// Decode parses a whole journal file. It returns the events of every
// complete line in file order, every bad complete line as a *LineError
// (1-based line numbers), and the length of a torn tail: the bytes after the
// last '\n', which a crash mid-append leaves behind (0 if the data ends with
// '\n' or is empty). Decode never panics and never modifies data.
func Decode(data []byte) (events []*Event, bad []error, tornTail int) {
	end := bytes.LastIndexByte(data, '\n') + 1
	events, bad = decodeLines(data[:end], 1)
	return events, bad, len(data) - end
}

// decodeLines parses complete lines ("…\n" each), numbering them from first.
func decodeLines(data []byte, first int) (events []*Event, bad []error) {
	n := first
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			i = len(data) // not reached for complete lines; keeps the loop total
		}
		e, err := ParseLine(data[:i])
		if err != nil {
			bad = append(bad, &LineError{Line: n, Err: err})
		} else {
			events = append(events, e)
		}
		if i == len(data) {
			break
		}
		data = data[i+1:]
		n++
	}
	return events, bad
}

// ParseLines parses lines with ParseLine on every CPU. It returns the
// events in the order of lines; if some line fails, it returns the index
// of the first that does and its error, and events holds only the lines
// before it.
func ParseLines(lines [][]byte) (events []*Event, bad int, err error) {
	events = make([]*Event, len(lines))
	errs := make([]error, len(lines))
	workers := min(runtime.GOMAXPROCS(0), (len(lines)+63)/64)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(lines) {
					return
				}
				events[i], errs[i] = ParseLine(lines[i])
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return events[:i], i, err
		}
	}
	return events, -1, nil
}
