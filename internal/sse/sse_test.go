package sse

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

const testLimit = 1 << 20

// readAll reads every frame of stream, one byte per Read call when slow,
// and the error that ended it.
func readAll(t *testing.T, stream string, slow bool) ([]Frame, error) {
	t.Helper()
	var in io.Reader = strings.NewReader(stream)
	if slow {
		in = iotest.OneByteReader(in)
	}
	r := NewReader(in, testLimit)
	var frames []Frame
	for {
		f, err := r.Next()
		if err != nil {
			return frames, err
		}
		frames = append(frames, f)
	}
}

func TestWriteRefusesAFieldThatWouldEndALine(t *testing.T) {
	tests := []struct {
		name  string
		frame Frame
		says  string
	}{
		{"an event name with a line break", Frame{Event: "message\nid: 999999\nevent: turn.ended", Data: "{}"},
			`the event name "message\nid: 999999\nevent: turn.ended" holds a line break ('\n' at byte 8)`},
		{"an event name with a carriage return", Frame{Event: "message\r", Data: "{}"}, `holds a line break ('\r' at byte 8)`},
		{"an id with a line break", Frame{ID: "1\n\ndata: x", Data: "{}"}, `the id "1\n\ndata: x" holds a line break`},
		{"an id with a carriage return", Frame{ID: "1\r", Data: "{}"}, "the id"},
		{"an id with a NUL, which a reader would drop", Frame{ID: "1\x00", Data: "{}"}, "holds a NUL"},
		{"data with a carriage return", Frame{Data: "a\rb"}, "a carriage return, which a reader takes for a line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := []byte("id: 1\ndata: kept\n\n")
			got, err := Append(bytes.Clone(before), tt.frame)
			if !errors.Is(err, ErrUnwritable) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want ErrUnwritable saying %q", err, tt.says)
			}
			if !bytes.Equal(got, before) {
				t.Fatalf("a refused frame changed the buffer to %q", got)
			}
			var w bytes.Buffer
			if err := Write(&w, tt.frame); !errors.Is(err, ErrUnwritable) || w.Len() != 0 {
				t.Fatalf("Write: %v, wrote %q", err, w.Bytes())
			}
		})
	}
	if _, err := AppendComment(nil, "beat\n\ndata: x"); !errors.Is(err, ErrUnwritable) {
		t.Fatalf("a comment with a line break: got %v", err)
	}
}

// Data can hold anything but CR, and comes back as written, as one frame:
// a line break in it never ends the frame or starts another.
func TestDataNeverEndsOrStartsAFrame(t *testing.T) {
	for _, data := range []string{
		"",
		"{}",
		"\n\nid: 9\nevent: x\n\n",
		"\n",
		"one\ntwo",
		"data: inner",
		" leading space",
		":not a comment",
		"\x00 and \xff",
	} {
		t.Run(data, func(t *testing.T) {
			want := []Frame{{ID: "3", Event: "message", Data: data}, {Event: "delta", Data: "after"}}
			var stream []byte
			for _, f := range want {
				var err error
				if stream, err = Append(stream, f); err != nil {
					t.Fatal(err)
				}
			}
			for _, slow := range []bool{false, true} {
				got, err := readAll(t, string(stream), slow)
				if err != io.EOF || !slices.Equal(got, want) {
					t.Fatalf("read %q back as %q (%v), want %q", stream, got, err, want)
				}
			}
		})
	}
}

func TestTheWireFormat(t *testing.T) {
	var b []byte
	b, _ = Append(b, Frame{ID: "3", Event: "message", Data: `{"a":1}`})
	b, _ = Append(b, Frame{Event: "delta", Data: "x\ny"})
	b, _ = AppendComment(b, "heartbeat")
	b, _ = Append(b, Frame{})
	want := "id: 3\nevent: message\ndata: {\"a\":1}\n\n" +
		"event: delta\ndata: x\ndata: y\n\n" +
		": heartbeat\n\n" +
		"data: \n\n"
	if string(b) != want {
		t.Fatalf("wrote\n%q\nwant\n%q", b, want)
	}
}

