package sse

import (
	"fmt"
	"io"
	"strings"
)

// Append appends f to dst, whole, and returns the extended buffer:
// "id: ID\n" unless ID is "", "event: EVENT\n" unless Event is "", one
// "data: LINE\n" for each line of Data split at "\n" (one "data: \n" for
// empty data), then an empty line. It refuses a frame it cannot write so
// that a reader gets exactly f back (ErrUnwritable: an ID with CR, LF or
// NUL, an Event with CR or LF, Data with CR), and then returns dst
// unchanged.
func Append(dst []byte, f Frame) ([]byte, error) {
	if err := check("id", f.ID, "\r\n\x00"); err != nil {
		return dst, err
	}
	if err := check("event name", f.Event, "\r\n"); err != nil {
		return dst, err
	}
	if err := check("data", f.Data, "\r"); err != nil {
		return dst, err
	}
	if f.ID != "" {
		dst = append(append(append(dst, "id: "...), f.ID...), '\n')
	}
	if f.Event != "" {
		dst = append(append(append(dst, "event: "...), f.Event...), '\n')
	}
	data := f.Data
	for {
		line, rest, more := strings.Cut(data, "\n")
		dst = append(append(append(dst, "data: "...), line...), '\n')
		if !more {
			break
		}
		data = rest
	}
	return append(dst, '\n'), nil
}

// Write writes f to w with one Write call, or nothing when Append refuses
// it.
func Write(w io.Writer, f Frame) error {
	b, err := Append(nil, f)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// AppendComment appends a comment, ": TEXT\n", and an empty line, which
// readers skip (a heartbeat on a quiet stream). Text with a line break is
// refused (ErrUnwritable) and dst returned unchanged.
func AppendComment(dst []byte, text string) ([]byte, error) {
	if err := check("comment", text, "\r\n"); err != nil {
		return dst, err
	}
	return append(append(append(dst, ": "...), text...), "\n\n"...), nil
}

// check refuses a field value that holds one of the bytes in bad, naming
// the field, the value and the first such byte.
func check(field, value, bad string) error {
	i := strings.IndexAny(value, bad)
	if i < 0 {
		return nil
	}
	what := "a line break"
	switch value[i] {
	case 0:
		what = "a NUL"
	case '\r':
		if field == "data" {
			what = "a carriage return, which a reader takes for a line break"
		}
	}
	return fmt.Errorf("%w: the %s %s holds %s (%q at byte %d)", ErrUnwritable, field, quote(value), what, value[i], i+1)
}
