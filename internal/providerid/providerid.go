// Package providerid names the model providers tern speaks to, once: the
// spelling of each name that agent.json, render's targets, the provider
// clients and the command line use; the lists of them; parsing, with an
// error that names the valid ones; and what goes with a name alone:
// whether render writes request bodies for it, the offline provider's one
// model, and the embedders with the API each calls.
//
// It must import nothing of tern, so that every package can use it.
package providerid

import (
	"errors"
	"fmt"
	"strings"
)

// ID names a provider: a wire protocol tern speaks to a model API, or the
// built-in offline model.
type ID string

// The providers.
const (
	OpenAIChat      ID = "openai-chat"      // OpenAI Chat Completions, POST /v1/chat/completions, and any server that speaks it
	OpenAIResponses ID = "openai-responses" // OpenAI Responses, POST /v1/responses, stateless
	Anthropic       ID = "anthropic"        // Anthropic Messages, POST /v1/messages
	Gemini          ID = "gemini"           // Gemini generateContent, POST /v1beta/models/{model}:generateContent
	Ollama          ID = "ollama"           // Ollama, POST /api/chat
	Offline         ID = "offline"          // the built-in offline model: no network, no key
)

// OfflineModel is the one model of the offline provider.
const OfflineModel = "tern-offline"

// Wires lists the providers that have a wire protocol, those render
// writes request bodies for, in a fixed order.
func Wires() []ID { return []ID{OpenAIChat, OpenAIResponses, Anthropic, Gemini, Ollama} }

// All lists every provider: Wires, then Offline.
func All() []ID { return append(Wires(), Offline) }

// Wire reports whether id is one of Wires.
func (id ID) Wire() bool {
	switch id {
	case OpenAIChat, OpenAIResponses, Anthropic, Gemini, Ollama:
		return true
	}
	return false
}

// Known reports whether id is one of All.
func (id ID) Known() bool { return id == Offline || id.Wire() }

// ErrUnknown means a name is not one of the providers tern knows.
var ErrUnknown = errors.New("unknown provider")

// Parse returns the provider named s, one of All. Any other name is an
// error wrapping ErrUnknown that names the valid ones:
//
//	provider "openai" is not one of openai-chat, openai-responses, anthropic, gemini, ollama, offline
func Parse(s string) (ID, error) {
	if id := ID(s); id.Known() {
		return id, nil
	}
	return "", unknownError{name: s}
}

// unknownError is Parse's error for a name it does not know.
type unknownError struct{ name string }

func (e unknownError) Error() string {
	return fmt.Sprintf("provider %q is not one of %s", e.name, strings.Join(Names(All()), ", "))
}

func (e unknownError) Unwrap() error { return ErrUnknown }

// Names spells ids, in their order, for messages and completion.
func Names[T ID | Embedder](ids []T) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

// Embedder names what builds an agent's semantic index: agent.json's
// memory.embedder.
type Embedder string

// The embedders.
const (
	Builtin     Embedder = "builtin" // tern's own, offline, no download: the default
	EmbedOpenAI Embedder = "openai"  // OpenAI's /v1/embeddings, and any server that speaks it
	EmbedOllama Embedder = "ollama"  // Ollama's /api/embed
	EmbedGemini Embedder = "gemini"  // Gemini's batchEmbedContents
)

// Embedders lists every embedder: Builtin, then ProviderEmbedders.
func Embedders() []Embedder { return append([]Embedder{Builtin}, ProviderEmbedders()...) }

// ProviderEmbedders lists the embedders that call a provider's API, in a
// fixed order.
func ProviderEmbedders() []Embedder { return []Embedder{EmbedOpenAI, EmbedOllama, EmbedGemini} }

// Provider is the provider whose API the embedder calls, at that
// provider's base URL and with its key: OpenAIChat for EmbedOpenAI,
// Ollama for EmbedOllama, Gemini for EmbedGemini; "" for Builtin and for
// names that are no embedder.
func (e Embedder) Provider() ID {
	switch e {
	case EmbedOpenAI:
		return OpenAIChat
	case EmbedOllama:
		return Ollama
	case EmbedGemini:
		return Gemini
	}
	return ""
}
