package render

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/tern-dev/tern/internal/jsonscan"
	"github.com/tern-dev/tern/journal"
)

// The view is the provider-neutral conversation built from a session's
// events: messages, and assistant steps whose tool calls are each paired
// with exactly one result. Every renderer walks the same view, which is
// what keeps the providers' histories the same.

type role uint8

const (
	roleUser role = iota + 1
	roleAssistant
	roleSystem
)

type partKind uint8

const (
	partText partKind = iota + 1
	partImage
	partFile
)

// part is one content part of a message or a tool result.
type part struct {
	kind      partKind
	text      []byte // a text part: its JSON string token, quotes included
	*mediaRef        // an image or file part
}

// mediaRef names the blob of an image or file part.
type mediaRef struct {
	cid       string // the blob's CID
	mediaType string
	name      string // a file's name
}

type entryKind uint8

const (
	entMessage entryKind = iota + 1
	entReasoning
	entCall
	entResult
)

// entry is one conversation event, parsed.
type entry struct {
	kind      entryKind
	role      role // message
	isError   bool // result
	tokens    int
	callID    string // call, result: the neutral call id
	parts     []part // message, result
	event     *journal.Event
	*callData // call
	rsn       *reasoningData
}

// callData is what only a tool call has.
type callData struct {
	name   string // the tool's name
	args   []byte // the arguments, one JSON value (a string when the model wrote invalid JSON)
	result *entry // its paired result, if the journal has one
	pid    string // the provider's id for it, once given (ids.go)
	repeat int    // how many earlier calls have the same call id
	next   *entry // the next call with the same call id
	// On the first call with an id only: the last call with it, and the
	// earliest one still unanswered (nil when all are answered).
	last, open *entry
}

// reasoningData is a reasoning event's body, as JSON tokens; see
// reasoning.go.
type reasoningData struct {
	provider, model, host []byte // string tokens, or nil
	text                  []byte // string token, or nil
	data                  []byte // an object, or nil
}

// unit is what window fitting keeps or drops whole: a user or system
// message, or an assistant step (a run of assistant messages, reasoning and
// tool calls not interrupted by anything else) together with one result
// for each of its calls.
type unit struct {
	msg     *entry   // a message unit; nil for a step
	items   []*entry // a step's assistant messages, reasoning and calls, in journal order
	calls   []*entry // a step's calls, in order
	results []*entry // a step's results: results[i] answers calls[i]
	tokens  int
	events  int // journal events in the unit (made-up results not counted)
}

func (u *unit) isUser() bool { return u.msg != nil && u.msg.role == roleUser }

// Interrupted is the text of the error result render gives a tool call that
// has no result in the journal (the machine died mid-call). Render only
// shows it; it writes no event. (The design has the runtime, which is not
// built, record the same result as a real event before the next model
// call: docs/DESIGN.md, "The three recoveries".)
const Interrupted = "interrupted; the outcome is unknown; inspect state before retrying"

// interruptedToken is Interrupted as a JSON string token.
var interruptedToken = []byte(`"` + Interrupted + `"`)

// Event types that are part of tern but not of the conversation a model
// sees (docs/FORMAT.md and docs/SESSIONS.md define them); they are skipped
// without a note. Any other type render does not know gets one.
var quietPrefixes = []string{"session.", "turn.", "action.", "operation.", "memory.", "workspace.", "file.", "member.", "agent.", "holder.", "chain."}

