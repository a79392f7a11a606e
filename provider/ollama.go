package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// ollamaWire is Ollama's /api/chat: POST {base}/api/chat, with the key as
// a bearer token when there is one (Ollama's hosted API) and no header
// for a local server. The answer is not SSE but newline-delimited JSON
// (application/x-ndjson), read with encoding/json's Decoder whatever the
// Content-Type says: one api.ChatResponse per line, each with more of the
// message (thinking, content, whole tool_calls), the last with "done":
// true, its done_reason and the token counts. An {"error": …} line ends a
// stream that failed after it began. The stream is whole only after the
// done line.
//
// Each tool call arrives whole; its function.index is not a key (several
// of Ollama's parsers leave it 0 for every call), so calls are keyed by
// their order, and a call without an id gets one from the assembler.
type ollamaWire struct{}

func (ollamaWire) endpoint(s Settings) string { return s.baseURL() + "/api/chat" }

func (ollamaWire) auth(h http.Header, key string) { chatWire{}.auth(h, key) }

func (ollamaWire) message(body []byte) string { return errorMessage(body) }

type ollamaLine struct {
	Message struct {
		Content   string `json:"content"`
		Thinking  string `json:"thinking"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	Done                  bool            `json:"done"`
	DoneReason            string          `json:"done_reason"`
	PromptEvalCount       int             `json:"prompt_eval_count"`
	PromptEvalCachedCount int             `json:"prompt_eval_cached_count"` // newer servers: the part of prompt_eval_count read from the cache
	EvalCount             int             `json:"eval_count"`
	Error                 json.RawMessage `json:"error"`
}

func (ollamaWire) read(m *httpModel, body io.Reader, a *assembler) error {
	dec := json.NewDecoder(body)
	calls := 0
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			var syntax *json.SyntaxError
			switch {
			case err == io.EOF:
				return m.cut("no line with done: true")
			case errors.As(err, &syntax):
				return m.cut("a line that is not JSON: " + err.Error())
			}
			return m.cut(err.Error())
		}
		var l ollamaLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return m.cut("a line that is not a chat response: " + err.Error())
		}
		if len(l.Error) > 0 && string(l.Error) != "null" {
			return m.classify(0, errorMessage(raw))
		}
		a.reasoning(l.Message.Thinking)
		a.text(l.Message.Content)
		for _, tc := range l.Message.ToolCalls {
			k := calls
			calls++
			a.call(k, tc.ID, tc.Function.Name)
			if args := bytes.TrimSpace(tc.Function.Arguments); len(args) > 0 && string(args) != "null" {
				a.callArgs(k, string(args))
			}
		}
		if l.Done {
			a.stop = ollamaStop(l.DoneReason)
			a.usage = Usage{InputTokens: l.PromptEvalCount, OutputTokens: l.EvalCount, CachedTokens: l.PromptEvalCachedCount}
			return nil
		}
	}
}

// ollamaStop is the step's stop reason for a done_reason: empty for
// "stop" (or none), so that the assembler says "end" or "tool_calls".
func ollamaStop(r string) string {
	switch r {
	case "stop", "":
		return ""
	case "length":
		return "max_tokens"
	}
	return r
}
