package jsonscan

import (
	"strings"
	"testing"
)

// benchBodies are journal bodies of the kinds render reads most: messages,
// tool calls and their results.
var benchBodies = [][]byte{
	[]byte(`{"content":[{"text":"Question 7: ` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4) + `","type":"text"}],"role":"user"}`),
	[]byte(`{"content":[{"text":"Let me look that up. Ünïcödé, \"quoted\"\nand a new line.","type":"text"}],"role":"assistant"}`),
	[]byte(`{"arguments":{"city":"Paris 7"},"call_id":"call_7_a","name":"get_weather"}`),
	[]byte(`{"call_id":"call_7_a","content":[{"text":"{\"temp_c\":7,\"sky\":\"clear\",\"wind_kmh\":12}","type":"text"}],"is_error":false}`),
}

// benchRead steps a cursor through every value, as render's parsers do.
func benchRead(c *Cursor) {
	switch c.Peek() {
	case '{':
		for ok := c.Enter('{', '}'); ok; ok = c.More('}') {
			c.Key()
			benchRead(c)
		}
	case '[':
		for ok := c.Enter('[', ']'); ok; ok = c.More(']') {
			benchRead(c)
		}
	default:
		c.Value()
	}
}

// BenchmarkCursor reads typical bodies with a Cursor, validating every
// byte: render's cost per event before it writes anything.
func BenchmarkCursor(b *testing.B) {
	n := 0
	for _, body := range benchBodies {
		n += len(body)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		for _, body := range benchBodies {
			c := NewCursor(body)
			benchRead(&c)
			if c.Done() != nil {
				b.Fatal(c.Err())
			}
		}
	}
}
