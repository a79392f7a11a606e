package render

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Event bodies are read without decoding them: a scanner validates a value
// and says where it ends, so that strings can be copied into a request body
// as the JSON tokens they already are (journal bodies are RFC 8785 JSON,
// whose string tokens are valid in any JSON document). Each byte of a body
// is validated once, by a cursor; values inside what a cursor validated
// are walked again, when needed, by the cheaper trusted walker.

// errSyntax means an event body is not valid JSON (or holds a string that
// is not valid UTF-8). Render skips such an event with a note.
var errSyntax = errors.New("not valid JSON")

// errNotObject and errNotArray mean a value has the wrong JSON type.
var (
	errNotObject = errors.New("not a JSON object")
	errNotArray  = errors.New("not a JSON array")
)

// maxDepth bounds the nesting of a body, as encoding/json does, so that a
// hostile body cannot exhaust the stack.
const maxDepth = 10000

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && isSpace(b[i]) {
		i++
	}
	return i
}

// scanner validates JSON values and counts the bytes of their strings
// that are not ASCII (everything outside strings is ASCII), which is what
// the token estimate needs.
type scanner struct {
	nonASCII int
	escaped  bool // whether the last string str read has an escape
}

// Word-at-a-time tests (Bit Twiddling Hacks): hasZero reports whether a
// byte of x is zero, hasLess whether one is below n (n <= 128). Both may
// report true for a word that has neither, after a byte that has: callers
// then look byte by byte.
const (
	ones     = 0x0101010101010101
	highBits = 0x8080808080808080
)

func hasZero(x uint64) bool         { return (x-ones)&^x&highBits != 0 }
func hasLess(x uint64, n byte) bool { return (x-ones*uint64(n))&^x&highBits != 0 }

// plainInString marks the bytes a string token may hold as they are:
// everything but control characters, the quote and the backslash (UTF-8 is
// checked separately).
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str validates the string token starting at b[i] == '"' and returns the
// index just past its closing quote.
func (s *scanner) str(b []byte, i int) (int, error) {
	start := i + 1
	high := 0 // bytes with the high bit set: not ASCII
	s.escaped = false
	for i++; i < len(b); i++ {
		// Eight plain bytes at a time, then one at a time.
		for ; i+8 <= len(b); i += 8 {
			w := binary.LittleEndian.Uint64(b[i:])
			if hasLess(w, 0x20) || hasZero(w^(ones*'"')) || hasZero(w^(ones*'\\')) {
				break
			}
			high += bits.OnesCount64(w & highBits)
		}
		for i < len(b) && plainInString[b[i]] {
			high += int(b[i] >> 7)
			i++
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			if high > 0 && !utf8.Valid(b[start:i]) {
				return 0, errSyntax
			}
			s.nonASCII += high
			return i + 1, nil
		case c == '\\':
			s.escaped = true
			i++
			if i >= len(b) {
				return 0, errSyntax
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return 0, errSyntax
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return 0, errSyntax
					}
				}
				i += 4
			default:
				return 0, errSyntax
			}
		default: // a control character
			return 0, errSyntax
		}
	}
	return 0, errSyntax
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// value validates the value starting at b[i] (no leading space) and
// returns the index just past it.
func (s *scanner) value(b []byte, i, depth int) (int, error) {
	if i >= len(b) || depth > maxDepth {
		return 0, errSyntax
	}
	switch c := b[i]; {
	case c == '"':
		return s.str(b, i)
	case c == '{':
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, errSyntax
			}
			var err error
			if i, err = s.str(b, i); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return 0, errSyntax
			}
			if i, err = s.value(b, skipSpace(b, i+1), depth+1); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, errSyntax
			}
			if b[i] == '}' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, errSyntax
			}
			i = skipSpace(b, i+1)
		}
	case c == '[':
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = s.value(b, i, depth+1); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, errSyntax
			}
			if b[i] == ']' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, errSyntax
			}
			i = skipSpace(b, i+1)
		}
	case c == 't':
		return scanWord(b, i, "true")
	case c == 'f':
		return scanWord(b, i, "false")
	case c == 'n':
		return scanWord(b, i, "null")
	default:
		return scanNumber(b, i)
	}
}

func scanWord(b []byte, i int, w string) (int, error) {
	if len(b)-i < len(w) || string(b[i:i+len(w)]) != w {
		return 0, errSyntax
	}
	return i + len(w), nil
}

// scanNumber validates a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, error) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return 0, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, errSyntax
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, errSyntax
		}
		i = j
	}
	return i, nil
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// trimValue validates that b is one JSON value and returns it without
// surrounding space.
func trimValue(b []byte) ([]byte, error) {
	var s scanner
	i := skipSpace(b, 0)
	end, err := s.value(b, i, 0)
	if err != nil || skipSpace(b, end) != len(b) {
		return nil, errSyntax
	}
	return b[i:end], nil
}

// validJSON reports whether b is exactly one JSON value, with optional
// surrounding space.
func validJSON(b []byte) bool {
	_, err := trimValue(b)
	return err == nil
}

// cursor reads one JSON document front to back, validating each byte
// once: parsers step into the values they want and take the others whole.
// After an error every step fails and err says why.
type cursor struct {
	scanner
	b   []byte
	i   int
	err error
}

func (c *cursor) fail(err error) bool {
	if c.err == nil {
		c.err = err
	}
	c.i = len(c.b)
	return false
}

// peek returns the next byte that is not space, or 0 at the end.
func (c *cursor) peek() byte {
	c.i = skipSpace(c.b, c.i)
	if c.i >= len(c.b) {
		return 0
	}
	return c.b[c.i]
}

