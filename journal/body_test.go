package journal

import (
	"errors"
	"strings"
	"testing"
)

// blob is a valid blob CID (CIDv1, raw, sha2-256 of "").
const blob = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"

func TestCoreBodiesAreCheckedAtAppend(t *testing.T) {
	tests := []struct {
		name string
		typ  string
		body string
		says string // "" when the body is accepted
	}{
		// message
		{"a user text message is accepted", "message", `{"role":"user","content":[{"type":"text","text":"hi"}]}`, ""},
		{"a system and an assistant role are accepted", "message", `{"role":"system","content":[{"type":"text","text":""}]}`, ""},
		{"an image and a file part are accepted", "message",
			`{"role":"assistant","content":[{"type":"image","cid":"` + blob + `","media_type":"image/png"},{"type":"file","cid":"` + blob + `","media_type":"text/plain; charset=utf-8","name":"a.txt"}]}`, ""},
		{"members the format does not name are kept", "message", `{"role":"user","content":[{"type":"text","text":"hi","lang":"en"}],"usage":{"in":3}}`, ""},
		{"a message without a body is refused", "message", ``, "body.role: missing"},
		{"a message whose body is not an object is refused", "message", `[]`, "body: expected an object, got []"},
		{"a null body is refused", "message", `null`, "body: expected an object, got null"},
		{"a role outside system, user, assistant is refused", "message", `{"role":"wizard","content":[{"type":"text","text":"hi"}]}`, `body.role: expected "system", "user" or "assistant", got "wizard"`},
		{"a role that is not a string is refused", "message", `{"role":1,"content":[{"type":"text","text":"hi"}]}`, `body.role: expected "system", "user" or "assistant", got 1`},
		{"a message without content is refused", "message", `{"role":"user"}`, "body.content: missing; expected a non-empty list of parts"},
		{"an empty content list is refused", "message", `{"role":"user","content":[]}`, "body.content: expected a non-empty list of parts such as [{\"type\":\"text\",\"text\":\"…\"}], got []"},
		{"content as a bare string is refused", "message", `{"role":"user","content":"hi"}`, `body.content: expected a non-empty list of parts such as [{"type":"text","text":"…"}], got "hi"`},
		{"a part that is not an object is refused", "message", `{"role":"user","content":["hi"]}`, `body.content[0]: expected a part object`},
		{"a part without a type is refused", "message", `{"role":"user","content":[{"text":"hi"}]}`, `body.content[0].type: missing; expected "text", "image" or "file"`},
		{"a part of an unknown type is refused", "message", `{"role":"user","content":[{"type":"audio","cid":"` + blob + `"}]}`, `body.content[0].type: expected "text", "image" or "file", got "audio"`},
		{"a text part without text is refused", "message", `{"role":"user","content":[{"type":"text","text":"a"},{"type":"text"}]}`, "body.content[1].text: missing; expected a string"},
		{"a text part whose text is not a string is refused", "message", `{"role":"user","content":[{"type":"text","text":["a"]}]}`, `body.content[0].text: expected a string, got ["a"]`},
		{"an image without a cid is refused", "message", `{"role":"user","content":[{"type":"image","media_type":"image/png"}]}`, "body.content[0].cid: missing; expected the CID of a blob"},
		{"an image whose cid is not a CID is refused", "message", `{"role":"user","content":[{"type":"image","cid":"cat.png","media_type":"image/png"}]}`, `body.content[0].cid: expected the CID of a blob (CIDv1, raw codec, sha2-256, such as bafkrei…), got "cat.png"`},
		{"an event id is not a blob CID", "message", `{"role":"user","content":[{"type":"image","cid":"bagaaiera4oymiquy7qobjgx36tejs35zeqt24qpemsnzgtfeswmrw6csxbkq","media_type":"image/png"}]}`, "not a raw CIDv1"},
		{"a CIDv0 is not a blob CID", "message", `{"role":"user","content":[{"type":"image","cid":"QmdfTbBqBPQ7VNxZEYEj14VmRuZBkqFbiwReogJgS1zR1n","media_type":"image/png"}]}`, "not a raw CIDv1"},
		{"a raw CID with another hash is not a blob CID", "message", `{"role":"user","content":[{"type":"image","cid":"bafkrgqgpqpqtk7xpxc67cvbikdlg3aah2yqoibilk4k5za7uveq5g3hjzzd5buj4lwc7fmh7qmmnfb365qxwhojrxvduc6ubuu4de6xze7nd4","media_type":"image/png"}]}`, "not sha2-256"},
		{"an image without a media type is refused", "message", `{"role":"user","content":[{"type":"image","cid":"` + blob + `"}]}`, "body.content[0].media_type: missing; expected a media type such as image/png"},
		{"a media type without a subtype is refused", "message", `{"role":"user","content":[{"type":"image","cid":"` + blob + `","media_type":"png"}]}`, `body.content[0].media_type: expected a media type such as image/png, got "png"`},
		{"a file without a name is refused", "message", `{"role":"user","content":[{"type":"file","cid":"` + blob + `","media_type":"application/pdf"}]}`, "body.content[0].name: missing; expected a non-empty string"},
		{"a file with an empty name is refused", "message", `{"role":"user","content":[{"type":"file","cid":"` + blob + `","media_type":"application/pdf","name":""}]}`, `body.content[0].name: expected a non-empty string, got ""`},

		// tool_call
		{"a tool call is accepted", "tool_call", `{"call_id":"c1","name":"ls","arguments":{"path":"."}}`, ""},
		{"arguments the model wrote as invalid JSON are a string", "tool_call", `{"call_id":"c1","name":"ls","arguments":"{bad json"}`, ""},
		{"a tool call with body {} is refused", "tool_call", `{}`, "body.call_id: missing; expected a non-empty string"},
		{"an empty call_id is refused", "tool_call", `{"call_id":"","name":"ls","arguments":{}}`, `body.call_id: expected a non-empty string, got ""`},
		{"a call_id that is not a string is refused", "tool_call", `{"call_id":7,"name":"ls","arguments":{}}`, `body.call_id: expected a non-empty string, got 7`},
		{"a tool call without a name is refused", "tool_call", `{"call_id":"c1","arguments":{}}`, "body.name: missing; expected a non-empty string"},
		{"a tool call without arguments is refused", "tool_call", `{"call_id":"c1","name":"ls"}`, "body.arguments: missing; expected the arguments as any JSON value ({} when there are none)"},

		// tool_result
		{"a tool result is accepted", "tool_result", `{"call_id":"c1","content":[{"type":"text","text":"a.txt"}],"is_error":false}`, ""},
		{"a tool result may have empty content", "tool_result", `{"call_id":"c1","content":[],"is_error":true}`, ""},
		{"a tool result without a call_id is refused", "tool_result", `{"content":[],"is_error":false}`, "body.call_id: missing"},
		{"a tool result without content is refused", "tool_result", `{"call_id":"c1","is_error":false}`, "body.content: missing; expected a list of parts"},
		{"a tool result whose part is bad is refused", "tool_result", `{"call_id":"c1","content":[{"type":"file","cid":"` + blob + `","name":"x"}],"is_error":false}`, "body.content[0].media_type: missing"},
		{"a tool result without is_error is refused", "tool_result", `{"call_id":"c1","content":[]}`, "body.is_error: missing; expected true or false"},
		{"an is_error that is not a boolean is refused", "tool_result", `{"call_id":"c1","content":[],"is_error":"no"}`, `body.is_error: expected true or false, got "no"`},

		// reasoning
		{"a reasoning event is accepted", "reasoning", `{"provider":"anthropic","model":"m","host":"api.anthropic.com","text":"hmm","data":{"signature":"s"}}`, ""},
		{"reasoning may leave out text and data", "reasoning", `{"provider":"ollama","model":"m","host":"localhost:11434"}`, ""},
		{"reasoning without a provider is refused", "reasoning", `{"model":"m","host":"h"}`, "body.provider: missing; expected a non-empty string"},
		{"reasoning without a model is refused", "reasoning", `{"provider":"p","host":"h"}`, "body.model: missing"},
		{"reasoning with an empty host is refused", "reasoning", `{"provider":"p","model":"m","host":""}`, `body.host: expected a non-empty string, got ""`},
		{"reasoning text that is not a string is refused", "reasoning", `{"provider":"p","model":"m","host":"h","text":null}`, "body.text: expected a string (leave it out when there is none), got null"},
		{"reasoning data that is not an object is refused", "reasoning", `{"provider":"p","model":"m","host":"h","data":"opaque"}`, `body.data: expected an object of the provider's fields (leave it out when there are none), got "opaque"`},

		// other types
		{"any other type is free-form", "memory.note", `[1,"two"]`, ""},
		{"a type that only looks like a core one is free-form", "message.edited", `{}`, ""},
	}
	s := newSigner(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := draft(tt.typ, tt.body)
			_, err := NewEvent(s, Stamp{Seq: 1, Clock: 1, Time: testTime}, d)
			if tt.says == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidDraft) || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), `type "`+tt.typ+`"`) {
				t.Fatalf("got %v, want an invalid draft error naming type %q and saying %q", err, tt.typ, tt.says)
			}
			// A draft read from a line is checked the same way.
			line := `{"type":"` + tt.typ + `"}`
			if tt.body != "" {
				line = `{"type":"` + tt.typ + `","body":` + tt.body + `}`
			}
			if _, err := ParseDraft([]byte(line)); !errors.Is(err, ErrInvalidDraft) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("ParseDraft: got %v, want an invalid draft error saying %q", err, tt.says)
			}
		})
	}
}

