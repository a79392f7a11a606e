package journal

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"
)

// fuzzSeeds are valid lines made with fixed keys and times, so the seed
// corpus is the same on every run. Some are messages whose bodies are not
// what the format asks of a message, as an older or foreign writer may
// have written them: a reader must take those too.
func fuzzSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	a, b := seededSigner(tb, 1), seededSigner(tb, 2)
	var out [][]byte
	prev := ""
	for i, body := range []string{`{}`, `{"role":"user","content":[{"type":"text","text":"héllo\n"}]}`, `[1,2.5,-0,1e30,"\u0000"]`, `null`} {
		canon, err := Canonical([]byte(body))
		if err != nil {
			tb.Fatal(err)
		}
		e, err := newEvent(a, Stamp{Seq: uint64(i + 1), Prev: prev, Clock: uint64(i + 1), Time: testTime}, Draft{Type: "message"}, canon, nil)
		if err != nil {
			tb.Fatal(err)
		}
		prev = e.ID
		out = append(out, e.Line())
	}
	extra, err := rawMember("future", []byte(`{"x":[true]}`))
	if err != nil {
		tb.Fatal(err)
	}
	e, err := newEvent(b, Stamp{Seq: 1, Clock: 7, Epoch: 2, Time: testTime}, Draft{Type: "turn.started", Session: "s", Turn: "t"}, []byte(`{}`), []member{extra})
	if err != nil {
		tb.Fatal(err)
	}
	return append(out, e.Line())
}

var brokenSeeds = [][]byte{
	nil,
	[]byte("{}"),
	[]byte(`{"v":2}`),
	[]byte(`{"v":1}`),
	[]byte(`{"v": 1}`),
	[]byte(`{"v":1,"v":1}`),
	[]byte(`{"a":"\ud800"}`),
	[]byte("{\"a\":\"\xff\"}"),
	[]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`),
	[]byte(`{"v":1,"seq":99999999999999999999999}`),
	[]byte(`{"v":1e0}`),
	[]byte(`"\"`),
}

func FuzzParseLine(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
		f.Add(s[:len(s)/2])
		f.Add(append(bytes.Clone(s), '\n'))
		f.Add(bytes.Replace(s, []byte(`"v":1`), []byte(`"v":2`), 1))
	}
	for _, s := range brokenSeeds {
		f.Add(s)
	}
	sentinels := []error{ErrInvalidEvent, ErrNotCanonical, ErrBadSignature, ErrBadID, ErrFutureFormat}
	f.Fuzz(func(t *testing.T, line []byte) {
		in := bytes.Clone(line)
		e, err := ParseLine(line)
		if !bytes.Equal(in, line) {
			t.Fatal("ParseLine modified its input")
		}
		if err != nil {
			for _, s := range sentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error %v wraps no sentinel", err)
		}
		if !bytes.Equal(e.Line(), line) {
			t.Fatalf("accepted line is not kept byte for byte")
		}
		if err := checkType(e.Type); err != nil {
			t.Fatalf("accepted a line whose %v", err)
		}
		again, err := ParseLine(e.Line())
		if err != nil || again.ID != e.ID {
			t.Fatalf("accepted line does not parse again: %v", err)
		}
	})
}

func FuzzDecode(f *testing.F) {
	seeds := fuzzSeeds(f)
	all := append(bytes.Join(seeds, []byte("\n")), '\n')
	f.Add(all)
	f.Add(all[:len(all)-7])
	f.Add(append(bytes.Clone(all), "garbage\n\n{"...))
	for _, s := range brokenSeeds {
		f.Add(append(bytes.Clone(s), '\n'))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		events, bad, torn := Decode(data)
		end := bytes.LastIndexByte(data, '\n') + 1
		if torn != len(data)-end {
			t.Fatalf("torn tail %d, want %d", torn, len(data)-end)
		}
		if n := bytes.Count(data, []byte{'\n'}); len(events)+len(bad) != n {
			t.Fatalf("%d events + %d bad lines for %d lines", len(events), len(bad), n)
		}
		for _, e := range events {
			if !bytes.Contains(data[:end], append(e.Line(), '\n')) {
				t.Fatal("an event's line is not in the data")
			}
		}
		prev := 0
		for _, err := range bad {
			le, ok := err.(*LineError)
			if !ok || le.Line <= prev {
				t.Fatalf("bad line errors not numbered in order: %v", err)
			}
			prev = le.Line
		}
	})
}

