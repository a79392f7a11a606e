package render

import (
	"fmt"
	"strings"

	"github.com/tern-dev/tern/internal/providerid"
)

// Provider names a request format: one of providerid's wire providers.
type Provider = providerid.ID

// The request formats render writes.
const (
	OpenAIChat      = providerid.OpenAIChat      // OpenAI Chat Completions, POST /v1/chat/completions
	OpenAIResponses = providerid.OpenAIResponses // OpenAI Responses, POST /v1/responses, stateless
	Anthropic       = providerid.Anthropic       // Anthropic Messages, POST /v1/messages
	Gemini          = providerid.Gemini          // Gemini generateContent, POST /v1beta/models/{model}:generateContent
	Ollama          = providerid.Ollama          // Ollama, POST /api/chat
)

// Providers lists every provider render knows, in a fixed order.
func Providers() []Provider { return providerid.Wires() }

// ErrUnknownProvider means a provider name is not one of Providers.
var ErrUnknownProvider = providerid.ErrUnknown

// ParseProvider returns the provider named s. An unknown name is an error
// wrapping ErrUnknownProvider that lists the valid names.
func ParseProvider(s string) (Provider, error) {
	if p := Provider(s); p.Wire() {
		return p, nil
	}
	return "", fmt.Errorf("%w %q: valid providers are %s", ErrUnknownProvider, s, strings.Join(providerid.Names(Providers()), ", "))
}

// DefaultHost is the provider's public API host: the host a target gets
// when it names none. Reasoning is keyed by host, so two targets that differ
// only in host (AI Studio and Vertex AI, say) do not share reasoning.
func DefaultHost(p Provider) string {
	switch p {
	case OpenAIChat, OpenAIResponses:
		return "api.openai.com"
	case Anthropic:
		return "api.anthropic.com"
	case Gemini:
		return "generativelanguage.googleapis.com"
	case Ollama:
		return "localhost:11434"
	}
	return ""
}

// DefaultMaxTokens is the max_tokens an Anthropic request gets when the
// target sets none (the Messages API requires the field).
const DefaultMaxTokens = 8192

// Target is what a request is rendered for.
type Target struct {
	Provider Provider
	// Model is the model name written into the body (Gemini names the model
	// in the URL, not the body, but reasoning is still keyed by it).
	Model string
	// Host is the API host; empty means DefaultHost(Provider).
	Host string
	// Window is the context window in estimated tokens (see Estimate); the
	// whole request, instructions and tools included, is fitted into it.
	// Zero or less means no limit.
	Window int
	// MaxTokens is Anthropic's max_tokens; zero means DefaultMaxTokens.
	// Other providers ignore it.
	MaxTokens int
	// Thinking is Anthropic's extended-thinking budget in tokens; zero
	// leaves thinking off. Render turns it off anyway, with a note, when
	// the request ends in a tool loop whose assistant message does not
	// start with a thinking block it can replay (Anthropic refuses that).
	// Other providers ignore it.
	Thinking int
	// Stream asks for a streamed answer, in the body where the API wants
	// it: "stream":true for Anthropic and OpenAI Responses, and for
	// OpenAI Chat also "stream_options":{"include_usage":true} (else the
	// stream carries no usage). Gemini streams by its URL
	// (streamGenerateContent?alt=sse) and Ollama by default, so their
	// bodies do not change.
	Stream bool
}

// host is t.Host or the provider's default.
func (t Target) host() string {
	if t.Host != "" {
		return t.Host
	}
	return DefaultHost(t.Provider)
}
