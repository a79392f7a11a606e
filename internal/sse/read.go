package sse

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// Reader reads frames from a text/event-stream as the standard's parser
// does (section 9.2.6, "Interpreting an event stream"): a line ends at
// CRLF, LF or CR; a leading byte order mark is skipped; a line starting
// with ':' is a comment; any other line is "name: value" (one space after
// the colon dropped; a line without a colon is a name with an empty
// value), and only the names id, event and data count; data lines are
// joined with "\n"; an id holding NUL is ignored; an empty line ends a
// frame, which is returned only if it had a data line. The retry field
// is ignored: reconnecting is the caller's business. Bytes that are not
// UTF-8 are passed through (a browser would turn them into U+FFFD).
//
// A Reader is not safe for concurrent use.
type Reader struct {
	// Comment, when not nil, is called with the text of each comment line
	// as it is read (what follows the ':', one leading space dropped): a
	// relay passes heartbeats on with it.
	Comment func(text string)

	br    *bufio.Reader
	limit int
	err   error // sticky

	line    []byte // the line being read
	size    int    // bytes of the frame's lines so far
	started bool   // the first line was read (its byte order mark is gone)
	skipLF  bool   // the last line ended with CR: an LF next is part of that end
	partial bool   // a line or field of the frame was read since its start

	// The standard's buffers.
	data        []byte // each data value followed by "\n"
	event       string
	id          string // the frame's own id field
	idBuffer    string // the last event ID buffer: every id field so far
	lastEventID string // set from idBuffer at each empty line
	hasData     bool
}

// NewReader returns a Reader of r that refuses a frame whose lines,
// comments included, add up to more than limit bytes (line ends not
// counted); limit must be positive.
func NewReader(r io.Reader, limit int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), limit: limit}
}

// Next returns the next frame. It returns as soon as the empty line that
// ends a frame is read, never waiting for more bytes. At the end of the
// stream it returns io.EOF, or io.ErrUnexpectedEOF when the stream ends
// inside a frame (whose lines are dropped, as the standard says). A frame
// over the limit is an error wrapping ErrTooLong; r's read errors are
// returned as they are. After an error Next returns that error again.
func (r *Reader) Next() (Frame, error) {
	if r.err != nil {
		return Frame{}, r.err
	}
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF && r.partial {
				err = io.ErrUnexpectedEOF
			}
			r.err = err
			return Frame{}, err
		}
		if len(line) == 0 {
			if f, ok := r.dispatch(); ok {
				return f, nil
			}
			continue
		}
		r.field(line)
	}
}

// LastEventID is what the standard calls the event source's last event
// ID: the value of the last id field read (one holding NUL is ignored)
// as of the last empty line, kept across frames. It is what a browser
// sends as Last-Event-ID when it reconnects.
func (r *Reader) LastEventID() string { return r.lastEventID }

// field applies one non-empty line.
func (r *Reader) field(line []byte) {
	r.partial = true
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "": // a comment
		if r.Comment != nil {
			r.Comment(string(value))
		}
	case "event":
		r.event = string(value)
	case "data":
		r.data = append(append(r.data, value...), '\n')
		r.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.idBuffer = string(value)
			r.id = r.idBuffer
		}
	}
}

// dispatch ends the frame at an empty line; ok is false when it had no
// data line, and so is no event.
func (r *Reader) dispatch() (f Frame, ok bool) {
	r.lastEventID = r.idBuffer
	if r.hasData {
		f = Frame{ID: r.id, Event: r.event, Data: string(r.data[:len(r.data)-1])}
		ok = true
	}
	if cap(r.data) > 64<<10 || cap(r.line) > 64<<10 {
		r.data, r.line = nil, nil // a large frame's buffers are not kept for the small ones
	}
	r.data, r.event, r.id = r.data[:0], "", ""
	r.hasData, r.partial, r.size = false, false, 0
	return f, ok
}

// readLine returns the next line without its end (CRLF, LF or CR), valid
// until the next call, or io.EOF at the end of the stream (a last line
// without an end is dropped). It reads no byte past the line's end: after
// a CR it does not wait to see whether an LF follows.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		if _, err := r.br.Peek(1); err != nil {
			if r.stripBOM(); len(r.line) > 0 {
				r.partial = true
			}
			return nil, err
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				r.br.Discard(1)
				continue
			}
		}
		end := bytes.IndexByte(buf, '\n')
		if end < 0 {
			end = len(buf)
		}
		if cr := bytes.IndexByte(buf[:end], '\r'); cr >= 0 {
			end = cr
		}
		if r.size+len(r.line)+end > r.limit {
			return nil, fmt.Errorf("%w: a frame's lines come to more than %d bytes", ErrTooLong, r.limit)
		}
		r.line = append(r.line, buf[:end]...)
		if end == len(buf) {
			r.br.Discard(end)
			continue
		}
		r.skipLF = buf[end] == '\r'
		r.br.Discard(end + 1)
		break
	}
	r.stripBOM()
	r.size += len(r.line)
	return r.line, nil
}

// stripBOM drops a byte order mark at the start of the stream from the
// first line, once that line is read.
func (r *Reader) stripBOM() {
	if !r.started {
		r.started = true
		r.line = bytes.TrimPrefix(r.line, []byte("\xEF\xBB\xBF"))
	}
}
