package provider

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/openai/openai-go/v3/packages/ssestream"
)

// chatWire is OpenAI Chat Completions, and every server that speaks it
// (vLLM, llama.cpp's server, LM Studio, …): POST {base}/chat/completions,
// an SSE stream of chat.completion.chunk objects ending in "data: [DONE]".
// The usage comes in a last chunk with no choices (render asks for it with
// stream_options.include_usage). Servers that stream reasoning put it in
// delta.reasoning_content or delta.reasoning; it is kept as reasoning text
// (Chat Completions takes none back, so it has no opaque data).
type chatWire struct{}

func (chatWire) endpoint(s Settings) string { return s.baseURL() + "/chat/completions" }

func (chatWire) auth(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

func (chatWire) message(body []byte) string { return errorMessage(body) }

type chatChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

func (chatWire) read(m *httpModel, body io.Reader, a *assembler) error {
	finished := false
	done, err := sse(body, func(ev ssestream.Event) (bool, error) {
		data := trimNewline(ev.Data)
		if string(data) == "[DONE]" {
			return false, nil
		}
		var c chatChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return false, m.cut("a chunk that is not JSON: " + err.Error())
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return false, m.classify(0, errorMessage(data))
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				continue // tern asks for one choice
			}
			d := ch.Delta
			a.reasoning(d.ReasoningContent)
			a.reasoning(d.Reasoning)
			a.text(d.Content)
			for _, tc := range d.ToolCalls {
				if !a.hasCall(tc.Index) {
					a.call(tc.Index, tc.ID, tc.Function.Name)
				}
				a.callArgs(tc.Index, tc.Function.Arguments)
			}
			if ch.FinishReason != "" {
				finished = true
				a.stop = chatStop(ch.FinishReason)
			}
		}
		if u := c.Usage; u != nil {
			a.usage = Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
				ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens, CachedTokens: u.PromptTokensDetails.CachedTokens}
		}
		return true, nil
	})
	switch {
	case err != nil:
		return m.streamErr(err)
	case !done && !finished:
		return m.cut("no finish_reason and no [DONE]")
	case !done:
		// Some compatible servers end without [DONE] after the finish.
	}
	return nil
}

func chatStop(r string) string {
	switch r {
	case "stop":
		return "end"
	case "tool_calls", "function_call":
		return "tool_calls"
	case "length":
		return "max_tokens"
	}
	return r
}

// trimNewline drops the newline the SSE decoder ends each data with.
func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}
