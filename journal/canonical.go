package journal

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/tern-dev/tern/internal/jsonscan"
)

// maxSafeInt is the largest integer every JSON reader holds exactly (2^53-1).
const maxSafeInt = 1<<53 - 1

// Canonical returns the RFC 8785 (JSON Canonicalization Scheme) form of
// the JSON text b: no insignificant whitespace, object members sorted by
// the UTF-16 code units of their names, strings with only the escapes RFC
// 8785 requires, numbers as ECMAScript writes an IEEE 754 double (1.0
// becomes 1, 1e30 becomes 1e+30). It is the one canonical encoding tern
// uses: journal lines and bodies, the capsule manifest, anything hashed or
// signed.
//
// b must be exactly one JSON value, surrounding whitespace allowed, that
// I-JSON (RFC 7493) accepts: valid UTF-8, no duplicate member names, no
// lone surrogate escapes; anything else is an error. A number is read as a
// double, so an integer beyond 2^53-1 silently loses digits: callers that
// must keep such input refuse it first (as ParseDraft does). Canonical
// never panics, never modifies b, and returns a new slice; applied to its
// own output it returns the same bytes. It is safe for concurrent use.
func Canonical(b []byte) (out []byte, err error) {
	if isCanonical(b) {
		return bytes.Clone(b), nil
	}
	if b == nil {
		b = []byte{}
	}
	defer func() {
		if r := recover(); r != nil { // the canonicalizer is outside code; never let it take us down
			out, err = nil, fmt.Errorf("canonical JSON: %v", r)
		}
	}()
	return jcs.Transform(b)
}

// member is one top-level member of a canonical JSON object.
type member struct {
	key string // decoded name
	raw []byte // `"name":value`, exactly as in the object
	val []byte // value
	off int    // offset of val in the object
}

var (
	errNotObject = jsonscan.ErrNotObject
	errNotArray  = jsonscan.ErrNotArray
)

// splitMembers cuts a canonical JSON object (no insignificant whitespace)
// into its top-level members, in order. It never panics; on text that is
// not such an object it fails.
func splitMembers(b []byte) ([]member, error) {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, errNotObject
	}
	if len(b) == 2 {
		return nil, nil
	}
	ms := make([]member, 0, 16)
	end := 0
	w := jsonscan.Object(b)
	for k, v, ok := w.Member(); ok; k, v, ok = w.Member() {
		key, err := decodeString(k)
		if err != nil {
			return nil, err
		}
		// k and v are slices of b: their capacities say where they start.
		start, off := cap(b)-cap(k), cap(b)-cap(v)
		end = off + len(v)
		ms = append(ms, member{key: key, raw: b[start:end], val: v, off: off})
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	if end != len(b)-1 {
		return nil, errNotObject
	}
	return ms, nil
}

// splitElements cuts a canonical JSON array into its elements, in order.
// It never panics; on text that is not such an array it fails.
func splitElements(b []byte) ([][]byte, error) {
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, errNotArray
	}
	if len(b) == 2 {
		return nil, nil
	}
	var out [][]byte
	end := 0
	w := jsonscan.Array(b)
	for v, ok := w.Element(); ok; v, ok = w.Element() {
		out = append(out, v)
		end = cap(b) - cap(v) + len(v) // v is a slice of b
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	if end != len(b)-1 {
		return nil, errNotArray
	}
	return out, nil
}

// decodeString decodes a JSON string literal, quotes included.
func decodeString(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", errors.New("not a JSON string")
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		if !utf8.Valid(inner) {
			return "", errors.New("string is not valid UTF-8")
		}
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	return s, nil
}

// AppendCanonicalString appends s as an RFC 8785 string literal: the
// escapes RFC 8785 requires and no others. It fails on s that is not valid
// UTF-8. With CompareMemberNames it lets a type write its own canonical
// encoding without a pass through Canonical.
func AppendCanonicalString(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return dst, errors.New("string is not valid UTF-8")
	}
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	plain := 0 // s[plain:i] needs no escape
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[plain:i]...)
		plain = i + 1
		switch c {
		case '\\', '"':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	dst = append(dst, s[plain:]...)
	return append(dst, '"'), nil
}

