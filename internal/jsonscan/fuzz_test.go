package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// deep reports whether b may nest near the depth limits, where Valid and
// encoding/json differ by a level by design (MaxDepth).
func deep(b []byte) bool { return bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) > 1000 }

// FuzzValidAgreesWithEncodingJSON holds the validating functions to
// encoding/json (which does not check UTF-8), and the trusted ones to the
// validating ones: on text Valid accepts, a Walker with Unquote and a
// Cursor read the values encoding/json reads, what Scanner.String notes of
// each string token is right, and SkipValue finds the end Trim found.
func FuzzValidAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range append(append([]string{}, validTexts...), invalidTexts...) {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"role":"user","content":[{"type":"text","text":"h\u00e9llo \"you\"\n😀"}],"n":1e3,"x":-0.5}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := Valid(b)
		if deep(b) {
			return
		}
		switch std := json.Valid(b); {
		case valid && !std:
			t.Fatalf("Valid(%q) = true; encoding/json refuses it", b)
		case !valid && std && utf8.Valid(b):
			t.Fatalf("Valid(%q) = false; encoding/json accepts it", b)
		}
		if !valid {
			return
		}
		v, _ := Trim(b)
		if end := SkipValue(v, 0); end != len(v) {
			t.Fatalf("SkipValue(%q) = %d, want %d", v, end, len(v))
		}
		var want any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if got := walked(t, v); !reflect.DeepEqual(got, want) {
			t.Fatalf("walking %q gives %#v, encoding/json %#v", b, got, want)
		}
		c := NewCursor(b)
		got := cursored(t, &c)
		if err := c.Done(); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("the cursor reads %q as %#v (%v), encoding/json as %#v", b, got, err, want)
		}
		nonASCII := 0
		for _, x := range b {
			nonASCII += int(x >> 7)
		}
		if c.NonASCII() != nonASCII {
			t.Fatalf("the cursor counts %d bytes that are not ASCII in %q, want %d", c.NonASCII(), b, nonASCII)
		}
	})
}

// walked decodes the valid value v with a Walker and Unquote, checking
// what Scanner.String notes of every string token on the way.
func walked(t *testing.T, v []byte) any {
	switch v[0] {
	case '{':
		m := map[string]any{}
		w := Object(v)
		for k, val, ok := w.Member(); ok; k, val, ok = w.Member() {
			m[str(t, k)] = walked(t, val)
		}
		if w.Err() != nil {
			t.Fatalf("walking %q: %v", v, w.Err())
		}
		return m
	case '[':
		s := []any{}
		w := Array(v)
		for val, ok := w.Element(); ok; val, ok = w.Element() {
			s = append(s, walked(t, val))
		}
		if w.Err() != nil {
			t.Fatalf("walking %q: %v", v, w.Err())
		}
		return s
	case '"':
		return str(t, v)
	case 't', 'f':
		return v[0] == 't'
	case 'n':
		return nil
	}
	return json.Number(v)
}

// str checks what Scanner.String notes of the valid token tok and decodes
// it.
func str(t *testing.T, tok []byte) string {
	var st Scanner
	end, ok := st.String(tok, 0)
	if !ok || end != len(tok) {
		t.Fatalf("String(%q) = %d, %v of a token Valid accepted", tok, end, ok)
	}
	s := Unquote(tok)
	if canonical := string(appendCanonical(nil, s)) == string(tok); st.Canonical != canonical {
		t.Fatalf("String(%q) says Canonical %v; RFC 8785 writes %q", tok, st.Canonical, appendCanonical(nil, s))
	}
	if st.Escaped != bytes.Contains(tok, []byte(`\`)) {
		t.Fatalf("String(%q) says Escaped %v", tok, st.Escaped)
	}
	if !Equal(tok, s) {
		t.Fatalf("Equal(%q, %q) = false", tok, s)
	}
	return s
}

// appendCanonical appends s as RFC 8785 writes a string (section 3.2.2.2).
func appendCanonical(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		default:
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				dst = append(dst, c)
			}
		}
	}
	return append(dst, '"')
}

// cursored decodes the value at c with the cursor alone.
func cursored(t *testing.T, c *Cursor) any {
	switch c.Peek() {
	case '{':
		m := map[string]any{}
		for ok := c.Enter('{', '}'); ok; ok = c.More('}') {
			k := string(c.Key())
			m[k] = cursored(t, c)
		}
		return m
	case '[':
		s := []any{}
		for ok := c.Enter('[', ']'); ok; ok = c.More(']') {
			s = append(s, cursored(t, c))
		}
		return s
	}
	v := c.Value()
	if v == nil {
		t.Fatalf("the cursor fails on a valid value: %v", c.Err())
	}
	if v[0] == '"' {
		return Unquote(v)
	}
	return walked(t, v)
}

// FuzzWalkAnyBytes holds the trusted functions to their promise on text
// nobody validated: an answer within bounds, no panic, every walk ending;
// and the Cursor, which validates, likewise.
func FuzzWalkAnyBytes(f *testing.F) {
	for _, s := range append(append([]string{}, validTexts...), invalidTexts...) {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"a":"\\"}`))
	f.Add([]byte(`["\\\"",{"":[}]]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := 0; i <= len(b); i++ {
			if end := SkipValue(b, i); end < min(i, len(b)) || end > len(b) {
				t.Fatalf("SkipValue(%q, %d) = %d", b, i, end)
			}
			if i < len(b) && b[i] == '"' {
				if end := SkipString(b, i); end <= i || end > len(b) {
					t.Fatalf("SkipString(%q, %d) = %d", b, i, end)
				}
			}
		}
		for _, w := range []Walker{Object(b), Array(b)} {
			for n := 0; ; n++ {
				if n > len(b) {
					t.Fatalf("a walk over %q does not end", b)
				}
				var v []byte
				var ok bool
				if w.close == '}' {
					_, v, ok = w.Member()
				} else {
					v, ok = w.Element()
				}
				if !ok {
					break
				}
				if len(v) == 0 {
					t.Fatalf("a walk over %q gives an empty value", b)
				}
				inner := Object(v)
				for _, _, ok := inner.Member(); ok; _, _, ok = inner.Member() {
				}
			}
		}
		c := NewCursor(b)
		read(&c, 0)
		if err := c.Done(); (err == nil) != Valid(b) && !deep(b) {
			t.Fatalf("the cursor reads %q with %v; Valid says %v", b, err, Valid(b))
		}
	})
}

// read steps the cursor through whatever comes, as a parser would.
func read(c *Cursor, depth int) {
	switch c.Peek() {
	case '{':
		for ok := c.Enter('{', '}'); ok; ok = c.More('}') {
			c.Key()
			read(c, depth+1)
		}
	case '[':
		for ok := c.Enter('[', ']'); ok; ok = c.More(']') {
			read(c, depth+1)
		}
	default:
		c.Value()
	}
}
