package jsonscan

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"unicode/utf8"
)

// ErrSyntax means text is not valid JSON, or holds a string that is not
// valid UTF-8.
var ErrSyntax = errors.New("not valid JSON")

// ErrNotObject and ErrNotArray mean a value has the wrong JSON type.
var (
	ErrNotObject = errors.New("not a JSON object")
	ErrNotArray  = errors.New("not a JSON array")
)

// MaxDepth is the most arrays and objects Scanner.Value lets enclose a
// value (so at most MaxDepth+1 levels of brackets, where encoding/json
// takes MaxDepth), so that hostile text cannot exhaust the stack.
const MaxDepth = 10000

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the index of the first byte at or after i that is not
// whitespace, or len(b).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && IsSpace(b[i]) {
		i++
	}
	return i
}

// Word-at-a-time tests (Bit Twiddling Hacks): hasZero reports whether a
// byte of x is zero, hasLess whether one is below n (n <= 128).
const (
	ones     = 0x0101010101010101
	highBits = 0x8080808080808080
)

func hasZero(x uint64) bool         { return (x-ones)&^x&highBits != 0 }
func hasLess(x uint64, n byte) bool { return (x-ones*uint64(n))&^x&highBits != 0 }

// PlainWord reports whether each of the eight bytes of w may stand as
// itself inside a string token: none is a control character, '"' or '\\'
// (bytes from 0x80 up count as plain; UTF-8 is another check). Scanners
// and writers of strings use it to pass over eight bytes at a time.
func PlainWord(w uint64) bool {
	return !hasLess(w, 0x20) && !hasZero(w^(ones*'"')) && !hasZero(w^(ones*'\\'))
}

// plainInString marks the bytes a string token may hold as they are.
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Scanner validates JSON tokens and values, and notes what it sees on the
// way. Its zero value is ready.
type Scanner struct {
	// NonASCII counts the bytes from 0x80 up of every string read
	// (everything outside strings is ASCII): what an estimate of tokens
	// needs.
	NonASCII int
	// Escaped says whether the last string read holds a backslash escape.
	Escaped bool
	// Canonical says whether the last string read is written as RFC 8785
	// writes strings: every character as itself but '"', '\\' and the
	// control characters, which take the escapes \" \\ \b \f \n \r \t
	// where there is one, else \u00xx in lower case.
	Canonical bool
}

// String validates the string token that starts at b[i], which must be
// '"', and returns the index just past its closing quote; ok is false if
// there is no such token, or its bytes are not valid UTF-8. A token it
// accepts adds its bytes from 0x80 up to NonASCII and sets Escaped and
// Canonical; after a refusal those two say nothing.
func (s *Scanner) String(b []byte, i int) (end int, ok bool) {
	start := i + 1
	high := 0 // bytes with the high bit set: not ASCII
	// Nothing else lives across the loops, which keeps them in registers:
	// the rare escapes write to s.
	s.Escaped, s.Canonical = false, true
	for i++; i < len(b); i++ {
		// Eight plain bytes at a time, then one at a time.
		for ; i+8 <= len(b); i += 8 {
			w := binary.LittleEndian.Uint64(b[i:])
			if !PlainWord(w) {
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
				return 0, false
			}
			s.NonASCII += high
			return i + 1, true
		case c == '\\':
			s.Escaped = true
			i++
			if i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
			case '/':
				s.Canonical = false
			case 'u':
				if i+4 >= len(b) {
					return 0, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return 0, false
					}
				}
				if s.Canonical && !canonicalU(b[i+1:i+5]) {
					s.Canonical = false
				}
				i += 4
			default:
				return 0, false
			}
		default: // a control character
			return 0, false
		}
	}
	return 0, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// canonicalU reports whether the four hex digits of a \u escape are how
// RFC 8785 writes a character: 00 and two lower-case digits of a control
// character that has no short escape.
func canonicalU(h []byte) bool {
	if h[0] != '0' || h[1] != '0' || !lowerHex(h[2]) || !lowerHex(h[3]) {
		return false
	}
	switch v := hexValue(h[2])<<4 | hexValue(h[3]); {
	case v >= 0x20, v == '\b', v == '\f', v == '\n', v == '\r', v == '\t':
		return false // written as itself or with a short escape
	}
	return true
}

func lowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// hexValue is the value of a hex digit of either case.
func hexValue(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// Number validates the number token that starts at b[i] and returns the
// index just past it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. It
// stops at the first byte that cannot continue the number; what follows is
// the caller's to check.
func Number(b []byte, i int) (end int, ok bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, false
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
			return 0, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// Literal validates the true, false or null that starts at b[i] and
// returns the index just past it.
func Literal(b []byte, i int) (end int, ok bool) {
	if i >= len(b) {
		return 0, false
	}
	var w string
	switch b[i] {
	case 't':
		w = "true"
	case 'f':
		w = "false"
	case 'n':
		w = "null"
	default:
		return 0, false
	}
	if len(b)-i < len(w) || string(b[i:i+len(w)]) != w {
		return 0, false
	}
	return i + len(w), true
}

// str validates the string token at b[i] == '"' and returns the index
// just past it.
func (s *Scanner) str(b []byte, i int) (int, error) {
	end, ok := s.String(b, i)
	if !ok {
		return 0, ErrSyntax
	}
	return end, nil
}

// Value validates the value that starts at b[i] (no space before it) at
// nesting depth depth, and returns the index just past it. Its one error
// is ErrSyntax, also for nesting deeper than MaxDepth.
func (s *Scanner) Value(b []byte, i, depth int) (int, error) {
	if i >= len(b) || depth > MaxDepth {
		return 0, ErrSyntax
	}
	switch c := b[i]; {
	case c == '"':
		return s.str(b, i)
	case c == '{':
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, ErrSyntax
			}
			var err error
			if i, err = s.str(b, i); err != nil {
				return 0, err
			}
			i = SkipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return 0, ErrSyntax
			}
			if i, err = s.Value(b, SkipSpace(b, i+1), depth+1); err != nil {
				return 0, err
			}
			i = SkipSpace(b, i)
			if i >= len(b) {
				return 0, ErrSyntax
			}
			if b[i] == '}' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, ErrSyntax
			}
			i = SkipSpace(b, i+1)
		}
	case c == '[':
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = s.Value(b, i, depth+1); err != nil {
				return 0, err
			}
			i = SkipSpace(b, i)
			if i >= len(b) {
				return 0, ErrSyntax
			}
			if b[i] == ']' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, ErrSyntax
			}
			i = SkipSpace(b, i+1)
		}
	case c == 't', c == 'f', c == 'n':
		end, ok := Literal(b, i)
		if !ok {
			return 0, ErrSyntax
		}
		return end, nil
	default:
		end, ok := Number(b, i)
		if !ok {
			return 0, ErrSyntax
		}
		return end, nil
	}
}

// Trim validates that b is exactly one JSON value, with space around it
// allowed, and returns the value without the space; else ErrSyntax.
func Trim(b []byte) ([]byte, error) {
	var s Scanner
	i := SkipSpace(b, 0)
	end, err := s.Value(b, i, 0)
	if err != nil || SkipSpace(b, end) != len(b) {
		return nil, ErrSyntax
	}
	return b[i:end], nil
}

// Valid reports whether b is exactly one JSON value, with space around it
// allowed.
func Valid(b []byte) bool {
	_, err := Trim(b)
	return err == nil
}
