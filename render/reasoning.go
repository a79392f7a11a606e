package render

import (
	"encoding/base64"
	"fmt"

	"github.com/tern-dev/tern/internal/jsonscan"
)

// Reasoning is provider data. A reasoning event says which provider,
// model and host produced it; render replays it only to a target with the
// same three, byte-exact, and only when nothing was trimmed (providers bind
// reasoning to the unchanged prefix of the conversation). Everywhere else
// it is dropped.
//
// What each provider keeps under "data" (all strings are kept exactly as
// the provider sent them):
//
//	openai-responses  {"id": "rs_…", "encrypted_content": "…", "summary": [ … ]}
//	                  a reasoning item, replayed as
//	                  {"type":"reasoning","id":…,"summary":…,"encrypted_content":…};
//	                  one without id or encrypted_content cannot be replayed.
//	anthropic         {"signature": "…"}  a thinking block; "text" is its thinking
//	                  {"redacted": "…"}   a redacted_thinking block's data
//	gemini            {"thought_signature": "<base64>"}  the signature of the part
//	                  written by the next event of the step (its first part);
//	                  "text" is the thought summary, which is not sent back
//	ollama            no data; "text" is the message's thinking
//	openai-chat       Chat Completions takes no reasoning back: never replayed
//
// A reasoning event is replayed only when an assistant message or a tool
// call follows it in the same step: providers refuse reasoning that
// precedes nothing.

// matches reports whether r was produced for target t.
func (r *reasoningData) matches(t Target, host string) bool {
	return jsonscan.Equal(r.provider, string(t.Provider)) && jsonscan.Equal(r.model, t.Model) && jsonscan.Equal(r.host, host)
}

// field returns the value of member key of the data object, or nil.
func (r *reasoningData) field(key string) []byte {
	it := jsonscan.Object(r.data)
	for k, v, ok := it.Member(); ok; k, v, ok = it.Member() {
		if jsonscan.Equal(k, key) {
			return v
		}
	}
	return nil
}

// stringField returns member key of the data object if it is a non-empty
// string token.
func (r *reasoningData) stringField(key string) []byte {
	v := r.field(key)
	if len(v) < 3 || v[0] != '"' {
		return nil
	}
	return v
}

func parseReasoning(e *entry, c *jsonscan.Cursor, r *reasoningData) error {
	*e = entry{kind: entReasoning, rsn: r}
	for ok := c.Enter('{', '}'); ok; ok = c.More('}') {
		k := c.Key()
		v := c.Value()
		if v == nil {
			break
		}
		var field *[]byte
		switch string(k) {
		case "data":
			switch {
			case v[0] == '{':
				r.data = v
			case string(v) != "null":
				return fmt.Errorf("data is not an object")
			}
			continue
		case "provider":
			field = &r.provider
		case "model":
			field = &r.model
		case "host":
			field = &r.host
		case "text":
			field = &r.text
		default:
			continue
		}
		if v[0] != '"' {
			return fmt.Errorf("field %q is not a string", k)
		}
		*field = v
	}
	return c.Done()
}

// replayable marks, for each item of a step, whether it is reasoning that
// goes to this target. It returns nil when none does.
func (p *plan) replayable(u *unit) []bool {
	if !p.reasoning {
		return nil
	}
	var keep []bool
	last := -1 // the last item that is output
	for i, e := range u.items {
		if e.kind == entCall || e.kind == entMessage {
			last = i
		}
	}
	for i, e := range u.items {
		if e.kind != entReasoning || i > last || !e.rsn.matches(p.t, p.host) || !p.usable(e.rsn) {
			continue
		}
		if keep == nil {
			keep = make([]bool, len(u.items))
		}
		keep[i] = true
	}
	return keep
}

// usable reports whether r carries what its provider needs to replay it.
func (p *plan) usable(r *reasoningData) bool {
	switch p.t.Provider {
	case OpenAIResponses:
		return r.stringField("id") != nil && r.stringField("encrypted_content") != nil
	case Anthropic:
		return r.stringField("signature") != nil || r.stringField("redacted") != nil
	case Gemini:
		sig := r.stringField("thought_signature")
		if sig == nil || hasEscape(sig) {
			return false
		}
		_, err := base64.StdEncoding.DecodeString(string(sig[1 : len(sig)-1]))
		return err == nil
	case Ollama:
		return r.text != nil && len(r.text) > 2
	}
	return false
}