// enter steps into the object or array (opening '{' or '[') that comes
// next and reports whether it has a first member or element.
func (c *cursor) enter(opening, closing byte) bool {
	if c.peek() != opening {
		if opening == '{' {
			return c.fail(errNotObject)
		}
		return c.fail(errNotArray)
	}
	c.i++
	if c.peek() == closing {
		c.i++
		return false
	}
	return c.err == nil
}

// more moves past the separator after a member or element and reports
// whether another follows; false at the closing bracket.
func (c *cursor) more(closing byte) bool {
	switch c.peek() {
	case ',':
		c.i++
		return true
	case closing:
		c.i++
		return false
	}
	return c.fail(errSyntax)
}

// key reads a member's key and the colon after it, and returns the key's
// name, unescaped (compare it with switch string(k), which does not
// copy); nil after an error.
func (c *cursor) key() []byte {
	if c.peek() != '"' {
		c.fail(errSyntax)
		return nil
	}
	start := c.i
	end, err := c.str(c.b, start)
	if err != nil {
		c.fail(err)
		return nil
	}
	c.i = end
	if c.peek() != ':' {
		c.fail(errSyntax)
		return nil
	}
	c.i++
	if c.escaped {
		return []byte(decodeString(c.b[start:end]))
	}
	return c.b[start+1 : end-1]
}

// value validates the next value and returns it, without surrounding
// space; nil after an error.
func (c *cursor) value() []byte {
	start := skipSpace(c.b, c.i)
	end, err := c.scanner.value(c.b, start, 1)
	if err != nil {
		c.fail(err)
		return nil
	}
	c.i = end
	return c.b[start:end]
}

// done checks that nothing but space is left and returns the first error.
func (c *cursor) done() error {
	if c.err == nil && skipSpace(c.b, c.i) != len(c.b) {
		c.err = errSyntax
	}
	return c.err
}

// walker walks the members of an object or the elements of an array
// already validated (by a cursor, or validJSON): it only finds where each
// value ends, and never reads out of bounds whatever the input. Its zero
// value is an empty walk.
type walker struct {
	b     []byte
	i     int
	close byte
	done  bool
	err   error
}

// object starts a walk over the members of the validated object b. A b
// that is not an object sets err to errNotObject.
func object(b []byte) walker { return open(b, '{', '}', errNotObject) }

// array starts a walk over the elements of the validated array b.
func array(b []byte) walker { return open(b, '[', ']', errNotArray) }

func open(b []byte, opening, closing byte, wrong error) walker {
	w := walker{b: b, close: closing}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != opening {
		w.done, w.err = true, wrong
		return w
	}
	w.i = skipSpace(b, i+1)
	if w.i < len(b) && b[w.i] == closing {
		w.done = true
	}
	return w
}

// after moves past the separator that follows a value ending at i.
func (w *walker) after(i int) {
	i = skipSpace(w.b, i)
	switch {
	case i < len(w.b) && w.b[i] == ',':
		w.i = skipSpace(w.b, i+1)
	case i < len(w.b) && w.b[i] == w.close:
		w.done = true
	default:
		w.done, w.err = true, errSyntax
	}
}

// member returns the next member's key token and value; false at the end.
func (w *walker) member() (key, val []byte, ok bool) {
	if w.done {
		return nil, nil, false
	}
	b, kstart := w.b, w.i
	if kstart >= len(b) || b[kstart] != '"' {
		w.done, w.err = true, errSyntax
		return nil, nil, false
	}
	kend := skipString(b, kstart)
	i := skipSpace(b, kend)
	if i >= len(b) || b[i] != ':' {
		w.done, w.err = true, errSyntax
		return nil, nil, false
	}
	vstart := skipSpace(b, i+1)
	vend := skipValue(b, vstart)
	if vend <= vstart {
		w.done, w.err = true, errSyntax
		return nil, nil, false
	}
	w.after(vend)
	return b[kstart:kend], b[vstart:vend], true
}

// element returns the next element; false at the end.
func (w *walker) element() (val []byte, ok bool) {
	if w.done {
		return nil, false
	}
	start := w.i
	end := skipValue(w.b, start)
	if end <= start {
		w.done, w.err = true, errSyntax
		return nil, false
	}
	w.after(end)
	return w.b[start:end], true
}

// skipString returns the index just past the string token at b[i], which
// is trusted to be valid: it only looks for the closing quote.
func skipString(b []byte, i int) int {
	j := i + 1
	for j <= len(b) {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return len(b)
}

// skipValue returns the index just past the trusted value at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	return j
}

// keyIs reports whether the key token k spells name.
func keyIs(k []byte, name string) bool {
	if len(k) == len(name)+2 && string(k[1:len(k)-1]) == name {
		return true
	}
	return len(k) >= 2 && k[0] == '"' && hasEscape(k) && decodeString(k) == name
}

// tokenIs reports whether the string token v spells s.
func tokenIs(v []byte, s string) bool { return keyIs(v, s) }

func hasEscape(tok []byte) bool {
	for _, c := range tok {
		if c == '\\' {
			return true
		}
	}
	return false
}

// decodeString returns the value of a validated string token.
func decodeString(tok []byte) string {
	inner := tok[1 : len(tok)-1]
	if !hasEscape(inner) {
		return string(inner)
	}
	return string(appendUnquoted(make([]byte, 0, len(inner)), tok))
}

// appendUnquoted appends the value of a validated string token to dst.
func appendUnquoted(dst, tok []byte) []byte {
	inner := tok[1 : len(tok)-1]
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		switch inner[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(inner[i+1 : i+5])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 < len(inner) && inner[i+1] == '\\' && inner[i+2] == 'u' {
					r2 = hex4(inner[i+3 : i+7])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					i += 6
					r = dec
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, inner[i])
		}
	}
	return dst
}

func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}

// stringValue returns the decoded string if v is a string token.
func stringValue(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	return decodeString(v), true
}