// The examples and rules of the standard's section 9.2.6.
func TestTheReaderFollowsTheStandard(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []Frame
		end    error
	}{
		{"lines end with LF", "id: 1\nevent: e\ndata: d\n\n", []Frame{{ID: "1", Event: "e", Data: "d"}}, io.EOF},
		{"lines end with CRLF", "id: 1\r\nevent: e\r\ndata: d\r\n\r\n", []Frame{{ID: "1", Event: "e", Data: "d"}}, io.EOF},
		{"lines end with CR", "id: 1\revent: e\rdata: d\r\r", []Frame{{ID: "1", Event: "e", Data: "d"}}, io.EOF},
		{"line ends may be mixed", "data: a\r\ndata: b\rdata: c\n\r\n", []Frame{{Data: "a\nb\nc"}}, io.EOF},
		{"data lines are joined with LF", "data: YHOO\ndata: +2\ndata: 10\n\n", []Frame{{Data: "YHOO\n+2\n10"}}, io.EOF},
		{"one space after the colon is dropped, no more", "data:test\n\ndata: test\n\ndata:  test\n\n",
			[]Frame{{Data: "test"}, {Data: "test"}, {Data: " test"}}, io.EOF},
		{"a name without a colon has an empty value", "data\n\ndata\ndata\n\ndata:\n\n",
			[]Frame{{Data: ""}, {Data: "\n"}, {Data: ""}}, io.EOF},
		{"a comment is skipped", ": test stream\n\ndata: first event\nid: 1\n\n:\n", []Frame{{ID: "1", Data: "first event"}}, io.ErrUnexpectedEOF},
		{"a frame without data is no event, and its event name is forgotten", "event: e\nid: 5\n\ndata: x\n\n", []Frame{{Data: "x"}}, io.EOF},
		{"an id with a NUL is ignored", "id: 1\x002\ndata: x\n\n", []Frame{{Data: "x"}}, io.EOF},
		{"the last id field wins", "id: 1\nid: 2\ndata: x\n\n", []Frame{{ID: "2", Data: "x"}}, io.EOF},
		{"the last event field wins", "event: a\nevent: b\ndata: x\n\n", []Frame{{Event: "b", Data: "x"}}, io.EOF},
		{"other fields, retry and names in another case are ignored", "retry: 100\nfoo: bar\nData: no\nEVENT: no\ndata: x\n\n", []Frame{{Data: "x"}}, io.EOF},
		{"a colon in a value is kept", "data: a: b\n\n", []Frame{{Data: "a: b"}}, io.EOF},
		{"a leading byte order mark is skipped", "\xEF\xBB\xBFdata: x\n\n", []Frame{{Data: "x"}}, io.EOF},
		{"a byte order mark later is kept", "data: x\n\n\xEF\xBB\xBFdata: y\n\ndata: y\n\n", []Frame{{Data: "x"}, {Data: "y"}}, io.EOF},
		{"a frame cut by the end of the stream is dropped", "data: x\n\ndata: y\n", []Frame{{Data: "x"}}, io.ErrUnexpectedEOF},
		{"a line cut by the end of the stream is dropped", "data: x\n\ndata: y", []Frame{{Data: "x"}}, io.ErrUnexpectedEOF},
		{"a frame may end with its data's last line as CR, then LF", "data: x\r\r\ndata: y\n\n", []Frame{{Data: "x"}, {Data: "y"}}, io.EOF},
		{"an empty stream has no frames", "", nil, io.EOF},
		{"blank lines alone are no frames", "\n\r\n\r", nil, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, slow := range []bool{false, true} {
				got, err := readAll(t, tt.stream, slow)
				if err != tt.end || !slices.Equal(got, tt.want) {
					t.Fatalf("read %q (one byte at a time: %v) as %q, %v; want %q, %v", tt.stream, slow, got, err, tt.want, tt.end)
				}
			}
		})
	}
}

// The standard's last event ID carries over frames (what a browser sends
// as Last-Event-ID), while a Frame's ID is its own id field only.
func TestLastEventIDCarriesOverAndFrameIDsDoNot(t *testing.T) {
	r := NewReader(strings.NewReader("id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: 7\n\n"), testLimit)
	for _, want := range []struct {
		frame Frame
		last  string
	}{
		{Frame{ID: "1", Data: "a"}, "1"},
		{Frame{Data: "b"}, "1"},
		{Frame{Data: "c"}, ""},
	} {
		f, err := r.Next()
		if err != nil || f != want.frame || r.LastEventID() != want.last {
			t.Fatalf("got %q (%v), last id %q; want %q, last id %q", f, err, r.LastEventID(), want.frame, want.last)
		}
	}
	if _, err := r.Next(); err != io.EOF || r.LastEventID() != "7" {
		t.Fatalf("got %v, last id %q; want io.EOF and 7 (an id with no data still counts)", err, r.LastEventID())
	}
}

func TestAFrameOverTheLimitIsAnError(t *testing.T) {
	stream := "data: " + strings.Repeat("x", 50) + "\n\n"
	r := NewReader(strings.NewReader("data: ok\n\n"+stream), 40)
	if f, err := r.Next(); err != nil || f.Data != "ok" {
		t.Fatalf("the small frame: %q %v", f, err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrTooLong) || !strings.Contains(err.Error(), "more than 40 bytes") {
		t.Fatalf("got %v, want ErrTooLong naming the limit", err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrTooLong) {
		t.Fatalf("after the error: got %v, want it again", err)
	}
	// Many small data lines count together.
	r = NewReader(strings.NewReader(strings.Repeat("data: xxxxx\n", 10)+"\n"), 100)
	if _, err := r.Next(); !errors.Is(err, ErrTooLong) {
		t.Fatalf("many lines: got %v, want ErrTooLong", err)
	}
}

func TestCommentsReachTheCommentHook(t *testing.T) {
	var got []string
	r := NewReader(strings.NewReader(": heartbeat\n\n:no space\ndata: x\n\n"), testLimit)
	r.Comment = func(text string) { got = append(got, text) }
	if f, err := r.Next(); err != nil || f.Data != "x" {
		t.Fatalf("got %q %v", f, err)
	}
	if !slices.Equal(got, []string{"heartbeat", "no space"}) {
		t.Fatalf("comments %q", got)
	}
}

// A frame whose last line ends with CR is returned at once: the reader
// does not wait for the next byte to see whether it is an LF.
func TestAFrameIsReturnedWithoutWaitingForTheNextByte(t *testing.T) {
	for _, end := range []string{"\r\r", "\n\n", "\r\n\r\n"} {
		pr, pw := io.Pipe()
		defer pw.Close()
		go pw.Write([]byte("data: x" + end))
		got := make(chan Frame, 1)
		go func() {
			f, _ := NewReader(pr, testLimit).Next()
			got <- f
		}()
		select {
		case f := <-got:
			if f.Data != "x" {
				t.Fatalf("%q: got %q", end, f)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q: the frame was not returned until more bytes came", end)
		}
	}
}