// stringMember builds the canonical member "key":"value".
func stringMember(key, value string) (member, error) {
	raw, err := AppendCanonicalString(nil, key)
	if err != nil {
		return member{}, fmt.Errorf("field %q: %w", key, err)
	}
	raw = append(raw, ':')
	n := len(raw)
	raw, err = AppendCanonicalString(raw, value)
	if err != nil {
		return member{}, fmt.Errorf("field %q: %w", key, err)
	}
	return member{key: key, raw: raw, val: raw[n:]}, nil
}

// uintMember builds the canonical member "key":n for a safe integer n.
func uintMember(key string, n uint64) member {
	raw, _ := AppendCanonicalString(nil, key) // keys given here are ASCII constants
	raw = append(raw, ':')
	k := len(raw)
	raw = strconv.AppendUint(raw, n, 10)
	return member{key: key, raw: raw, val: raw[k:]}
}

// rawMember builds the member "key":value for an already canonical value.
func rawMember(key string, value []byte) (member, error) {
	raw, err := AppendCanonicalString(nil, key)
	if err != nil {
		return member{}, fmt.Errorf("field %q: %w", key, err)
	}
	raw = append(raw, ':')
	k := len(raw)
	raw = append(raw, value...)
	return member{key: key, raw: raw, val: raw[k:]}, nil
}

// CompareMemberNames orders member names as RFC 8785 does: by UTF-16 code
// units. That is byte order except where a code point from U+10000 (a
// surrogate pair in UTF-16) meets one from U+E000 to U+FFFF, so only the
// first code points that differ are looked at.
func CompareMemberNames(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	switch {
	case i == len(a) && i == len(b):
		return 0
	case i < n && a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf:
		return cmp.Compare(a[i], b[i])
	}
	longer := a
	if len(b) > len(a) {
		longer = b
	}
	for i > 0 && !utf8.RuneStart(longer[i]) {
		i-- // the same bytes in both: back to the start of the code point that differs
	}
	var ra, rb rune
	for ra == rb { // equal code points, made of the same bytes: go on
		var wa, wb int
		ra, wa = utf8.DecodeRuneInString(a[i:])
		rb, wb = utf8.DecodeRuneInString(b[i:])
		switch {
		case ra == utf8.RuneError && wa == 1, rb == utf8.RuneError && wb == 1:
			// Invalid UTF-8 reads as U+FFFD, whose order the bytes do not tell.
			return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		case wa == 0:
			return -1 // a is a prefix of b
		case wb == 0:
			return 1
		}
		i += wa
	}
	if (ra >= 0x10000) != (rb >= 0x10000) {
		// A surrogate pair starts with 0xD800-0xDBFF; a single unit here is
		// below 0xD800 or from 0xE000.
		if ra >= 0x10000 {
			return cmp.Compare(0xD800, rb)
		}
		return cmp.Compare(ra, 0xD800)
	}
	return cmp.Compare(ra, rb)
}

// joinMembers writes the object made of ms, leaving out members named in
// skip. For the members of a canonical object the result is canonical too.
func joinMembers(ms []member, skip ...string) []byte {
	n := 2
	for _, m := range ms {
		n += len(m.raw) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	first := true
next:
	for _, m := range ms {
		for _, s := range skip {
			if m.key == s {
				continue next
			}
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, m.raw...)
	}
	return append(out, '}')
}

// parseSafeInt reads a canonical non-negative JSON integer no larger than
// 2^53-1.
func parseSafeInt(v []byte) (uint64, bool) {
	if len(v) == 0 || len(v) > 16 || (len(v) > 1 && v[0] == '0') {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n <= maxSafeInt
}

// firstDifference is the offset of the first byte where a and b differ.
func firstDifference(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
