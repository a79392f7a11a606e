package journal

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tern-dev/tern/internal/jsonscan"
)

// Draft is what a writer supplies for a new event; the journal adds the
// rest of the envelope (machine, seq, prev, clock, epoch, time, id, sig).
// The body is stored in RFC 8785 form: member order, whitespace and number
// spelling may change (1.0 becomes 1), values do not; an integer beyond
// 2^53-1 is refused because it cannot be kept exactly. The body of a core
// type (message, tool_call, tool_result, reasoning) must have the shape
// docs/FORMAT.md gives it; any other type's body is free-form.
type Draft struct {
	Type    string          `json:"type"` // [a-z][a-z0-9_.-]*, at most MaxTypeLen bytes
	Session string          `json:"session"`
	Turn    string          `json:"turn"`
	Body    json.RawMessage `json:"body"` // any JSON value; empty means {}
}

// ParseDraft reads one draft as a person or script writes it: a JSON
// object with the keys type (required, an event type: a token as
// docs/FORMAT.md gives it, such as "message" or "memory.note"), session and
// turn (optional strings) and body (optional, any JSON value, default {}).
// Any other key is refused, named in the error, so that a misspelt field is
// never silently dropped, and so is an integer beyond 2^53-1 in the body,
// which canonical JSON cannot keep exactly, and the body of a core type
// that lacks a field the format requires (the error names the field and
// says what is expected). The body is returned in canonical form. Errors
// wrap ErrInvalidDraft.
func ParseDraft(line []byte) (Draft, error) {
	canon, err := Canonical(line)
	if err != nil {
		return Draft{}, fmt.Errorf("%w: not JSON: %v", ErrInvalidDraft, err)
	}
	ms, err := splitMembers(canon)
	if err != nil {
		return Draft{}, fmt.Errorf("%w: a draft is a JSON object like {\"type\":\"message\",\"body\":{...}}", ErrInvalidDraft)
	}
	var d Draft
	for _, m := range ms {
		switch m.key {
		case "type", "session", "turn":
			if m.val[0] != '"' {
				return Draft{}, fmt.Errorf("%w: %q must be a string, got %.40s", ErrInvalidDraft, m.key, m.val)
			}
			s, err := decodeString(m.val)
			if err != nil {
				return Draft{}, fmt.Errorf("%w: %q: %v", ErrInvalidDraft, m.key, err)
			}
			switch m.key {
			case "type":
				d.Type = s
			case "session":
				d.Session = s
			default:
				d.Turn = s
			}
		case "body":
			d.Body = json.RawMessage(m.val)
		default:
			return Draft{}, fmt.Errorf("%w: unknown key %q (a draft has only type, session, turn and body)", ErrInvalidDraft, m.key)
		}
	}
	if d.Type == "" {
		return Draft{}, fmt.Errorf("%w: missing \"type\" (a non-empty string such as \"message\")", ErrInvalidDraft)
	}
	if err := checkType(d.Type); err != nil {
		return Draft{}, fmt.Errorf("%w: %v", ErrInvalidDraft, err)
	}
	if tok := unsafeInteger(line); tok != "" { // only the body can hold numbers
		return Draft{}, fmt.Errorf("%w: body holds the integer %.40s, beyond 2^53-1: canonical JSON would not keep it exactly; write it as a string", ErrInvalidDraft, tok)
	}
	if d.Body == nil {
		d.Body = json.RawMessage("{}")
	}
	if err := checkBody(d.Type, d.Body); err != nil {
		return Draft{}, err
	}
	return d, nil
}

// canonicalBody checks the draft and returns its body in canonical form.
// It is the one way a draft's body becomes an event's (NewEvent and
// Log.Append), so the type (checkType) and the body of a core type
// (checkBody) are checked here.
func (d Draft) canonicalBody() ([]byte, error) {
	if d.Type == "" {
		return nil, fmt.Errorf("%w: empty type", ErrInvalidDraft)
	}
	if err := checkType(d.Type); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidDraft, err)
	}
	body := []byte("{}")
	if len(d.Body) != 0 {
		var err error
		if body, err = Canonical(d.Body); err != nil {
			return nil, fmt.Errorf("%w: type %q: body is not JSON: %v", ErrInvalidDraft, d.Type, err)
		}
		if tok := unsafeInteger(d.Body); tok != "" {
			return nil, fmt.Errorf("%w: type %q: body holds the integer %.40s, beyond 2^53-1: canonical JSON would not keep it exactly; write it as a string", ErrInvalidDraft, d.Type, tok)
		}
	}
	if err := checkBody(d.Type, body); err != nil {
		return nil, err
	}
	return body, nil
}

// unsafeInteger returns the first integer literal (no fraction, no
// exponent) in the JSON text b whose magnitude exceeds 2^53-1, or "". Such
// a number loses digits in RFC 8785's IEEE 754 form. b must be valid JSON.
func unsafeInteger(b []byte) string {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			i = jsonscan.SkipString(b, i) - 1
		case c == '-' || (c >= '0' && c <= '9'):
			end, ok := jsonscan.Number(b, i)
			if !ok {
				return ""
			}
			tok := b[i:end]
			if bytes.IndexAny(tok, ".eE") < 0 {
				if _, safe := parseSafeInt(bytes.TrimPrefix(tok, []byte("-"))); !safe {
					return string(tok)
				}
			}
			i = end - 1
		}
	}
	return ""
}
