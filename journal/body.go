package journal

import (
	"crypto/sha256"
	"fmt"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// The core event bodies (docs/FORMAT.md, "Core event bodies") are what
// other tools read and write, render above all. A draft of a core type must
// have the body the format gives it before it is signed: a signed event
// is kept for good, and a reader would only skip a malformed one. Events
// read from a journal or received from a peer are never checked this way
// (they may come from an older or a foreign writer); only drafts are.
//
// Every rule below names a field the format lists. Members it does not
// list are allowed and kept: a newer writer may add some.

// checkBody checks that body, canonical JSON, is what the format requires
// of a body of type typ. A type that is not a core type is free-form and
// always passes. The error wraps ErrInvalidDraft and names the type and the
// field, as a path such as body.content[1].cid, and says what is expected.
func checkBody(typ string, body []byte) error {
	var check func(object) error
	switch typ {
	case "message":
		check = checkMessage
	case "tool_call":
		check = checkToolCall
	case "tool_result":
		check = checkToolResult
	case "reasoning":
		check = checkReasoning
	default:
		return nil
	}
	o, err := objectAt("body", body, "an object")
	if err == nil {
		err = check(o)
	}
	if err != nil {
		return fmt.Errorf("%w: type %q: %v", ErrInvalidDraft, typ, err)
	}
	return nil
}

// partsExample shows a writer what a list of parts looks like.
const partsExample = `[{"type":"text","text":"…"}]`

// checkMessage: role is "system", "user" or "assistant"; content is a
// non-empty list of parts.
func checkMessage(o object) error {
	role, err := o.str("role", `"system", "user" or "assistant"`)
	if err != nil {
		return err
	}
	switch role {
	case "system", "user", "assistant":
	default:
		return fmt.Errorf("%s: expected \"system\", \"user\" or \"assistant\", got %q", o.at("role"), role)
	}
	return o.parts("content", true)
}

// checkToolCall: call_id and name are non-empty strings; arguments is
// present and may be any JSON value (a string when the model produced
// invalid JSON).
func checkToolCall(o object) error {
	if _, err := o.nonEmpty("call_id"); err != nil {
		return err
	}
	if _, err := o.nonEmpty("name"); err != nil {
		return err
	}
	if o.field("arguments") == nil {
		return fmt.Errorf("%s: missing; expected the arguments as any JSON value ({} when there are none)", o.at("arguments"))
	}
	return nil
}

// checkToolResult: call_id is a non-empty string; content is a list of
// parts, possibly empty; is_error is true or false.
func checkToolResult(o object) error {
	if _, err := o.nonEmpty("call_id"); err != nil {
		return err
	}
	if err := o.parts("content", false); err != nil {
		return err
	}
	switch v := o.field("is_error"); {
	case v == nil:
		return fmt.Errorf("%s: missing; expected true or false", o.at("is_error"))
	case string(v) != "true" && string(v) != "false":
		return fmt.Errorf("%s: expected true or false, got %s", o.at("is_error"), show(v))
	}
	return nil
}

// checkReasoning: provider, model and host are non-empty strings (the key
// render replays reasoning under); text, when present, is a string; data,
// when present, is an object.
func checkReasoning(o object) error {
	for _, key := range []string{"provider", "model", "host"} {
		if _, err := o.nonEmpty(key); err != nil {
			return err
		}
	}
	if v := o.field("text"); v != nil && v[0] != '"' {
		return fmt.Errorf("%s: expected a string (leave it out when there is none), got %s", o.at("text"), show(v))
	}
	if v := o.field("data"); v != nil && v[0] != '{' {
		return fmt.Errorf("%s: expected an object of the provider's fields (leave it out when there are none), got %s", o.at("data"), show(v))
	}
	return nil
}

// checkPart: a part is {"type":"text","text":string},
// {"type":"image","cid":blob CID,"media_type":media type} or
// {"type":"file","cid":blob CID,"media_type":media type,"name":non-empty
// string}.
func checkPart(path string, v []byte) error {
	p, err := objectAt(path, v, `a part object such as {"type":"text","text":"…"}`)
	if err != nil {
		return err
	}
	typ, err := p.str("type", `"text", "image" or "file"`)
	if err != nil {
		return err
	}
	switch typ {
	case "text":
		_, err = p.str("text", "a string")
		return err
	case "image", "file":
		if err := p.blobCID("cid"); err != nil {
			return err
		}
		if err := p.mediaType("media_type"); err != nil {
			return err
		}
		if typ == "file" {
			_, err = p.nonEmpty("name")
		}
		return err
	}
	return fmt.Errorf("%s: expected \"text\", \"image\" or \"file\", got %q", p.at("type"), typ)
}

// object is a JSON object of a body being checked, and where it is.
type object struct {
	path string
	ms   []member
}

// objectAt reads the canonical value v at path as an object; want says
// what was expected, for the error.
func objectAt(path string, v []byte, want string) (object, error) {
	if len(v) == 0 || v[0] != '{' {
		return object{}, fmt.Errorf("%s: expected %s, got %s", path, want, show(v))
	}
	ms, err := splitMembers(v)
	if err != nil {
		return object{}, fmt.Errorf("%s: %v", path, err)
	}
	return object{path: path, ms: ms}, nil
}

// at is the path of member key.
func (o object) at(key string) string { return o.path + "." + key }

// field returns the value of member key, or nil when there is none.
func (o object) field(key string) []byte {
	for _, m := range o.ms {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// str returns the string member key, which must be present; want says
// what is expected of it, for the error.
func (o object) str(key, want string) (string, error) {
	v := o.field(key)
	if v == nil {
		return "", fmt.Errorf("%s: missing; expected %s", o.at(key), want)
	}
	if v[0] != '"' {
		return "", fmt.Errorf("%s: expected %s, got %s", o.at(key), want, show(v))
	}
	s, err := decodeString(v)
	if err != nil {
		return "", fmt.Errorf("%s: %v", o.at(key), err)
	}
	return s, nil
}

// nonEmpty returns the member key, which must be a non-empty string.
func (o object) nonEmpty(key string) (string, error) {
	s, err := o.str(key, "a non-empty string")
	if err == nil && s == "" {
		err = fmt.Errorf("%s: expected a non-empty string, got \"\"", o.at(key))
	}
	return s, err
}

// parts checks that member key is a list of parts (non-empty if asked).
func (o object) parts(key string, nonEmpty bool) error {
	want := "a list of parts such as " + partsExample
	if nonEmpty {
		want = "a non-empty list of parts such as " + partsExample
	}
	v := o.field(key)
	if v == nil {
		return fmt.Errorf("%s: missing; expected %s", o.at(key), want)
	}
	if v[0] != '[' {
		return fmt.Errorf("%s: expected %s, got %s", o.at(key), want, show(v))
	}
	elems, err := splitElements(v)
	if err != nil {
		return fmt.Errorf("%s: %v", o.at(key), err)
	}
	if nonEmpty && len(elems) == 0 {
		return fmt.Errorf("%s: expected %s, got []", o.at(key), want)
	}
	for i, e := range elems {
		if err := checkPart(fmt.Sprintf("%s[%d]", o.at(key), i), e); err != nil {
			return err
		}
	}
	return nil
}

// blobCID checks that member key names a blob as capsule does: a CIDv1
// with the raw codec (0x55) and a sha2-256 multihash, in any multibase.
func (o object) blobCID(key string) error {
	const want = "the CID of a blob (CIDv1, raw codec, sha2-256, such as bafkrei…)"
	s, err := o.str(key, want)
	if err != nil {
		return err
	}
	got := show(o.field(key))
	c, err := cid.Decode(s)
	if err != nil {
		return fmt.Errorf("%s: expected %s, got %s: %v", o.at(key), want, got, err)
	}
	if c.Version() != 1 || c.Type() != cid.Raw {
		return fmt.Errorf("%s: expected %s, got %s: not a raw CIDv1", o.at(key), want, got)
	}
	d, err := multihash.Decode(c.Hash())
	if err != nil || d.Code != multihash.SHA2_256 || len(d.Digest) != sha256.Size {
		return fmt.Errorf("%s: expected %s, got %s: not sha2-256", o.at(key), want, got)
	}
	return nil
}

// mediaType checks that member key is a media type, type/subtype with
// optional parameters (RFC 6838, as mime.ParseMediaType reads it).
func (o object) mediaType(key string) error {
	const want = "a media type such as image/png"
	s, err := o.str(key, want)
	if err != nil {
		return err
	}
	if mt, _, err := mime.ParseMediaType(s); err != nil || !strings.Contains(mt, "/") {
		return fmt.Errorf("%s: expected %s, got %s", o.at(key), want, show(o.field(key)))
	}
	return nil
}

// show quotes a JSON value in an error, cut to 40 bytes.
func show(v []byte) string {
	const most = 40
	if len(v) == 0 {
		return "nothing"
	}
	if len(v) <= most {
		return string(v)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return string(v[:cut]) + "…"
}
