package journal

import (
	"bytes"
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	es := chainOf(t, newSigner(t), 3)
	var good bytes.Buffer
	for _, e := range es {
		good.WriteString(e.line)
		good.WriteByte('\n')
	}
	join := func(parts ...string) []byte { return []byte(joinStrings(parts)) }
	l1, l2, l3 := string(es[0].line)+"\n", string(es[1].line)+"\n", string(es[2].line)+"\n"
	tests := []struct {
		name     string
		data     []byte
		events   int
		badLines []int
		torn     int
	}{
		{"an empty file holds nothing", nil, 0, nil, 0},
		{"whole lines are all read", good.Bytes(), 3, nil, 0},
		{"a torn tail is measured, not parsed", join(l1, l2, l3[:40]), 2, nil, 40},
		{"a complete last line without newline is a torn tail", join(l1, l2, l3[:len(l3)-1]), 2, nil, len(l3) - 1},
		{"bad lines are numbered from 1", join(l1, "not json\n", l2, "\n", l3), 3, []int{2, 4}, 0},
		{"a file of garbage gives only bad lines", []byte("\x00\xff\n{\n}}\n"), 0, []int{1, 2, 3}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, bad, torn := Decode(tt.data)
			if len(events) != tt.events || torn != tt.torn || len(bad) != len(tt.badLines) {
				t.Fatalf("got %d events, %d bad, torn %d", len(events), len(bad), torn)
			}
			for i, err := range bad {
				var le *LineError
				if !errors.As(err, &le) || le.Line != tt.badLines[i] {
					t.Fatalf("bad[%d] = %v, want line %d", i, err, tt.badLines[i])
				}
			}
		})
	}
	t.Run("a line error names its line", func(t *testing.T) {
		_, bad, _ := Decode(join(l1, "{}\n"))
		if len(bad) != 1 || bad[0].Error() != `line 2: invalid event: missing field "v"` {
			t.Fatalf("got %v", bad)
		}
	})
}

func joinStrings(parts []string) string {
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString(p)
	}
	return b.String()
}

func TestParseLinesKeepsOrderAndNamesTheFirstBadLine(t *testing.T) {
	es := chainOf(t, newSigner(t), 300)
	lines := make([][]byte, len(es))
	for i, e := range es {
		lines[i] = e.Line()
	}
	got, bad, err := ParseLines(lines)
	if err != nil || bad != -1 || len(got) != len(es) {
		t.Fatalf("%d events, bad %d, %v", len(got), bad, err)
	}
	for i := range got {
		if got[i].ID != es[i].ID {
			t.Fatalf("event %d is %s, want %s", i, got[i].ID, es[i].ID)
		}
	}
	lines[250] = []byte(`{"not":"an event"}`)
	lines[120] = bytes.Replace(lines[120], []byte(`"seq":`), []byte(`"seq" :`), 1)
	got, bad, err = ParseLines(lines)
	if !errors.Is(err, ErrNotCanonical) || bad != 120 || len(got) != 120 {
		t.Fatalf("%d events, bad %d, %v; want the 120 before line 120, which is not canonical", len(got), bad, err)
	}
}
