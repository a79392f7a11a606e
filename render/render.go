package render

import (
	"errors"
	"fmt"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

// Request is what a provider request is rendered from.
type Request struct {
	// Events are one session's events in the journal's total order
	// (journal.Sort of the readable events). Events of types render does
	// not know are skipped with a note.
	Events []*journal.Event
	// Agent gives the instructions and the tool definitions.
	Agent capsule.Agent
	// Target says which provider, model and host the body is for, and the
	// context window to fit it into.
	Target Target
	// Blobs gives the bytes of images and files; nil sends them as
	// placeholders.
	Blobs Blobs
}

// Result is a rendered request.
type Result struct {
	// Body is the exact JSON request body, compact, without a trailing
	// newline. The same Request always gives the same bytes.
	Body []byte
	// Notes say what render left out or changed: events of unknown types,
	// malformed events, orphan results, dangling calls, media a provider
	// cannot take, missing blobs. Empty when the journal rendered whole.
	Notes []string
	// Dropped is the number of journal events left out to fit the window.
	Dropped int
	// Tokens is the estimate of the whole request (see Estimate).
	Tokens int
	// CallIDs maps each provider tool-call id that differs from its
	// neutral id back to the neutral id (see ids.go).
	CallIDs map[string]string
}

// ErrNoModel means the target names no model, and the provider needs one
// in the body.
var ErrNoModel = errors.New("target names no model")

// Render writes the request body for r.Target. It is a pure function of r:
// no I/O besides r.Blobs, no goroutines, no clock. Errors: ErrUnknownProvider,
// ErrNoModel, or a *WindowError (errors.Is ErrWindowTooSmall) when the
// window cannot hold the instructions, tools and last user message. Bad
// events are never an error: they are skipped and noted.
func Render(r Request) (*Result, error) {
	if _, err := ParseProvider(string(r.Target.Provider)); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	if r.Target.Model == "" && r.Target.Provider != Gemini {
		return nil, fmt.Errorf("render for %s: %w", r.Target.Provider, ErrNoModel)
	}
	p := &plan{
		t:     r.Target,
		host:  r.Target.host(),
		agent: r.Agent,
		blobs: &blobCache{src: r.Blobs},
		notes: &notes{},
		ids:   newIDMap(r.Target.Provider),
	}
	units := buildView(r.Events, p.blobs, p.notes)
	p.tools = toolDefs(r.Agent, p.notes)
	fixed := RequestOverhead + estimateString(r.Agent.Instructions)
	for _, t := range p.tools {
		fixed += t.tokens
	}
	f, err := fit(units, fixed, r.Target.Window)
	if err != nil {
		return nil, fmt.Errorf("render for %s: %w", r.Target.Provider, err)
	}
	p.units, p.summary = f.units, f.summary
	p.reasoning = f.dropped == 0 && f.summary == nil
	if f.noRoom {
		p.notes.addf("%d events left out to fit the window, which has no room left to say so", f.dropped)
	}

	w := &writer{b: make([]byte, 0, bodySizeHint(r.Events))}
	switch r.Target.Provider {
	case OpenAIChat:
		p.openAIChat(w)
	case OpenAIResponses:
		p.openAIResponses(w)
	case Anthropic:
		p.anthropic(w)
	case Gemini:
		p.gemini(w)
	case Ollama:
		p.ollama(w)
	}
	return &Result{
		Body:    w.b,
		Notes:   p.notes.all(),
		Dropped: f.dropped,
		Tokens:  fixed + f.tokens,
		CallIDs: p.ids.back,
	}, nil
}

// bodySizeHint guesses the body's size to allocate it once.
func bodySizeHint(events []*journal.Event) int {
	n := 1024
	for _, e := range events {
		n += len(e.Body) + 32
	}
	return n
}

// plan is one render in progress: the target, what fitting kept, and the
// state the provider writers share.
type plan struct {
	t         Target
	host      string
	agent     capsule.Agent
	tools     []toolDef
	units     []*unit
	summary   *entry // the summary of what was left out, or nil
	reasoning bool   // whether reasoning may be replayed at all (nothing trimmed)
	ids       *idMap
	blobs     *blobCache
	notes     *notes
	missing   map[string]bool // blobs already noted missing
	scratch   []piece         // reused by pieces
	buf       []byte          // reused by geminiValue
}

// each calls msg for every message unit (the summary first, if any) and
// step for every step, in order.
func (p *plan) each(msg func(e *entry), step func(u *unit)) {
	if p.summary != nil {
		msg(p.summary)
	}
	for _, u := range p.units {
		if u.msg != nil {
			msg(u.msg)
		} else {
			step(u)
		}
	}
}

// argsObject reports whether a call's arguments are a JSON object, as
// Anthropic, Gemini and Ollama require.
func argsObject(args []byte) bool { return len(args) > 0 && args[0] == '{' }

// writeArgsObject writes a call's arguments as a JSON object. Arguments
// that are not an object (a string holding the invalid JSON a model wrote,
// or another JSON value) are wrapped as {"raw_arguments": <the text>} so
// that the call, and its result, still go to the model.
func writeArgsObject(w *writer, args []byte) {
	if argsObject(args) {
		w.rawb(args)
		return
	}
	w.raw(`{"raw_arguments":`)
	if args[0] == '"' {
		w.rawb(args)
	} else {
		w.strb(args)
	}
	w.raw("}")
}

// writeArgsString writes a call's arguments as a JSON string holding JSON
// text, as OpenAI requires: the arguments' JSON, or the invalid text the
// model wrote, as it was.
func writeArgsString(w *writer, args []byte) {
	if args[0] == '"' {
		w.rawb(args)
		return
	}
	w.strb(args)
}

// errorPrefix starts the text of an error result for providers that have
// no error flag (OpenAI, Ollama).
const errorPrefix = "error: "
