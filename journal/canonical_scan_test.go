package journal

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/gowebpki/jcs"
)

// canonicalTexts are texts that are their own RFC 8785 form and that
// isCanonical must recognise without asking the canonicalizer.
var canonicalTexts = []string{
	`{}`, `[]`, `""`, `0`, `-1`, `true`, `false`, `null`,
	`123456789012345`, `1e+21`, `1.5`, `-0.000001`, `1e-7`, `9007199254740992`,
	`{"a":1,"b":[true,false,null],"c":{"":"x"}}`,
	`{"":0,"a":1}`,
	`"\"\\\b\f\n\r\t\u0000\u001f` + "\x7f\"",
	`"h\u000bé€😀"`,
	"{\"\u20ac\":1,\"😀\":2}", // keys sorted by UTF-16: U+20AC before U+1F600's surrogates
	"{\"😀\":1,\"\uff61\":2}", // a surrogate (0xD83D) sorts before U+FF61, unlike in UTF-8
	`[1,[2,[3,{"a":[]}]]]`,
}

// notCanonicalTexts are texts isCanonical must refuse: Canonical either
// refuses them or changes them.
var notCanonicalTexts = []string{
	``, ` {}`, `{} `, `{ }`, `{"a" :1}`, `[1, 2]`,
	`{"b":1,"a":2}`, `{"a":1,"a":1}`, `{"aa":1,"a":2}`,
	`-0`, `01`, `1.0`, `1e2`, `1E+21`, `100000000000000000000000`, `0.1e1`, `+1`, `.5`, `1.`, `NaN`, `Infinity`, `0x10`,
	`"\/"`, `"\u0041"`, `"\u000a"`, `"\u001F"`, `"\ud83d\ude00"`, `"\ud800"`, "\"\x01\"", "\"\xff\"", "\"\xed\xa0\x80\"",
	`"abc`, `{"a":1`, `[1`, `[1,]`, `{"a":1,}`, `{,}`, `tru`, `truex`, `nul`, `[true false]`,
	`{"\u0041":1}`, // a key with an escape that is not canonical
}

func TestIsCanonicalRecognisesCanonicalText(t *testing.T) {
	for _, s := range canonicalTexts {
		if !isCanonical([]byte(s)) {
			t.Errorf("isCanonical(%s) = false, want true", s)
		}
		if out, err := jcs.Transform([]byte(s)); err != nil || string(out) != s {
			t.Errorf("the table is wrong: %s canonicalizes to %s (%v)", s, out, err)
		}
	}
	for _, s := range notCanonicalTexts {
		if isCanonical([]byte(s)) {
			t.Errorf("isCanonical(%q) = true, want false", s)
		}
		if out, err := jcs.Transform([]byte(s)); err == nil && string(out) == s {
			t.Errorf("the table is wrong: %q is canonical", s)
		}
	}
}

func TestIsCanonicalLeavesDeepNestingToTheCanonicalizer(t *testing.T) {
	deep := strings.Repeat("[", maxScanDepth+1) + strings.Repeat("]", maxScanDepth+1)
	if isCanonical([]byte(deep)) {
		t.Fatal("isCanonical followed nesting deeper than maxScanDepth")
	}
	out, err := Canonical([]byte(deep))
	if err != nil || string(out) != deep {
		t.Fatalf("Canonical of deep nesting = %.20s…, %v", out, err)
	}
}

func TestCanonicalOfCanonicalTextIsACopy(t *testing.T) {
	in := []byte(`{"a":1}`)
	out, err := Canonical(in)
	if err != nil || string(out) != `{"a":1}` {
		t.Fatalf("Canonical = %s, %v", out, err)
	}
	out[0] = 'x'
	if in[0] != '{' {
		t.Fatal("Canonical returned the caller's slice, not a new one")
	}
}

// FuzzIsCanonicalAgreesWithTheCanonicalizer holds the fast path to the
// canonicalizer: whatever isCanonical accepts, jcs.Transform leaves as it
// is; and whatever jcs.Transform leaves as it is, isCanonical accepts,
// but for the cases it hands on by design (escaped keys, deep nesting).
func FuzzIsCanonicalAgreesWithTheCanonicalizer(f *testing.F) {
	for _, s := range canonicalTexts {
		f.Add([]byte(s))
	}
	for _, s := range notCanonicalTexts {
		f.Add([]byte(s))
	}
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast := isCanonical(b)
		out, err := Canonical(b) // the fast path's answer when fast
		slow, slowErr := jcs.Transform(bytes.Clone(b))
		same := slowErr == nil && bytes.Equal(slow, b)
		switch {
		case fast && !same:
			t.Fatalf("isCanonical(%q) = true, but the canonicalizer gives %q, %v", b, slow, slowErr)
		case fast && (err != nil || !bytes.Equal(out, b)):
			t.Fatalf("Canonical(%q) = %q, %v on the fast path", b, out, err)
		case same && !fast && !bytes.Contains(b, []byte(`\`)) && bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) <= maxScanDepth:
			t.Fatalf("isCanonical(%q) = false for canonical text", b)
		}
	})
}

// CompareMemberNames orders names as their UTF-16 code units do, for any
// two strings, invalid UTF-8 included (read as U+FFFD, as Go converts it).
func FuzzCompareMemberNamesIsUTF16Order(f *testing.F) {
	for _, pair := range [][2]string{
		{"a", "b"}, {"ab", "a"}, {"\U0001F600", "\uFB01"}, {"x\U0001F600", "x\uE000"}, {"é", "e"},
		{"\xff", "\ufffd"}, {"\xffa", "\xffb"}, {"\u00e9\u00e8", "\u00e9\u00e9"}, {"", "\u0080"},
	} {
		f.Add(pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := CompareMemberNames(a, b); got != want {
			t.Fatalf("CompareMemberNames(%q, %q) = %d, UTF-16 order says %d", a, b, got, want)
		}
	})
}
