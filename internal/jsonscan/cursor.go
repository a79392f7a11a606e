package jsonscan

// Cursor reads one JSON document front to back, validating each byte
// once: a parser steps into the objects and arrays it wants and takes the
// other values whole. After an error every step fails and Err says why.
//
// The loop over an object's members:
//
//	for ok := c.Enter('{', '}'); ok; ok = c.More('}') {
//		switch string(c.Key()) {
//		case "name":
//			v := c.Value()
//		default:
//			c.Value()
//		}
//	}
//	if err := c.Done(); err != nil { … }
type Cursor struct {
	s   Scanner
	b   []byte
	i   int
	err error
}

// NewCursor returns a cursor at the start of b.
func NewCursor(b []byte) Cursor { return Cursor{b: b} }

// NonASCII counts the bytes from 0x80 up of the strings read so far: what
// an estimate of tokens needs.
func (c *Cursor) NonASCII() int { return c.s.NonASCII }

// Err is the first error of a step: ErrSyntax, or ErrNotObject or
// ErrNotArray from Enter; nil if there was none.
func (c *Cursor) Err() error { return c.err }

func (c *Cursor) fail(err error) bool {
	if c.err == nil {
		c.err = err
	}
	c.i = len(c.b)
	return false
}

// Peek returns the next byte that is not space, or 0 at the end.
func (c *Cursor) Peek() byte {
	c.i = SkipSpace(c.b, c.i)
	if c.i >= len(c.b) {
		return 0
	}
	return c.b[c.i]
}

// Enter steps into the object or array (opening '{' or '[', closing '}'
// or ']') that comes next and reports whether it has a first member or
// element. Anything else next is ErrNotObject or ErrNotArray.
func (c *Cursor) Enter(opening, closing byte) bool {
	if c.Peek() != opening {
		if opening == '{' {
			return c.fail(ErrNotObject)
		}
		return c.fail(ErrNotArray)
	}
	c.i++
	if c.Peek() == closing {
		c.i++
		return false
	}
	return c.err == nil
}

// More moves past the separator after a member or element and reports
// whether another follows; false at the closing bracket.
func (c *Cursor) More(closing byte) bool {
	switch c.Peek() {
	case ',':
		c.i++
		return true
	case closing:
		c.i++
		return false
	}
	return c.fail(ErrSyntax)
}

// Key reads a member's key and the colon after it, and returns the key's
// name, unescaped (compare it with switch string(k), which does not
// copy); nil after an error.
func (c *Cursor) Key() []byte {
	if c.Peek() != '"' {
		c.fail(ErrSyntax)
		return nil
	}
	start := c.i
	end, ok := c.s.String(c.b, start)
	if !ok {
		c.fail(ErrSyntax)
		return nil
	}
	c.i = end
	if c.Peek() != ':' {
		c.fail(ErrSyntax)
		return nil
	}
	c.i++
	if c.s.Escaped {
		return AppendUnquote(nil, c.b[start:end])
	}
	return c.b[start+1 : end-1]
}

// Value validates the next value and returns it, without the space around
// it; nil after an error.
func (c *Cursor) Value() []byte {
	start := SkipSpace(c.b, c.i)
	end, err := c.s.Value(c.b, start, 1)
	if err != nil {
		c.fail(err)
		return nil
	}
	c.i = end
	return c.b[start:end]
}

// Done checks that nothing but space is left and returns the first error.
func (c *Cursor) Done() error {
	if c.err == nil && SkipSpace(c.b, c.i) != len(c.b) {
		c.err = ErrSyntax
	}
	return c.err
}
