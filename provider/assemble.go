package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tern-dev/tern/journal"
)

// assembler builds a step from what an adapter reads off the stream: it
// passes each piece on as a Delta and keeps the step's items in the order
// the model produced them. Adapters call it; nothing here knows a wire
// format.
type assembler struct {
	provider, model, host string
	deltas                func(Delta)
	items                 []*item
	calls                 map[int]*item // by the adapter's own index of the call
	ncalls                int
	usage                 Usage
	stop                  string
	seed                  []byte // the request body: ids made up for calls without one derive from it
}

type itemKind int

const (
	itemText itemKind = iota + 1
	itemReasoning
	itemCall
)

// item is one event of the step being assembled.
type item struct {
	kind itemKind
	text strings.Builder // the message's text, the reasoning's text, or the call's arguments
	data map[string]any  // reasoning: the provider's opaque fields
	id   string          // call
	name string          // call
	n    int             // call: its position among the step's calls
}

func newAssembler(s Settings, body []byte, deltas func(Delta)) *assembler {
	if deltas == nil {
		deltas = func(Delta) {}
	}
	return &assembler{provider: s.Provider, model: s.Model, host: s.Host(), deltas: deltas, calls: map[int]*item{}, seed: body}
}

// last returns the last item if it is of kind k.
func (a *assembler) last(k itemKind) *item {
	if n := len(a.items); n > 0 && a.items[n-1].kind == k {
		return a.items[n-1]
	}
	return nil
}

func (a *assembler) add(k itemKind) *item {
	it := &item{kind: k}
	a.items = append(a.items, it)
	return it
}

// text appends s to the assistant's message.
func (a *assembler) text(s string) {
	if s == "" {
		return
	}
	it := a.last(itemText)
	if it == nil {
		it = a.add(itemText)
	}
	it.text.WriteString(s)
	a.deltas(Delta{Kind: DeltaText, Text: s})
}

// newText starts a new assistant message even right after another (an
// API that says where one message ends and the next begins).
func (a *assembler) newText() {
	if it := a.last(itemText); it == nil || it.text.Len() > 0 {
		a.add(itemText)
	}
}

// reasoning appends s to the current reasoning block.
func (a *assembler) reasoning(s string) {
	if s == "" {
		return
	}
	it := a.last(itemReasoning)
	if it == nil {
		it = a.add(itemReasoning)
	}
	it.text.WriteString(s)
	a.deltas(Delta{Kind: DeltaReasoning, Text: s})
}

// newReasoning starts a reasoning block even right after another (two
// thinking blocks are two events).
func (a *assembler) newReasoning() { a.add(itemReasoning) }

// reasoningData sets a field of the provider's opaque reasoning data on
// the current reasoning block (starting one if there is none).
func (a *assembler) reasoningData(key string, v any) {
	it := a.last(itemReasoning)
	if it == nil {
		it = a.add(itemReasoning)
	}
	if it.data == nil {
		it.data = map[string]any{}
	}
	it.data[key] = v
}

// call starts tool call key (the adapter's index for it). An empty id
// gets one made up from the request and the call's position.
func (a *assembler) call(key int, id, name string) {
	it := a.add(itemCall)
	it.n = a.ncalls
	a.ncalls++
	if id == "" {
		sum := sha256.Sum256(append(append([]byte{}, a.seed...), strconv.Itoa(it.n)...))
		id = "call_" + hex.EncodeToString(sum[:8])
	}
	it.id, it.name = id, name
	a.calls[key] = it
	a.deltas(Delta{Kind: DeltaCall, Index: it.n, ID: id, Name: name})
}

// callArgs appends a piece of call key's arguments; false if there is no
// such call.
func (a *assembler) callArgs(key int, s string) bool {
	it := a.calls[key]
	if it == nil {
		return false
	}
	if s != "" {
		it.text.WriteString(s)
		a.deltas(Delta{Kind: DeltaCallArgs, Index: it.n, Text: s})
	}
	return true
}

// hasCall reports whether call key has started.
func (a *assembler) hasCall(key int) bool { return a.calls[key] != nil }

// result returns the whole step.
func (a *assembler) result() (*Result, error) {
	var drafts []journal.Draft
	for _, it := range a.items {
		var body any
		switch it.kind {
		case itemText:
			if it.text.Len() == 0 {
				continue
			}
			body = map[string]any{"role": "assistant", "content": []any{map[string]string{"type": "text", "text": it.text.String()}}}
			drafts = append(drafts, draft("message", body))
		case itemReasoning:
			if it.text.Len() == 0 && it.data == nil {
				continue
			}
			r := map[string]any{"provider": a.provider, "model": a.model, "host": a.host}
			if it.text.Len() > 0 {
				r["text"] = it.text.String()
			}
			if it.data != nil {
				r["data"] = it.data
			}
			drafts = append(drafts, draft("reasoning", r))
		case itemCall:
			drafts = append(drafts, draft("tool_call", map[string]any{"call_id": it.id, "name": it.name, "arguments": arguments(it.text.String())}))
		}
	}
	stop := a.stop
	if stop == "" {
		stop = "end"
		if a.ncalls > 0 {
			stop = "tool_calls"
		}
	}
	drafts = append(drafts, draft(UsageType, map[string]any{"provider": a.provider, "model": a.model, "host": a.host,
		"usage": a.usage, "stop": stop}))
	return &Result{Drafts: drafts, Usage: a.usage, Stop: stop}, nil
}

// arguments is a call's arguments as the journal keeps them: the JSON the
// model wrote if it is valid ({} when it wrote nothing), else its text.
func arguments(s string) any {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(s)) == nil {
			return json.RawMessage(buf.Bytes())
		}
	}
	return s
}

func draft(typ string, body any) journal.Draft {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err) // only maps, strings, numbers and valid raw JSON
	}
	return journal.Draft{Type: typ, Body: b}
}
