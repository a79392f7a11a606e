package journal

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDraft(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Draft
		says string // when the draft is refused
	}{
		{"a full draft is read", `{"type":"x","session":"s","turn":"t","body":{"b":1,"a":2}}`,
			Draft{Type: "x", Session: "s", Turn: "t", Body: []byte(`{"a":2,"b":1}`)}, ""},
		{"a core body is read in canonical form", `{"type":"message","body":{ "role":"user", "content":[{"text":"hi","type":"text"}]}}`,
			Draft{Type: "message", Body: []byte(`{"content":[{"text":"hi","type":"text"}],"role":"user"}`)}, ""},
		{"a core body is checked", `{"type":"tool_call","body":{}}`, Draft{}, `type "tool_call": body.call_id: missing`},
		{"a missing body becomes {}", `{"type":"memory.note"}`, Draft{Type: "memory.note", Body: []byte(`{}`)}, ""},
		{"any JSON value is a body", ` {"type":"x","body":[1, "two"]} `, Draft{Type: "x", Body: []byte(`[1,"two"]`)}, ""},
		{"a null body is kept", `{"type":"x","body":null}`, Draft{Type: "x", Body: []byte(`null`)}, ""},
		{"an unknown key is refused by name", `{"type":"x","bodyy":{}}`, Draft{}, `unknown key "bodyy"`},
		{"a missing type is refused", `{"body":{}}`, Draft{}, `missing "type"`},
		{"an empty type is refused", `{"type":""}`, Draft{}, `missing "type"`},
		{"a type that is not a string is refused", `{"type":3}`, Draft{}, `"type" must be a string`},
		{"a session that is not a string is refused", `{"type":"x","session":null}`, Draft{}, `"session" must be a string`},
		{"an array is refused", `[{"type":"x"}]`, Draft{}, "a draft is a JSON object"},
		{"text is refused", `type=x`, Draft{}, "not JSON"},
		{"an integer beyond 2^53-1 in the body is refused", `{"type":"x","body":{"id":9007199254740993}}`, Draft{}, "beyond 2^53-1"},
		{"a negative integer beyond 2^53-1 is refused", `{"type":"x","body":[-90071992547409930]}`, Draft{}, "-90071992547409930"},
		{"the largest safe integer is kept", `{"type":"x","body":[9007199254740991,-9007199254740991,1.5e300,"90071992547409930"]}`,
			Draft{Type: "x", Body: []byte(`[9007199254740991,-9007199254740991,1.5e+300,"90071992547409930"]`)}, ""},
		{"a duplicate key is refused", `{"type":"x","type":"y"}`, Draft{}, "Duplicate key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDraft([]byte(tt.line))
			if tt.says != "" {
				if !errors.Is(err, ErrInvalidDraft) || !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("got %v, want an invalid draft error saying %q", err, tt.says)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Type != tt.want.Type || got.Session != tt.want.Session || got.Turn != tt.want.Turn || string(got.Body) != string(tt.want.Body) {
				t.Fatalf("got %+v (body %s), want %+v (body %s)", got, got.Body, tt.want, tt.want.Body)
			}
		})
	}
}

func TestUnsafeInteger(t *testing.T) {
	tests := []struct{ json, want string }{
		{`{"a":12345678901234567890}`, "12345678901234567890"},
		{`[0,-9007199254740992]`, "-9007199254740992"},
		{`[9007199254740991,-9007199254740991,0,-0,1.5,1e300,9007199254740993.5]`, ""},
		{`{"s":"12345678901234567890","t":"\"99999999999999999999"}`, ""},
		{`123456789012345678901234`, "123456789012345678901234"},
		{`{"a":[true,null,{"b":90071992547409910}]}`, "90071992547409910"},
	}
	for _, tt := range tests {
		t.Run(tt.json, func(t *testing.T) {
			if got := unsafeInteger([]byte(tt.json)); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}
