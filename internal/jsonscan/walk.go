package jsonscan

import "bytes"

// SkipString returns the index just past the string token at b[i], which
// is trusted to be valid: it only looks for the closing quote. Without
// one it returns len(b).
func SkipString(b []byte, i int) int {
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

// SkipValue returns the index just past the trusted value at b[i]: i
// itself if no value starts there, len(b) if it does not end.
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = SkipString(b, j) - 1
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
	for j < len(b) && !IsSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	return j
}

// Walker walks the members of an object or the elements of an array
// already validated: it only finds where each value ends. On text that
// is not valid it stops with ErrSyntax (or ErrNotObject, ErrNotArray),
// never reading out of bounds. Its zero value is an empty walk.
//
//	w := jsonscan.Object(b)
//	for k, v, ok := w.Member(); ok; k, v, ok = w.Member() { … }
//	if w.Err() != nil { … }
type Walker struct {
	b     []byte
	i     int
	close byte
	more  bool // false at the end, after an error, and in the zero value
	err   error
}

// Object starts a walk over the members of the validated object b, space
// around it allowed. A b that is not an object ends the walk at once with
// ErrNotObject.
func Object(b []byte) Walker { return open(b, '{', '}', ErrNotObject) }

// Array starts a walk over the elements of the validated array b. A b
// that is not an array ends the walk at once with ErrNotArray.
func Array(b []byte) Walker { return open(b, '[', ']', ErrNotArray) }

func open(b []byte, opening, closing byte, wrong error) Walker {
	w := Walker{b: b, close: closing}
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != opening {
		w.err = wrong
		return w
	}
	w.i = SkipSpace(b, i+1)
	w.more = w.i >= len(b) || b[w.i] != closing
	return w
}

// More reports whether a member or element may follow: false at the end
// of the walk (an empty object or array ends it at once) or after an
// error.
func (w *Walker) More() bool { return w.more }

// Err is why the walk stopped early, or nil.
func (w *Walker) Err() error { return w.err }

// after moves past the separator that follows a value ending at i.
func (w *Walker) after(i int) {
	i = SkipSpace(w.b, i)
	switch {
	case i < len(w.b) && w.b[i] == ',':
		w.i = SkipSpace(w.b, i+1)
	case i < len(w.b) && w.b[i] == w.close:
		w.more = false
	default:
		w.more, w.err = false, ErrSyntax
	}
}

// Member returns the next member's key token (quotes and escapes as
// written) and value, both slices of the walked text; false at the end.
func (w *Walker) Member() (key, val []byte, ok bool) {
	if !w.more {
		return nil, nil, false
	}
	b, kstart := w.b, w.i
	if kstart >= len(b) || b[kstart] != '"' {
		w.more, w.err = false, ErrSyntax
		return nil, nil, false
	}
	kend := SkipString(b, kstart)
	i := SkipSpace(b, kend)
	if i >= len(b) || b[i] != ':' {
		w.more, w.err = false, ErrSyntax
		return nil, nil, false
	}
	vstart := SkipSpace(b, i+1)
	vend := SkipValue(b, vstart)
	if vend <= vstart {
		w.more, w.err = false, ErrSyntax
		return nil, nil, false
	}
	w.after(vend)
	return b[kstart:kend], b[vstart:vend], true
}

// Element returns the next element, a slice of the walked text; false at
// the end.
func (w *Walker) Element() (val []byte, ok bool) {
	if !w.more {
		return nil, false
	}
	start := w.i
	end := SkipValue(w.b, start)
	if end <= start {
		w.more, w.err = false, ErrSyntax
		return nil, false
	}
	w.after(end)
	return w.b[start:end], true
}
