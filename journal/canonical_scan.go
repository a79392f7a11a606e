package journal

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// maxScanDepth is how deep isCanonical follows arrays and objects; deeper
// text goes to the canonicalizer, which has its own limit.
const maxScanDepth = 1000

// isCanonical reports whether b is already its own RFC 8785 form, reading
// it once without building anything: what Canonical would return is then
// b itself. It is the fast path of Canonical for text that is meant to be
// canonical (every journal line a peer sends). It may answer false for
// canonical text it does not follow (an object key written with an escape,
// nesting deeper than maxScanDepth): false only means "ask the
// canonicalizer". It never answers true for text Canonical would refuse or
// change (FuzzIsCanonicalAgreesWithTheCanonicalizer holds it to that).
func isCanonical(b []byte) bool {
	end, ok := scanCanonical(b, 0, 0)
	return ok && end == len(b)
}

// scanCanonical returns the index just past the canonical value at b[i].
func scanCanonical(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		end, _, ok := scanCanonicalString(b, i)
		return end, ok
	case c == '{':
		return scanCanonicalObject(b, i, depth+1)
	case c == '[':
		return scanCanonicalArray(b, i, depth+1)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || ('0' <= c && c <= '9'):
		return scanCanonicalNumber(b, i)
	}
	return 0, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	end := i + len(lit)
	return end, end <= len(b) && string(b[i:end]) == lit
}

func scanCanonicalObject(b []byte, i, depth int) (int, bool) {
	if depth > maxScanDepth {
		return 0, false
	}
	i++ // '{'
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	var prev []byte
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		end, plain, ok := scanCanonicalString(b, i)
		if !ok || !plain {
			return 0, false // a key with an escape: the canonicalizer decodes it
		}
		key := b[i+1 : end-1]
		if prev != nil && !keyBefore(prev, key) {
			return 0, false
		}
		prev = key
		if end >= len(b) || b[end] != ':' {
			return 0, false
		}
		if i, ok = scanCanonical(b, end+1, depth); !ok || i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// keyBefore reports whether the object key a (valid UTF-8, no escapes)
// sorts strictly before b in RFC 8785's order, by UTF-16 code units.
func keyBefore(a, b []byte) bool {
	if isASCIIBytes(a) && isASCIIBytes(b) {
		return bytes.Compare(a, b) < 0
	}
	return compareKeys(string(a), string(b)) < 0
}

func isASCIIBytes(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func scanCanonicalArray(b []byte, i, depth int) (int, bool) {
	if depth > maxScanDepth {
		return 0, false
	}
	i++ // '['
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = scanCanonical(b, i, depth); !ok || i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i++
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// scanCanonicalString returns the index just past the string at b[i] ==
// '"' if it is written as RFC 8785 writes strings: valid UTF-8, every
// character as itself but '"', '\\' and the control characters, which take
// the short escapes \" \\ \b \f \n \r \t where there is one, else \u00xx in
// lower case. plain is true if it holds no escape at all.
func scanCanonicalString(b []byte, i int) (end int, plain, ok bool) {
	start := i + 1
	high := false
	plain = true
	for j := start; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, plain, !high || utf8.Valid(b[start:j])
		case c == '\\':
			plain = false
			if j+1 >= len(b) {
				return 0, false, false
			}
			switch b[j+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if j+5 >= len(b) || b[j+2] != '0' || b[j+3] != '0' || !lowerHex(b[j+4]) || !lowerHex(b[j+5]) {
					return 0, false, false
				}
				switch v := hexValue(b[j+4])<<4 | hexValue(b[j+5]); {
				case v >= 0x20, v == '\b', v == '\f', v == '\n', v == '\r', v == '\t':
					return 0, false, false // written as itself or with a short escape
				}
				j += 5
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	return 0, false, false
}

func lowerHex(c byte) bool { return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') }

func hexValue(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// scanCanonicalNumber returns the index just past the number at b[i] if
// it is written as ECMAScript writes that double (as RFC 8785 asks).
func scanCanonicalNumber(b []byte, i int) (int, bool) {
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	tok := b[i:j]
	// The common case: an integer of at most 15 digits, exact as a double
	// and written by ECMAScript digit for digit.
	digits := tok
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if n := len(digits); n > 0 && n <= 15 && isDigitBytes(digits) {
		if digits[0] == '0' {
			return j, len(tok) == 1 // "0"; never "-0" or a leading zero
		}
		return j, true
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return 0, false
	}
	s, err := jcs.NumberToJSON(f)
	return j, err == nil && s == string(tok)
}

func isDigitBytes(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
