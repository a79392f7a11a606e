package jsonscan

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote returns the value of the valid string token tok (quotes
// included), as encoding/json decodes it: a lone surrogate escape becomes
// U+FFFD.
func Unquote(tok []byte) string {
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner)
	}
	return string(AppendUnquote(make([]byte, 0, len(inner)), tok))
}

// AppendUnquote appends the value of the valid string token tok to dst.
func AppendUnquote(dst, tok []byte) []byte {
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

// hex4 is the value of four hex digits.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		r = r<<4 | rune(hexValue(c))
	}
	return r
}

// Equal reports whether the valid string token tok spells s; false if tok
// is not a string token at all (nil, another value).
func Equal(tok []byte, s string) bool {
	if len(tok) == len(s)+2 && tok[0] == '"' && string(tok[1:len(tok)-1]) == s {
		return true
	}
	return len(tok) >= 2 && tok[0] == '"' && bytes.IndexByte(tok, '\\') >= 0 && Unquote(tok) == s
}
