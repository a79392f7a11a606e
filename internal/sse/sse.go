// Package sse writes and reads server-sent events: the text/event-stream
// format of the WHATWG HTML standard, section 9.2 ("Server-sent events").
// It is the one place tern writes or parses its own streams in that
// format: the node's turn streams (its API and the relay between nodes)
// and the client that follows them. (The model providers' streams are
// read with the decoder of OpenAI's Go SDK, docs/PROVIDERS.md; that
// decoder drops ids and takes no lone CR for a line end, which a turn's
// stream and a relay that rewrites it need.)
//
// The writer never lets a field end or start a frame: an id or event name
// that holds a line break is refused, and data is written one "data:"
// line per line. The reader follows the standard's parsing rules, so what
// the writer accepts reads back the same, and every frame the reader
// yields can be written again (FuzzSSERoundTrip, FuzzSSEReader). Neither
// keeps a frame's fields after returning it.
package sse

import (
	"errors"
	"fmt"
)

// Frame is one server-sent event.
type Frame struct {
	// ID is the value of the frame's own id field, "" when it has none.
	// Unlike a browser's lastEventId it does not carry over to the frames
	// after it; Reader.LastEventID does.
	ID string
	// Event is the frame's event name, "" when it has none (a browser
	// dispatches such a frame as "message").
	Event string
	// Data is the frame's data lines joined with "\n".
	Data string
}

// ErrUnwritable means a frame holds what the format cannot carry: a line
// break (CR or LF) in an id, an event name or a comment, a NUL in an id
// (a reader drops such an id), or a CR in data (a reader would take it for
// the end of a line).
var ErrUnwritable = errors.New("sse: not writable as a server-sent event")

// ErrTooLong means a frame's lines are more bytes than the Reader's limit.
var ErrTooLong = errors.New("sse: frame over the size limit")

// quote quotes s for an error, cut after 60 characters.
func quote(s string) string {
	const most = 60
	if len(s) > most {
		return fmt.Sprintf("%.*q…", most, s)
	}
	return fmt.Sprintf("%q", s)
}
