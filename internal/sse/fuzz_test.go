package sse

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzSSERoundTrip: whatever frames the writer accepts read back the same,
// one for one, whether the stream comes whole or one byte at a time; no
// data can end a frame or start another. A frame the writer refuses holds
// what the format cannot carry, and nothing of it is written.
func FuzzSSERoundTrip(f *testing.F) {
	f.Add("1", "message", `{"type":"message"}`, "", "delta", `{"kind":"text","text":"OK"}`)
	f.Add("2", "message", "\n\nid: 9\nevent: x\n\n", "", "", "")
	f.Add("", "", "", " ", " ", " ")
	f.Add("3", "message\nid: 999999\nevent: turn.ended", "{}", "4", "turn.ended", "{}")
	f.Add("\xEF\xBB\xBF", "\xEF\xBB\xBF", "\xEF\xBB\xBFdata", "1\x00", "e", "a\rb")
	f.Add("", ":", ":\n:", "id", "data", "data: x\n\ndata: y")
	f.Fuzz(func(t *testing.T, id1, event1, data1, id2, event2, data2 string) {
		var stream []byte
		var want []Frame
		for _, fr := range []Frame{{ID: id1, Event: event1, Data: data1}, {ID: id2, Event: event2, Data: data2}} {
			before := len(stream)
			var err error
			stream, err = Append(stream, fr)
			writable := !strings.ContainsAny(fr.ID, "\r\n\x00") && !strings.ContainsAny(fr.Event, "\r\n") && !strings.ContainsRune(fr.Data, '\r')
			if writable != (err == nil) {
				t.Fatalf("frame %q: writable %v, Append error %v", fr, writable, err)
			}
			if err != nil {
				if !errors.Is(err, ErrUnwritable) || len(stream) != before {
					t.Fatalf("a refused frame: %v, %d bytes written", err, len(stream)-before)
				}
				continue
			}
			want = append(want, fr)
		}
		for _, in := range []io.Reader{bytes.NewReader(stream), iotest.OneByteReader(bytes.NewReader(stream))} {
			got, err := readFrames(in, len(stream)+1)
			if err != io.EOF || !slices.Equal(got, want) {
				t.Fatalf("wrote %q as %q, read back %q (%v)", want, stream, got, err)
			}
		}
	})
}

// FuzzSSEReader: the reader never panics, reads any stream as the
// standard's parser does (reference below, a plain transcription), whole
// or one byte at a time, and every frame it yields can be written again
// and reads back the same: a relay that reads frames and writes them on
// cannot be made to write one it was not given.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("id: 1\nevent: message\ndata: {}\n\n"))
	f.Add([]byte("id: 6\nevent: message\nid: 999999\nevent: turn.ended\ndata: {}\n\n"))
	f.Add([]byte("\xEF\xBB\xBFdata: a\r\ndata:b\rdata\n\r\n: c\n\nid: 1\x00\nid\n\n"))
	f.Add([]byte("data: x\r\r\ndata: y\n\n\r"))
	f.Add([]byte("event: e\nretry: 5\n\ndata:  x\ndata: y"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		want, wantErr := reference(stream)
		for _, in := range []io.Reader{bytes.NewReader(stream), iotest.OneByteReader(bytes.NewReader(stream))} {
			got, err := readFrames(in, len(stream)+1)
			if err != wantErr || !slices.Equal(got, want) {
				t.Fatalf("read %q as %q (%v), the standard's parser gives %q (%v)", stream, got, err, want, wantErr)
			}
		}
		for _, fr := range want {
			b, err := Append(nil, fr)
			if err != nil {
				t.Fatalf("frame %q was read but cannot be written: %v", fr, err)
			}
			again, err := readFrames(bytes.NewReader(b), len(b)+1)
			if err != io.EOF || len(again) != 1 || again[0] != fr {
				t.Fatalf("frame %q written as %q reads back as %q (%v)", fr, b, again, err)
			}
		}
	})
}

// readFrames reads every frame of in, and the error that ended it.
func readFrames(in io.Reader, limit int) ([]Frame, error) {
	r := NewReader(in, limit)
	var frames []Frame
	for {
		fr, err := r.Next()
		if err != nil {
			return frames, err
		}
		frames = append(frames, fr)
	}
}

// reference is the standard's event stream interpretation (section
// 9.2.6), step by step over a whole stream: strip one leading BOM, split
// into lines at CRLF, LF or CR, then process each line. The error is
// io.EOF, or io.ErrUnexpectedEOF when something follows the last empty
// line (its frame is dropped).
func reference(stream []byte) ([]Frame, error) {
	s := strings.TrimPrefix(string(stream), "\uFEFF")
	var lines []string
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			break
		}
		lines = append(lines, s[:i])
		if strings.HasPrefix(s[i:], "\r\n") {
			i++
		}
		s = s[i+1:]
	}
	var frames []Frame
	var data, event, id string
	var hasData, pending bool
	for _, line := range lines {
		if line == "" {
			if hasData {
				frames = append(frames, Frame{ID: id, Event: event, Data: strings.TrimSuffix(data, "\n")})
			}
			data, event, id, hasData, pending = "", "", "", false, false
			continue
		}
		pending = true
		name, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "event":
			event = value
		case "data":
			data += value + "\n"
			hasData = true
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		}
	}
	if pending || s != "" {
		return frames, io.ErrUnexpectedEOF
	}
	return frames, io.EOF
}
