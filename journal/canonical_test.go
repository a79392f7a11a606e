package journal

import (
	"bytes"
	"testing"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name, in, want string // want "" when the input is refused
	}{
		{"whitespace goes and members are sorted", " { \"b\" : [1, 2] ,\n\"a\":{} } ", `{"a":{},"b":[1,2]}`},
		{"numbers are written as ECMAScript writes doubles", `[1.0,1e30,-0,0.1,1E-7,100]`, `[1,1e+30,0,0.1,1e-7,100]`},
		{"members sort by UTF-16 code units, not code points", `{"😀":1,"\uffff":2,"a":3}`, `{"a":3,"😀":1,"` + "\uffff" + `":2}`},
		{"strings keep only the escapes RFC 8785 requires", `"\u0041\/\u00e9\n\u001f"`, `"A/é\n\u001f"`},
		{"a scalar is a value", `true`, `true`},
		{"a duplicate member is refused", `{"a":1,"a":2}`, ""},
		{"invalid UTF-8 is refused", "\"\xff\"", ""},
		{"a lone surrogate is refused", `"\ud800"`, ""},
		{"two values are refused", `{} {}`, ""},
		{"nothing is refused", ``, ""},
		{"text that is not JSON is refused", `{"a":}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			got, err := Canonical(in)
			if string(in) != tt.in {
				t.Fatal("Canonical modified its input")
			}
			if tt.want == "" {
				if err == nil {
					t.Fatalf("accepted as %s", got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %s, %v; want %s", got, err, tt.want)
			}
			again, err := Canonical(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("not a fixed point: %s became %s (%v)", got, again, err)
			}
		})
	}
	if _, err := Canonical(nil); err == nil {
		t.Error("nil was accepted")
	}
}
