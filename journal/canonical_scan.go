package journal

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/tern-dev/tern/internal/jsonscan"
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
// The tokens are jsonscan's; what is canonical about them and their
// order is decided here.
func scanCanonical(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		end, _, ok := canonicalString(b, i)
		return end, ok
	case c == '{':
		return scanCanonicalObject(b, i, depth+1)
	case c == '[':
		return scanCanonicalArray(b, i, depth+1)
	case c == 't' || c == 'f' || c == 'n':
		return jsonscan.Literal(b, i)
	case c == '-' || ('0' <= c && c <= '9'):
		end, ok := jsonscan.Number(b, i)
		return end, ok && canonicalNumber(b[i:end])
	}
	return 0, false
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
		end, plain, ok := canonicalString(b, i)
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

// canonicalString returns the index just past the string at b[i] == '"'
// if it is valid and written as RFC 8785 writes strings; plain is true if
// it holds no escape at all.
func canonicalString(b []byte, i int) (end int, plain, ok bool) {
	var s jsonscan.Scanner
	end, ok = s.String(b, i)
	return end, !s.Escaped, ok && s.Canonical
}

// keyBefore reports whether the object key a (valid UTF-8, no escapes)
// sorts strictly before b in RFC 8785's order, by UTF-16 code units.
func keyBefore(a, b []byte) bool {
	if isASCIIBytes(a) && isASCIIBytes(b) {
		return bytes.Compare(a, b) < 0
	}
	return CompareMemberNames(string(a), string(b)) < 0
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

// canonicalNumber reports whether the number token tok is written as
// ECMAScript writes that double (as RFC 8785 asks).
func canonicalNumber(tok []byte) bool {
	// The common case: an integer of at most 15 digits, exact as a double
	// and written by ECMAScript digit for digit.
	digits := tok
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if n := len(digits); n > 0 && n <= 15 && isDigitBytes(digits) {
		return digits[0] != '0' || len(tok) == 1 // "0"; never "-0"
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return false
	}
	s, err := jcs.NumberToJSON(f)
	return err == nil && s == string(tok)
}

func isDigitBytes(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
