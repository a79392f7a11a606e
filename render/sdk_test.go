package render

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	ollama "github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/tern-dev/tern/journal"
)

// geminiRequest is the generateContent body in the genai types.
type geminiRequest struct {
	SystemInstruction *genai.Content   `json:"systemInstruction,omitempty"`
	Contents          []*genai.Content `json:"contents"`
	Tools             []*genai.Tool    `json:"tools,omitempty"`
}

// sdkRoundTrip decodes body into the provider's official Go SDK request
// type, encodes it again and compares both in canonical JSON (RFC 8785).
// genai is decoded with unknown fields disallowed; the other SDKs drop
// unknown keys, which the comparison catches.
func sdkRoundTrip(p Provider, body []byte) error {
	var v any
	switch p {
	case OpenAIChat:
		v = &openai.ChatCompletionNewParams{}
	case OpenAIResponses:
		v = &responses.ResponseNewParams{}
	case Anthropic:
		v = &anthropic.MessageNewParams{}
	case Gemini:
		v = &geminiRequest{}
	case Ollama:
		v = &ollama.ChatRequest{}
	default:
		return fmt.Errorf("no SDK type for %s", p)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if p == Gemini {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode into the SDK type: %w", err)
	}
	again, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode the SDK type: %w", err)
	}
	want, err := journal.Canonical(body)
	if err != nil {
		return fmt.Errorf("canonicalize the body: %w", err)
	}
	got, err := journal.Canonical(again)
	if err != nil {
		return fmt.Errorf("canonicalize the SDK's encoding: %w", err)
	}
	if !bytes.Equal(want, got) {
		i := 0
		for i < len(want) && i < len(got) && want[i] == got[i] {
			i++
		}
		lo := max(0, i-120)
		return fmt.Errorf("the SDK changes the body at byte %d:\nbody: …%s\nsdk:  …%s", i, want[lo:min(len(want), i+120)], got[lo:min(len(got), i+120)])
	}
	return nil
}