func TestAppendRefusesAMalformedCoreBodyAndWritesNothing(t *testing.T) {
	path := newJournal(t)
	l := mustOpen(t, path)
	s := newSigner(t)
	good := draft("message", `{"role":"user","content":[{"type":"text","text":"hi"}]}`)
	_, err := l.Append(t.Context(), s, 0, good, draft("tool_call", `{}`))
	if !errors.Is(err, ErrInvalidDraft) || !strings.Contains(err.Error(), "draft 2") || !strings.Contains(err.Error(), "body.call_id") {
		t.Fatalf("got %v, want draft 2's call_id named", err)
	}
	if b := readFile(t, path); len(b) != 0 {
		t.Fatalf("the journal holds %q after a refused append", b)
	}
}

func TestEventsReadFromAJournalAreNeverCheckedForTheirBody(t *testing.T) {
	// An older or foreign writer's malformed core event still reads: only
	// drafts are checked. It is built here as such a writer would.
	s := newSigner(t)
	e, err := newEvent(s, Stamp{Seq: 1, Clock: 1, Time: testTime}, Draft{Type: "message"}, []byte(`{"role":"wizard"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseLine(e.Line())
	if err != nil {
		t.Fatalf("ParseLine refused an event whose body is not a valid message: %v", err)
	}
	if string(got.Body) != `{"role":"wizard"}` {
		t.Fatalf("body %s", got.Body)
	}
}

func TestSplitElements(t *testing.T) {
	tests := []struct {
		json string
		want []string
	}{
		{`[]`, nil},
		{`[1]`, []string{`1`}},
		{`[{"a":[1,2]},"x,]",null,[]]`, []string{`{"a":[1,2]}`, `"x,]"`, `null`, `[]`}},
	}
	for _, tt := range tests {
		got, err := splitElements([]byte(tt.json))
		if err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		if len(got) != len(tt.want) {
			t.Fatalf("%s: got %q, want %q", tt.json, got, tt.want)
		}
		for i := range got {
			if string(got[i]) != tt.want[i] {
				t.Fatalf("%s: got %q, want %q", tt.json, got, tt.want)
			}
		}
	}
	for _, bad := range []string{``, `[`, `{}`, `[1,]`, `[1]x`} {
		if _, err := splitElements([]byte(bad)); err == nil {
			t.Errorf("%q was split", bad)
		}
	}
}
