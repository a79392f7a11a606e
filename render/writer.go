package render

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/tern-dev/tern/internal/jsonscan"
)

// writer appends JSON to a byte slice. Keys are written in the order the
// renderer calls them, which is what makes output deterministic; it never
// fails, so callers check nothing.
type writer struct {
	b []byte
}

// raw appends s as it is: punctuation, keys, or a validated JSON value.
func (w *writer) raw(s string) { w.b = append(w.b, s...) }

// rawb appends b as it is.
func (w *writer) rawb(b []byte) { w.b = append(w.b, b...) }

// str appends s as a JSON string.
func (w *writer) str(s string) {
	w.b = append(w.b, '"')
	w.b = appendEscaped(w.b, s)
	w.b = append(w.b, '"')
}

// strb appends the bytes b as a JSON string.
func (w *writer) strb(b []byte) {
	w.b = append(w.b, '"')
	w.b = appendEscaped(w.b, b)
	w.b = append(w.b, '"')
}

// int appends n.
func (w *writer) int(n int) { w.b = strconv.AppendInt(w.b, int64(n), 10) }

// base64 appends data as a JSON string in standard base64 with padding.
func (w *writer) base64(data []byte) {
	w.b = append(w.b, '"')
	w.b = base64.StdEncoding.AppendEncode(w.b, data)
	w.b = append(w.b, '"')
}

// dataURL appends "data:<media type>;base64,<data>" as a JSON string.
func (w *writer) dataURL(mediaType string, data []byte) {
	w.b = append(w.b, `"data:`...)
	w.b = appendEscaped(w.b, mediaType)
	w.b = append(w.b, ";base64,"...)
	w.b = base64.StdEncoding.AppendEncode(w.b, data)
	w.b = append(w.b, '"')
}

const hexDigits = "0123456789abcdef"

// appendEscaped appends s JSON-escaped, without quotes. Invalid UTF-8
// becomes U+FFFD, as encoding/json does; <, > and & are kept as they are.
func appendEscaped[S string | []byte](dst []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); {
		// Skip eight plain ASCII bytes at a time.
		for i+8 <= len(s) {
			w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if w&0x8080808080808080 != 0 || !jsonscan.PlainWord(w) {
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

func decodeRune[S string | []byte](s S) (rune, int) {
	var buf [utf8.UTFMax]byte
	n := copy(buf[:], s)
	return utf8.DecodeRune(buf[:n])
}

// jsonString returns s as a JSON string token.
func jsonString(s string) []byte {
	w := writer{b: make([]byte, 0, len(s)+2)}
	w.str(s)
	return w.b
}