func isQuiet(typ string) bool {
	for _, p := range quietPrefixes {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// buildView parses events (one session, total order) into units. Events it
// cannot use are skipped and noted; it never fails.
func buildView(events []*journal.Event, blobs *blobCache, n *notes) []unit {
	var nparts, ncalls, nreasoning int
	for _, ev := range events {
		switch ev.Type {
		case "message", "tool_result":
			nparts++
		case "tool_call":
			ncalls++
		case "reasoning":
			nreasoning++
		}
	}
	entries := make([]entry, len(events))
	arena := make([]part, 0, nparts) // most messages and results have one part
	calls := make([]callData, ncalls)
	thoughts := make([]reasoningData, nreasoning)
	names := map[string]string{} // tool names, allocated once each
	k, cl, th := 0, 0, 0
	for _, ev := range events {
		e := &entries[k]
		c := jsonscan.NewCursor(ev.Body)
		var err error
		switch ev.Type {
		case "message":
			err = parseMessage(e, &c, n, ev, &arena)
		case "tool_call":
			e.callData = &calls[cl]
			cl++
			err = parseCall(e, &c, names)
		case "tool_result":
			err = parseResult(e, &c, n, ev, &arena)
		case "reasoning":
			err = parseReasoning(e, &c, &thoughts[th])
			th++
		default:
			if !isQuiet(ev.Type) {
				n.unknownType(ev)
			}
			continue
		}
		if err != nil {
			n.addf("event %s (%s): %v; skipped", ev.ID, ev.Type, err)
			*e = entry{}
			continue
		}
		if e.kind == entMessage && len(e.parts) == 0 {
			*e = entry{}
			continue // nothing to say
		}
		e.event = ev
		e.tokens = EventOverhead + estimateCounts(len(ev.Body), c.NonASCII()) + partTokens(e.parts, blobs)
		k++
	}
	entries = entries[:k]
	ncalls = pairResults(entries, ncalls, n)
	return group(entries, ncalls, n)
}

// pairResults pairs every tool result with the earliest unanswered call
// that has its call id (a result always comes after its call in the total
// order: its writer had seen the call) and returns the number of calls
// (hint is a guess of it). A
// result without such a call is an orphan: no provider accepts one, so it
// is dropped with a note.
func pairResults(entries []entry, hint int, n *notes) int {
	first := make(map[string]*entry, hint) // call id -> its first call, which tracks the rest
	ncalls := 0
	for i := range entries {
		e := &entries[i]
		switch e.kind {
		case entCall:
			ncalls++
			f, dup := first[e.callID]
			if !dup {
				first[e.callID] = e
				e.last, e.open = e, e
				continue
			}
			f.last.next, e.repeat = e, f.last.repeat+1
			f.last = e
			if f.open == nil {
				f.open = e
			}
		case entResult:
			f := first[e.callID]
			if f == nil || f.open == nil {
				n.addf("event %s (tool_result): no tool call with call_id %q before it; dropped", e.event.ID, e.callID)
				continue
			}
			// Calls with one id are answered in order: the next one
			// unanswered follows the one this result answers.
			f.open.result = e
			f.open = f.open.next
		}
	}
	return ncalls
}

// group forms units: assistant-side entries run together into steps; a
// user or system message, or a tool result, ends a step. Each step's calls
// get their results right after the step; a call that has none gets the
// Interrupted error result.
func group(entries []entry, ncalls int, n *notes) []unit {
	nunits, open := 0, false
	for i := range entries {
		switch e := &entries[i]; {
		case e.kind == entMessage && e.role != roleAssistant:
			nunits, open = nunits+1, false
		case e.kind == entResult:
			open = false
		case !open:
			nunits, open = nunits+1, true
		}
	}
	units := make([]unit, 0, nunits)
	// Steps slice their items, calls and results out of shared arenas.
	items := make([]*entry, 0, len(entries))
	calls := make([]*entry, 0, ncalls)
	results := make([]*entry, 0, ncalls)
	step := -1 // the open step's index in units
	closeStep := func() {
		if step < 0 {
			return
		}
		u := &units[step]
		u.items = items[len(items)-len(u.items) : len(items) : len(items)]
		u.calls = calls[len(calls)-len(u.calls) : len(calls) : len(calls)]
		step = -1
	}
	for i := range entries {
		e := &entries[i]
		switch {
		case e.kind == entMessage && e.role != roleAssistant:
			closeStep()
			units = append(units, unit{msg: e, tokens: e.tokens, events: 1})
		case e.kind == entResult:
			closeStep()
		default:
			if step < 0 {
				units = append(units, unit{})
				step = len(units) - 1
			}
			u := &units[step]
			items = append(items, e)
			u.items = items[len(items)-len(u.items)-1:]
			if e.kind == entCall {
				calls = append(calls, e)
				u.calls = calls[len(calls)-len(u.calls)-1:]
			}
			u.tokens += e.tokens
			u.events++
		}
	}
	closeStep()
	for i := range units {
		u := &units[i]
		start := len(results)
		for _, c := range u.calls {
			r := c.result
			if r == nil {
				n.addf("event %s (tool_call %s, call_id %q): no result; rendered as interrupted", c.event.ID, c.name, c.callID)
				r = &entry{kind: entResult, callID: c.callID, isError: true,
					parts: []part{{kind: partText, text: interruptedToken}}}
				r.tokens = EventOverhead + Estimate(interruptedToken)
			} else {
				u.events++
			}
			results = append(results, r)
			u.tokens += r.tokens
		}
		if len(u.calls) > 0 {
			u.results = results[start:len(results):len(results)]
		}
	}
	return units
}

func parseMessage(e *entry, c *jsonscan.Cursor, n *notes, ev *journal.Event, arena *[]part) error {
	e.kind = entMessage
	hasContent := false
	for ok := c.Enter('{', '}'); ok; ok = c.More('}') {
		switch string(c.Key()) {
		case "role":
			v := c.Value()
			switch {
			case v == nil:
			case jsonscan.Equal(v, "user"):
				e.role = roleUser
			case jsonscan.Equal(v, "assistant"):
				e.role = roleAssistant
			case jsonscan.Equal(v, "system"):
				e.role = roleSystem
			case v[0] == '"':
				return fmt.Errorf("unknown role %s", v)
			default:
				return fmt.Errorf("role is not a string")
			}
		case "content":
			hasContent = true
			var err error
			if e.parts, err = parseParts(c, n, ev, arena); err != nil {
				return err
			}
		default:
			c.Value()
		}
	}
	switch {
	case c.Done() != nil:
		return c.Err()
	case e.role == 0:
		return fmt.Errorf("no role")
	case !hasContent:
		return fmt.Errorf("no content")
	}
	return nil
}

func parseCall(e *entry, c *jsonscan.Cursor, names map[string]string) error {
	e.kind = entCall
	hasID := false
	for ok := c.Enter('{', '}'); ok; ok = c.More('}') {
		k := c.Key()
		v := c.Value()
		if v == nil {
			break
		}
		switch string(k) {
		case "call_id":
			var isString bool
			if e.callID, isString = stringValue(v); !isString {
				return fmt.Errorf("call_id is not a string")
			}
			hasID = true
		case "name":
			if v[0] != '"' {
				return fmt.Errorf("name is not a string")
			}
			if hasEscape(v) {
				e.name = jsonscan.Unquote(v)
				break
			}
			name, ok := names[string(v[1:len(v)-1])]
			if !ok {
				name = string(v[1 : len(v)-1])
				names[name] = name
			}
			e.name = name
		case "arguments":
			e.args = v
		}
	}
	switch {
	case c.Done() != nil:
		return c.Err()
	case !hasID:
		return fmt.Errorf("no call_id")
	case e.name == "":
		return fmt.Errorf("no tool name")
	}
	if e.args == nil {
		e.args = []byte("{}")
	}
	return nil
}

func parseResult(e *entry, c *jsonscan.Cursor, n *notes, ev *journal.Event, arena *[]part) error {
	e.kind = entResult
	hasID := false
	for ok := c.Enter('{', '}'); ok; ok = c.More('}') {
		switch string(c.Key()) {
		case "call_id":
			v := c.Value()
			var isString bool
			if e.callID, isString = stringValue(v); !isString && v != nil {
				return fmt.Errorf("call_id is not a string")
			}
			hasID = v != nil
		case "content":
			var err error
			if e.parts, err = parseParts(c, n, ev, arena); err != nil {
				return err
			}
		case "is_error":
			e.isError = string(c.Value()) == "true"
		default:
			c.Value()
		}
	}
	if c.Done() != nil {
		return c.Err()
	}
	if !hasID {
		return fmt.Errorf("no call_id")
	}
	return nil
}

// parseParts reads the content value at c into parts appended to arena. A
// bare string is taken as one text part; empty text parts are left out;
// parts of an unknown type are skipped with a note.
func parseParts(c *jsonscan.Cursor, n *notes, ev *journal.Event, arena *[]part) ([]part, error) {
	start := len(*arena)
	if c.Peek() == '"' {
		v := c.Value()
		if len(v) <= 2 {
			return nil, c.Err()
		}
		*arena = append(*arena, part{kind: partText, text: v})
		return (*arena)[start:len(*arena):len(*arena)], nil
	}
	shape := func() error {
		if c.Err() == jsonscan.ErrSyntax {
			return jsonscan.ErrSyntax
		}
		return fmt.Errorf("content is neither a list of part objects nor a string")
	}
	parts := *arena
	for ok := c.Enter('[', ']'); ok; ok = c.More(']') {
		var p part
		var typ []byte
		for ok := c.Enter('{', '}'); ok; ok = c.More('}') {
			k := c.Key()
			v := c.Value()
			if v == nil {
				break
			}
			isString := true
			switch string(k) {
			case "type":
				typ, isString = v, v[0] == '"'
			case "text":
				p.text, isString = v, v[0] == '"'
			case "cid":
				p.ref().cid, isString = stringValue(v)
			case "media_type":
				p.ref().mediaType, isString = stringValue(v)
			case "name":
				p.ref().name, isString = stringValue(v)
			}
			if !isString {
				return nil, fmt.Errorf("content part field %q is not a string", k)
			}
		}
		if c.Err() != nil {
			return nil, shape()
		}
		switch {
		case jsonscan.Equal(typ, "text"):
			p.mediaRef = nil
			if p.text == nil {
				return nil, fmt.Errorf("text part without text")
			}
			if len(p.text) == 2 {
				continue
			}
			p.kind = partText
		case jsonscan.Equal(typ, "image"), jsonscan.Equal(typ, "file"):
			if p.mediaRef == nil || p.cid == "" {
				return nil, fmt.Errorf("%s part without cid", typ)
			}
			p.text = nil
			p.kind = partImage
			if jsonscan.Equal(typ, "file") {
				p.kind = partFile
			}
		default:
			if typ == nil {
				typ = []byte("none")
			}
			n.addf("event %s: content part of unknown type %s skipped", ev.ID, typ)
			continue
		}
		parts = append(parts, p)
	}
	if c.Err() != nil {
		return nil, shape()
	}
	*arena = parts
	if len(parts) == start {
		return nil, nil
	}
	return parts[start:len(parts):len(parts)], nil
}

// ref returns p's media reference, making it if need be.
func (p *part) ref() *mediaRef {
	if p.mediaRef == nil {
		p.mediaRef = &mediaRef{}
	}
	return p.mediaRef
}

// partTokens is the estimate of the media among parts (their text is
// counted with the body).
func partTokens(parts []part, blobs *blobCache) int {
	t := 0
	for _, p := range parts {
		switch p.kind {
		case partImage:
			t += ImageTokens
		case partFile:
			if data, err := blobs.get(p.cid); err == nil {
				t += Estimate(data)
			}
		}
	}
	return t
}

// stringValue returns the decoded string if v is a string token.
func stringValue(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	return jsonscan.Unquote(v), true
}

// hasEscape reports whether the string token tok, or its inside, holds an
// escape.
func hasEscape(tok []byte) bool { return bytes.IndexByte(tok, '\\') >= 0 }
