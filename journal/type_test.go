package journal

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// forged is a type that would end the "event:" line of a server-sent event
// and forge the fields after it, were it written there unescaped.
const forged = "message\nid: 999999\nevent: turn.ended"

// typeCases are types on either side of the rule; says is what the error
// names when the type is refused.
var typeCases = []struct {
	name, typ, says string
}{
	{"a dotted type is a type", "turn.ended", ""},
	{"one letter is a type", "x", ""},
	{"digits, '_', '.' and '-' may follow the first letter", "a0_.-9", ""},
	{"64 bytes is a type", strings.Repeat("a", 64), ""},
	{"a type with a line break is refused", forged, `type "message\nid: 999999\nevent: turn.ended": byte 8 is '\n'`},
	{"a type with a carriage return is refused", "message\r", `byte 8 is '\r'`},
	{"a type with a space is refused", "tool call", `byte 5 is ' '`},
	{"a type with a colon is refused", "event:x", `byte 6 is ':'`},
	{"a type with a NUL is refused", "a\x00", `byte 2 is '\x00'`},
	{"an upper-case type is refused", "Message", `byte 1 is 'M'`},
	{"a type starting with a digit is refused", "9lives", `byte 1 is '9'`},
	{"a type starting with '.' is refused", ".x", `byte 1 is '.'`},
	{"a type with a non-ASCII letter is refused", "café", `byte 4 is 'é'`},
	{"a type that is not UTF-8 is refused", "a\xff", "byte 2 is 0xff (not UTF-8)"},
	{"65 bytes is refused", strings.Repeat("a", 65), "is 65 bytes long"},
}

// Every way an event comes to be (a draft read from a person, a draft
// signed, a line read from a file or a peer) applies the one rule, and a
// refusal quotes the type, says what in it breaks the rule and states it.
func TestEventTypesAreTokens(t *testing.T) {
	s := newSigner(t)
	for _, tt := range typeCases {
		t.Run(tt.name, func(t *testing.T) {
			refused := func(what string, err error, sentinel error) {
				t.Helper()
				if tt.says == "" {
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					return
				}
				if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), typeRule) {
					t.Fatalf("%s: got %v, want %v saying %q and the rule", what, err, sentinel, tt.says)
				}
			}
			_, err := NewEvent(s, Stamp{Seq: 1, Clock: 1, Time: testTime}, Draft{Type: tt.typ})
			refused("NewEvent", err, ErrInvalidDraft)
			if !utf8.ValidString(tt.typ) {
				return // JSON cannot carry it: no draft line or event line holds it
			}
			quoted, _ := json.Marshal(tt.typ)
			_, err = ParseDraft([]byte(`{"type":` + string(quoted) + `}`))
			refused("ParseDraft", err, ErrInvalidDraft)

			// A line signed by hand, as a writer that skips the check would.
			e, err := buildEvent(s, Stamp{Seq: 1, Clock: 1, Time: testTime}, Draft{Type: tt.typ}, []byte(`{}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ParseLine(e.Line())
			refused("ParseLine", err, ErrInvalidEvent)
		})
	}
}

// A forged type in a journal file, written there without Append, makes its
// line bad: the file is not opened, and the error names the line and the
// type.
func TestAForgedTypeOnDiskIsABadLine(t *testing.T) {
	s := newSigner(t)
	path := newJournal(t)
	l := mustOpen(t, path)
	first, err := l.Append(t.Context(), s, 0, draft("message", `{"role":"user","content":[{"type":"text","text":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	e, err := buildEvent(s, Stamp{Seq: 2, Prev: first[0].ID, Clock: 2, Time: testTime}, Draft{Type: forged}, []byte(`{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(e.Line(), '\n')); err != nil {
		t.Fatal(err)
	}
	f.Close()

	events, bad, _ := Decode(readFile(t, path))
	if len(events) != 1 || len(bad) != 1 {
		t.Fatalf("read %d events and %d bad lines, want 1 and 1", len(events), len(bad))
	}
	_, err = OpenLog(path, LogOptions{})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), `"message\nid: 999999\nevent: turn.ended"`) {
		t.Fatalf("open: got %v, want line 2 refused, naming the type", err)
	}
}
