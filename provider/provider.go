// Package provider takes model steps: it sends the request body render
// wrote to a model API, byte for byte, streams the answer back as deltas,
// and returns the step whole as neutral journal drafts (the assistant's
// message, its tool calls, its reasoning under its provider's key, and
// the token usage), ready to be appended together or not at all.
//
// One adapter per wire protocol: OpenAI Chat Completions (also any
// OpenAI-compatible server through a base URL), OpenAI Responses,
// Anthropic Messages, Gemini streamGenerateContent and Ollama /api/chat;
// and the built-in offline model, which needs no network and no key.
// Streams are read with the SSE decoder of OpenAI's official Go SDK
// (Ollama's newline-delimited JSON with encoding/json); what each adapter
// makes of the events is its own file.
package provider

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/tern-dev/tern/internal/providerid"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/render"
)

// Offline is the provider name of the built-in offline model
// (providerid.Offline, as the string Settings.Provider holds).
const Offline = string(providerid.Offline)

// Settings are what agent.json says about the model, with the key
// resolved: which provider and model, where, and with what key.
type Settings struct {
	// Provider is one of providerid.All.
	Provider string
	// Model is the model name (the body render wrote names it too).
	Model string
	// BaseURL is the API's base URL in its official SDK's convention;
	// empty means DefaultBaseURL(Provider).
	BaseURL string
	// KeySecret is the name of the secret the key came from, for error
	// messages; never the key.
	KeySecret string
	// Key is the API key, or empty (the offline model, a local Ollama).
	// It goes into one request header and nowhere else.
	Key string
}

// DefaultBaseURL is the base URL each official SDK uses by default.
func DefaultBaseURL(p string) string {
	switch providerid.ID(p) {
	case providerid.OpenAIChat, providerid.OpenAIResponses:
		return "https://api.openai.com/v1"
	case providerid.Anthropic:
		return "https://api.anthropic.com"
	case providerid.Gemini:
		return "https://generativelanguage.googleapis.com"
	case providerid.Ollama:
		return "http://127.0.0.1:11434"
	}
	return ""
}

// baseURL is s.BaseURL or the default, without a trailing slash.
func (s Settings) baseURL() string {
	b := s.BaseURL
	if b == "" {
		b = DefaultBaseURL(s.Provider)
	}
	return strings.TrimRight(b, "/")
}

// Host is the host the step goes to (api.openai.com, 127.0.0.1:11434):
// the key under which reasoning is recorded and replayed. Render the next
// request with render.Target{Host: s.Host()} so that it finds it.
func (s Settings) Host() string {
	if s.Provider == Offline {
		return Offline
	}
	u, err := url.Parse(s.baseURL())
	if err != nil || u.Host == "" {
		return s.baseURL()
	}
	return u.Host
}

// Wire is the format the request body must be rendered in for s: the
// provider's own, or OpenAI Chat for the offline model (which reads it).
func (s Settings) Wire() render.Provider {
	if s.Provider == Offline {
		return render.OpenAIChat
	}
	return providerid.ID(s.Provider)
}

// Check says what is wrong with s before anything is sent: an unknown
// provider, a missing model, a base URL that is not http(s).
func (s Settings) Check() error {
	if _, err := providerid.Parse(s.Provider); err != nil {
		return err
	}
	if s.Model == "" {
		return fmt.Errorf("provider %s: no model named", s.Provider)
	}
	if s.BaseURL != "" {
		u, err := url.Parse(s.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("base_url %q is not an http or https URL", s.BaseURL)
		}
	}
	if strings.IndexFunc(s.Key, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return fmt.Errorf("the key from secret %s holds a line break or control character, so no HTTP header can carry it: store the key's one line again (tern secret set %s), or fix TERN_SECRET_%s", s.KeySecret, s.KeySecret, s.KeySecret)
	}
	return nil
}

// A Model takes model steps.
type Model interface {
	// Step sends body (render's output for s.Wire(), streamed: render's
	// Target.Stream) and calls deltas with each piece of the answer as it
	// arrives, from the calling goroutine. It returns the step whole, or
	// an error (*Error for what the API or the stream did); after an
	// error, nothing of the step must be appended, whatever deltas went
	// out.
	Step(ctx context.Context, body []byte, deltas func(Delta)) (*Result, error)
}

// New returns the model s names. It fails if s does not Check.
func New(s Settings) (Model, error) {
	return NewWith(s, Options{})
}

// DeltaKind says what a Delta carries.
type DeltaKind int

// The kinds of delta.
const (
	DeltaText      DeltaKind = iota + 1 // Text is more of the assistant's message
	DeltaReasoning                      // Text is more of its reasoning
	DeltaCall                           // a tool call begins: Index, ID, Name
	DeltaCallArgs                       // Text is more of call Index's arguments
)

// Delta is one piece of a step as it streams.
type Delta struct {
	Kind  DeltaKind
	Text  string
	Index int    // the call's position among the step's calls (DeltaCall, DeltaCallArgs)
	ID    string // the call's id (DeltaCall)
	Name  string // the tool's name (DeltaCall)
}

// Usage is what a step cost, in the provider's tokens. InputTokens counts
// every token of the request, those read from a cache included
// (CachedTokens says how many were); OutputTokens every token of the
// answer, reasoning included (ReasoningTokens says how many were). Zero
// fields were not reported.
type Usage struct {
	InputTokens     int `json:"input_tokens"`
	OutputTokens    int `json:"output_tokens"`
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	CachedTokens    int `json:"cached_tokens,omitempty"`
}

// Result is a whole model step.
type Result struct {
	// Drafts are the step's events in the order the model produced them:
	// reasoning, assistant messages and tool calls (FORMAT.md's core
	// bodies), then one turn.usage event. Append them together.
	Drafts []journal.Draft
	// Usage is the step's token usage (also in the turn.usage draft).
	Usage Usage
	// Stop is why the model stopped: "end", "tool_calls", "max_tokens",
	// or the provider's own reason when it is none of these.
	Stop string
}

// UsageType is the type of the event that records a step's usage. Render
// skips the turn.* family silently.
const UsageType = "turn.usage"

// errUnknownProvider is what New says for a provider it cannot make.
var errUnknownProvider = errors.New("unknown provider")