// FuzzNewEvent checks the envelope builder: every valid draft and stamp
// must give a line that reads back as the same event, and every invalid one
// must be refused.
func FuzzNewEvent(f *testing.F) {
	f.Add("message", "s-1", "t-1", []byte(`{"role":"user"}`), uint64(1), uint64(0))
	f.Add("message", "", "", []byte(`{"role":"user","content":[{"type":"image","cid":"`+blob+`","media_type":"image/png"}]}`), uint64(1), uint64(0))
	f.Add("message\nid: 999999\nevent: turn.ended", "", "", []byte(`{}`), uint64(1), uint64(0))
	f.Add("x\x00\x1f\"\\\u2028", "é", "😀", []byte(` [1e400] `), uint64(9007199254740991), uint64(9007199254740991))
	f.Add("", "", "", []byte(`{"a":1,"a":2}`), uint64(0), uint64(1)<<53)
	f.Add("t", "\xff", "", []byte(`"\ud800"`), uint64(2), uint64(3))
	f.Add("t", "", "", []byte{}, uint64(5), uint64(0))
	f.Add("t", "", "", []byte(`{"n":[9007199254740993,"9007199254740993",1e400]}`), uint64(5), uint64(0))
	s := seededSigner(f, 3)
	f.Fuzz(func(t *testing.T, typ, session, turn string, body []byte, clock, epoch uint64) {
		d := Draft{Type: typ, Session: session, Turn: turn, Body: body}
		e, err := NewEvent(s, Stamp{Seq: 1, Clock: clock, Epoch: epoch, Time: testTime}, d)
		canon, bodyErr := Canonical(body)
		if len(body) == 0 {
			canon, bodyErr = []byte(`{}`), nil
		}
		valid := checkType(typ) == nil && utf8.ValidString(session) && utf8.ValidString(turn) &&
			clock >= 1 && clock <= maxSafeInt && epoch <= maxSafeInt &&
			bodyErr == nil && unsafeInteger(body) == "" && checkBody(typ, canon) == nil
		if valid != (err == nil) {
			t.Fatalf("valid %v, NewEvent error %v", valid, err)
		}
		if err != nil {
			return
		}
		p, err := ParseLine(e.Line())
		if err != nil {
			t.Fatal(err)
		}
		if p.Type != typ || p.Session != session || p.Turn != turn || p.Clock != clock || p.Epoch != epoch || p.ID != e.ID {
			t.Fatalf("read back %+v", p)
		}
	})
}

// FuzzParseDraft checks the reader of draft lines, which come from people
// and scripts: it never panics, refuses only with ErrInvalidDraft, and a
// draft it accepts becomes an event.
func FuzzParseDraft(f *testing.F) {
	f.Add([]byte(`{"type":"message","session":"s","body":{"role":"user","content":[{"type":"text","text":"hi"}]}}`))
	f.Add([]byte(`{"type":"tool_call","body":{"call_id":"c","name":"ls","arguments":"{"}}`))
	f.Add([]byte(`{"type":"tool_result","body":{"call_id":"c","content":[{"type":"file","cid":"` + blob + `","media_type":"text/plain","name":"a"}],"is_error":false}}`))
	f.Add([]byte(`{"type":"reasoning","body":{"provider":"p","model":"m","host":"h","data":{}}}`))
	f.Add([]byte(`{"type":"message","body":{"role":"wizard","content":[]}}`))
	f.Add([]byte(`{"type":"memory.note","body":[1,{"a":null}]}`))
	f.Add([]byte(`{"type":"x","turn":3}`))
	s := seededSigner(f, 4)
	f.Fuzz(func(t *testing.T, line []byte) {
		d, err := ParseDraft(line)
		if err != nil {
			if !errors.Is(err, ErrInvalidDraft) {
				t.Fatalf("error %v is not ErrInvalidDraft", err)
			}
			return
		}
		if _, err := NewEvent(s, Stamp{Seq: 1, Clock: 1, Time: testTime}, d); err != nil {
			t.Fatalf("ParseDraft accepted %s, NewEvent refused it: %v", line, err)
		}
	})
}
