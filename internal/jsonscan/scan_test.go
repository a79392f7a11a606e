package jsonscan

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestStringReadsATokenAndNotesWhatItHolds(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		end      int // 0: not a valid token
		want     Scanner
	}{
		{"an empty string is canonical", `""`, 2, Scanner{Canonical: true}},
		{"plain ASCII ends at its quote", `"abc",1`, 5, Scanner{Canonical: true}},
		{"a long plain string is read eight bytes at a time", `"` + strings.Repeat("abcdefgh", 5) + `"`, 42, Scanner{Canonical: true}},
		{"bytes that are not ASCII are counted", `"héllo €😀"`, 16, Scanner{NonASCII: 9, Canonical: true}},
		{"non-ASCII bytes past eight are counted", `"` + strings.Repeat("é", 10) + `"`, 22, Scanner{NonASCII: 20, Canonical: true}},
		{"the short escapes are canonical", `"\"\\\b\f\n\r\t"`, 16, Scanner{Escaped: true, Canonical: true}},
		{"a control character without a short escape is canonical as \\u00xx", `"\u001f\u0000"`, 14, Scanner{Escaped: true, Canonical: true}},
		{"an escaped slash is valid, not canonical", `"\/"`, 4, Scanner{Escaped: true}},
		{"upper-case hex is valid, not canonical", `"\u001F"`, 8, Scanner{Escaped: true}},
		{"an escaped letter is valid, not canonical", `"\u0041"`, 8, Scanner{Escaped: true}},
		{"a \\u escape of a character with a short one is not canonical", `"\u000a"`, 8, Scanner{Escaped: true}},
		{"a surrogate pair is valid, not canonical", `"\ud83d\ude00"`, 14, Scanner{Escaped: true}},
		{"a lone surrogate escape is valid JSON", `"\ud800"`, 8, Scanner{Escaped: true}},
		{"DEL and U+2028 are written as themselves", "\"\x7f\u2028\"", 6, Scanner{NonASCII: 3, Canonical: true}},
		{"an unterminated string is refused", `"abc`, 0, Scanner{}},
		{"an escape at the end is refused", `"\`, 0, Scanner{}},
		{"an unknown escape is refused", `"\x"`, 0, Scanner{}},
		{"a short \\u escape is refused", `"\u12"`, 0, Scanner{}},
		{"a \\u escape with a non-hex digit is refused", `"\u12g4"`, 0, Scanner{}},
		{"a raw control character is refused", "\"a\nb\"", 0, Scanner{}},
		{"a raw control character past eight bytes is refused", "\"abcdefghij\x01\"", 0, Scanner{}},
		{"invalid UTF-8 is refused", "\"\xff\"", 0, Scanner{}},
		{"an encoded surrogate is refused", "\"\xed\xa0\x80\"", 0, Scanner{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s Scanner
			end, ok := s.String([]byte(tt.in), 0)
			if !ok {
				s.Escaped, s.Canonical = false, false // say nothing after a refusal
			}
			if ok != (tt.end > 0) || end != tt.end || s != tt.want {
				t.Fatalf("String(%q) = %d, %v and %+v; want %d and %+v", tt.in, end, ok, s, tt.end, tt.want)
			}
		})
	}
}

func TestNumberFollowsTheGrammar(t *testing.T) {
	for in, end := range map[string]int{
		"0": 1, "-0": 2, "12": 2, "1.5": 3, "-1.25e+10": 9, "1E5": 3, "1e-7": 4, "0.0": 3,
		"01": 1, "1,": 1, "1]": 1, "1 ": 1, "1x": 1, // the number ends; what follows is the caller's
		"": 0, "-": 0, "+1": 0, ".5": 0, "1.": 0, "1e": 0, "1e+": 0, "-a": 0, "NaN": 0,
	} {
		got, ok := Number([]byte(in), 0)
		if ok != (end > 0) || got != end {
			t.Errorf("Number(%q) = %d, %v; want %d", in, got, ok, end)
		}
	}
}

func TestLiteral(t *testing.T) {
	for in, end := range map[string]int{"true": 4, "false": 5, "null": 4, "null,": 4, "tru": 0, "nul": 0, "True": 0, "x": 0, "": 0} {
		got, ok := Literal([]byte(in), 0)
		if ok != (end > 0) || got != end {
			t.Errorf("Literal(%q) = %d, %v; want %d", in, got, ok, end)
		}
	}
}

// validTexts and invalidTexts are checked against encoding/json too.
var validTexts = []string{
	`{}`, `[]`, `""`, `0`, `-1.5e3`, `true`, `false`, `null`, ` {} `, "\t[\n1 ,\r2 ]\n",
	`{"a":1,"b":[true,false,null],"c":{"":"x"}}`,
	`{"a" : { "b" : [ 1 , { } , [ ] ] } }`,
	`{"a":1,"a":2}`, // duplicate names are JSON; I-JSON refuses them elsewhere
	`"\ud83d\ude00 \u00e9 \/ \""`,
	`[[[[[[[[[[]]]]]]]]]]`,
}

var invalidTexts = []string{
	``, ` `, `{`, `}`, `[`, `[1`, `[1,]`, `{"a":1,}`, `{,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{'a':1}`,
	`[1 2]`, `[true false]`, `1 2`, `{} {}`, `tru`, `truex`, `nul`, `01`, `1.`, `.5`, `+1`, `-`, `NaN`,
	`"abc`, `"\x"`, "\"\x01\"", `{"a":1}x`, "[\"\xff\"]",
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range validTexts {
		if !Valid([]byte(s)) {
			t.Errorf("Valid(%q) = false", s)
		}
		if !json.Valid([]byte(s)) {
			t.Errorf("the table is wrong: encoding/json refuses %q", s)
		}
	}
	for _, s := range invalidTexts {
		if Valid([]byte(s)) {
			t.Errorf("Valid(%q) = true", s)
		}
	}
}

func TestTrimReturnsTheValueWithoutSpace(t *testing.T) {
	got, err := Trim([]byte(" \n{\"a\": [1, 2]}\t"))
	if err != nil || string(got) != `{"a": [1, 2]}` {
		t.Fatalf("Trim = %q, %v", got, err)
	}
	if _, err := Trim([]byte("[1] x")); !errors.Is(err, ErrSyntax) {
		t.Fatalf("Trim of a value and more = %v, want ErrSyntax", err)
	}
}

func TestValueRefusesNestingDeeperThanMaxDepth(t *testing.T) {
	ok := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	if !Valid([]byte(ok)) {
		t.Fatalf("a value inside %d arrays refused", MaxDepth)
	}
	deep := "[" + ok + "]"
	if Valid([]byte(deep)) {
		t.Fatalf("a value inside %d arrays accepted", MaxDepth+1)
	}
}

func TestScannerCountsTheBytesOfStringsThatAreNotASCII(t *testing.T) {
	var s Scanner
	b := []byte(`{"é":["ü", 1, "plain"], "k": "€"}`)
	if end, err := s.Value(b, 0, 0); err != nil || end != len(b) {
		t.Fatalf("Value = %d, %v", end, err)
	}
	if s.NonASCII != 7 {
		t.Fatalf("NonASCII = %d, want 7", s.NonASCII)
	}
}

func TestCursorStepsIntoWhatItWantsAndTakesTheRestWhole(t *testing.T) {
	c := NewCursor([]byte(` {"skip": {"x": [1, "]"]}, "k\u0065y": "v", "list": [1, "two", {}]} `))
	var key, list []string
	for ok := c.Enter('{', '}'); ok; ok = c.More('}') {
		switch k := string(c.Key()); k {
		case "list":
			for ok := c.Enter('[', ']'); ok; ok = c.More(']') {
				list = append(list, string(c.Value()))
			}
		case "key":
			key = append(key, string(c.Value()))
		default:
			c.Value()
		}
	}
	if err := c.Done(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(key, []string{`"v"`}) || !reflect.DeepEqual(list, []string{`1`, `"two"`, `{}`}) {
		t.Fatalf("key %q, list %q", key, list)
	}
}

func TestCursorSaysWhatWasWrong(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     error
	}{
		{"an array where an object is wanted", `[1]`, ErrNotObject},
		{"a member without a colon", `{"a" 1}`, ErrSyntax},
		{"a value that is not JSON", `{"a":tru}`, ErrSyntax},
		{"a missing closing brace", `{"a":1`, ErrSyntax},
		{"text after the value", `{"a":1} x`, ErrSyntax},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCursor([]byte(tt.in))
			for ok := c.Enter('{', '}'); ok; ok = c.More('}') {
				c.Key()
				c.Value()
			}
			if err := c.Done(); err != tt.want {
				t.Fatalf("Done() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestWalkerWalksMembersAndElements(t *testing.T) {
	w := Object([]byte(` { "a" : [1, "x,]"] , "b\"" : {"c": null} } `))
	var got []string
	for k, v, ok := w.Member(); ok; k, v, ok = w.Member() {
		got = append(got, string(k)+"="+string(v))
	}
	if w.Err() != nil || !reflect.DeepEqual(got, []string{`"a"=[1, "x,]"]`, `"b\""={"c": null}`}) {
		t.Fatalf("members %q, %v", got, w.Err())
	}
	a := Array([]byte(`[1,"two",{"three":3},[4]]`))
	got = nil
	for v, ok := a.Element(); ok; v, ok = a.Element() {
		got = append(got, string(v))
	}
	if a.Err() != nil || !reflect.DeepEqual(got, []string{`1`, `"two"`, `{"three":3}`, `[4]`}) {
		t.Fatalf("elements %q, %v", got, a.Err())
	}
}

func TestWalkerEndsAtOnceOnEmptyOrWrongValues(t *testing.T) {
	for _, tt := range []struct {
		name string
		w    Walker
		err  error
	}{
		{"an empty object", Object([]byte(`{ }`)), nil},
		{"an empty array", Array([]byte(`[]`)), nil},
		{"the zero walker", Walker{}, nil},
		{"an array walked as an object", Object([]byte(`[1]`)), ErrNotObject},
		{"an object walked as an array", Array([]byte(`{}`)), ErrNotArray},
		{"nothing", Object(nil), ErrNotObject},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.w.More() || tt.w.Err() != tt.err {
				t.Fatalf("More() = %v, Err() = %v; want false, %v", tt.w.More(), tt.w.Err(), tt.err)
			}
		})
	}
}

func TestSkipValueFindsTheEndOfTrustedValues(t *testing.T) {
	for in, end := range map[string]int{
		`"a\"b" x`: 6, `{"a":"}"} x`: 9, `[1,[2]],3`: 7, `12 ,`: 2, `true}`: 4, `"\\" x`: 4,
		``: 0, `]`: 0, `"abc`: 4, `[1,2`: 4, // no value, or one that does not end
	} {
		if got := SkipValue([]byte(in), 0); got != end {
			t.Errorf("SkipValue(%q) = %d, want %d", in, got, end)
		}
	}
}

func TestUnquoteDecodesAsEncodingJSONDoes(t *testing.T) {
	for _, tok := range []string{
		`""`, `"plain"`, `"héllo"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\u20AC"`, `"\ud83d\ude00"`,
		`"\ud800"`, `"\ud800x"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"a\u0000b"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(tok), &want); err != nil {
			t.Fatalf("the table is wrong: %s: %v", tok, err)
		}
		if got := Unquote([]byte(tok)); got != want {
			t.Errorf("Unquote(%s) = %q, want %q", tok, got, want)
		}
		if got := AppendUnquote([]byte("x"), []byte(tok)); string(got) != "x"+want {
			t.Errorf("AppendUnquote(x, %s) = %q", tok, got)
		}
	}
}

func TestEqualComparesWhatATokenSpells(t *testing.T) {
	for _, tt := range []struct {
		tok, s string
		want   bool
	}{
		{`"user"`, "user", true},
		{`"us\u0065r"`, "user", true},
		{`"user"`, "users", false},
		{`"users"`, "user", false},
		{`true`, "ru", false},
		{``, "", false},
		{`""`, "", true},
	} {
		if got := Equal([]byte(tt.tok), tt.s); got != tt.want {
			t.Errorf("Equal(%s, %q) = %v", tt.tok, tt.s, got)
		}
	}
}

func TestPlainWord(t *testing.T) {
	word := func(s string) uint64 {
		var w uint64
		for i := 7; i >= 0; i-- {
			w = w<<8 | uint64(s[i])
		}
		return w
	}
	for s, want := range map[string]bool{
		"abcdefgh": true, "\xc3\xa9bcdefg": true, "abc\"efgh": false, "abcdefg\\": false,
		"\x1fbcdefgh": false, "abcdefg\x00": false, "abc\x7fefgh": true,
	} {
		if got := PlainWord(word(s)); got != want {
			t.Errorf("PlainWord(%q) = %v", s, got)
		}
	}
}
