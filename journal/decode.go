package journal

import "bytes"

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
