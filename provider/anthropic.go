package provider

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3/packages/ssestream"
)

// anthropicWire is Anthropic Messages: POST {base}/v1/messages with the key
// in x-api-key and anthropic-version: 2023-06-01, answered by an SSE stream
// of named events whose data carries the same "type": message_start (the
// input usage), then per content block a content_block_start, its
// content_block_delta events and a content_block_stop, then message_delta
// (the stop reason and the cumulative usage) and message_stop, which alone
// ends a step; ping events may come anywhere, and an error event
// (overloaded_error, …) ends the stream with what a non-streamed request
// would have answered with an HTTP status. Blocks are told apart by their
// index: text blocks are the message; a thinking block is a reasoning event
// whose text is the thinking and whose data is {"signature": …}; a
// redacted_thinking block is a reasoning event with data {"redacted": …};
// a tool_use block is a call whose input streams as partial JSON.
type anthropicWire struct{}

// anthropicVersion is the API version every request names.
const anthropicVersion = "2023-06-01"

func (anthropicWire) endpoint(s Settings) string { return s.baseURL() + "/v1/messages" }

func (anthropicWire) auth(h http.Header, key string) {
	if key != "" {
		h.Set("x-api-key", key)
	}
	h.Set("anthropic-version", anthropicVersion) // with or without a key (a gateway may add it)
}

// message reads {"type":"error","error":{"type":…,"message":…}}.
func (anthropicWire) message(body []byte) string { return errorMessage(body) }

// anthropicEvent is the data of any event of the stream; which fields are
// set depends on its type (the SDK's MessageStreamEventUnion, plus the
// error event its stream handles itself).
type anthropicEvent struct {
	Type    string `json:"type"`
	Message struct {
		Usage *anthropicUsage `json:"usage"`
	} `json:"message"` // message_start
	Index        int `json:"index"` // content_block_*
	ContentBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`      // text
		Thinking  string          `json:"thinking"`  // thinking
		Signature string          `json:"signature"` // thinking
		Data      string          `json:"data"`      // redacted_thinking
		ID        string          `json:"id"`        // tool_use
		Name      string          `json:"name"`      // tool_use
		Input     json.RawMessage `json:"input"`     // tool_use
	} `json:"content_block"` // content_block_start
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`         // text_delta
		PartialJSON string `json:"partial_json"` // input_json_delta
		Thinking    string `json:"thinking"`     // thinking_delta
		Signature   string `json:"signature"`    // signature_delta
		StopReason  string `json:"stop_reason"`  // message_delta
	} `json:"delta"` // content_block_delta, message_delta
	Usage *anthropicUsage `json:"usage"` // message_delta
	Error struct {
		Type string `json:"type"`
	} `json:"error"` // error
}

// anthropicUsage is a usage object; a field left out is nil (message_delta
// carries only the counts that changed, each a whole-message total).
type anthropicUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	OutputTokensDetails      *struct {
		ThinkingTokens *int `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// anthropicCounts are the step's counts as Anthropic gives them: its
// input_tokens leave out the tokens read from or written to the cache.
type anthropicCounts struct{ input, cacheRead, cacheWrite, output, thinking int }

// apply sets the counts u reports, leaving the others as they were, and
// writes them to to as Usage counts them (every input token in
// InputTokens, the cached ones included).
func (u *anthropicUsage) apply(c *anthropicCounts, to *Usage) {
	if u == nil {
		return
	}
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(&c.input, u.InputTokens)
	set(&c.output, u.OutputTokens)
	set(&c.cacheRead, u.CacheReadInputTokens)
	set(&c.cacheWrite, u.CacheCreationInputTokens)
	if d := u.OutputTokensDetails; d != nil {
		set(&c.thinking, d.ThinkingTokens)
	}
	*to = Usage{InputTokens: c.input + c.cacheRead + c.cacheWrite, OutputTokens: c.output,
		ReasoningTokens: c.thinking, CachedTokens: c.cacheRead}
}

func (anthropicWire) read(m *httpModel, body io.Reader, a *assembler) error {
	signatures := map[int]*strings.Builder{} // by block index: a signature may come in pieces
	var counts anthropicCounts
	done, err := sse(body, func(ev ssestream.Event) (bool, error) {
		data := trimNewline(ev.Data)
		if ev.Type == "ping" || len(bytes.TrimSpace(data)) == 0 {
			return true, nil
		}
		if ev.Type == "error" {
			return false, anthropicError(m, data)
		}
		var e anthropicEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return false, m.cut("an event that is not JSON: " + err.Error())
		}
		switch e.Type {
		case "message_start":
			e.Message.Usage.apply(&counts, &a.usage)
		case "content_block_start":
			b := e.ContentBlock
			switch b.Type {
			case "text":
				a.text(b.Text)
			case "thinking":
				a.newReasoning()
				a.reasoning(b.Thinking)
				if b.Signature != "" {
					sig := &strings.Builder{}
					sig.WriteString(b.Signature)
					signatures[e.Index] = sig
					a.reasoningData("signature", sig.String())
				}
			case "redacted_thinking":
				a.newReasoning()
				a.reasoningData("redacted", b.Data)
			case "tool_use":
				a.call(e.Index, b.ID, b.Name)
				a.callArgs(e.Index, wholeInput(b.Input))
			}
			// Other blocks (server tools, …) are not tern's: skipped.
		case "content_block_delta":
			d := e.Delta
			switch d.Type {
			case "text_delta":
				a.text(d.Text)
			case "thinking_delta":
				a.reasoning(d.Thinking)
			case "signature_delta":
				sig := signatures[e.Index]
				if sig == nil {
					sig = &strings.Builder{}
					signatures[e.Index] = sig
				}
				sig.WriteString(d.Signature)
				a.reasoningData("signature", sig.String())
			case "input_json_delta":
				a.callArgs(e.Index, d.PartialJSON) // a server tool's input has no call: dropped
			}
		case "message_delta":
			if r := e.Delta.StopReason; r != "" {
				a.stop = anthropicStop(r)
			}
			e.Usage.apply(&counts, &a.usage)
		case "message_stop":
			return false, nil
		case "error": // an error event without its event name
			return false, anthropicError(m, data)
		}
		// content_block_stop, ping in data only, and event types added
		// later: nothing to do.
		return true, nil
	})
	switch {
	case err != nil:
		return m.streamErr(err)
	case !done:
		return m.cut("no message_stop")
	}
	return nil
}

// wholeInput is a tool_use input given whole in content_block_start, or ""
// for the empty object that input_json_delta events then fill.
func wholeInput(in json.RawMessage) string {
	s := strings.TrimSpace(string(in))
	if s == "null" || strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")) == "" {
		return ""
	}
	return s
}

// anthropicError is the error an error event reports, with the HTTP status
// the same error has outside a stream, so that it classifies alike.
func anthropicError(m *httpModel, data []byte) *Error {
	var e anthropicEvent
	json.Unmarshal(data, &e)
	msg := errorMessage(data)
	status, ok := anthropicStatus[e.Error.Type]
	if !ok && e.Error.Type != "" {
		msg = e.Error.Type + ": " + msg
	}
	return m.classify(status, msg)
}

// anthropicStatus is the HTTP status of each error type
// (https://docs.anthropic.com/en/api/errors); an unknown type gets 0, which
// classifies as a refused request.
var anthropicStatus = map[string]int{
	"invalid_request_error": 400,
	"authentication_error":  401,
	"billing_error":         402,
	"permission_error":      403,
	"not_found_error":       404,
	"conflict_error":        409,
	"request_too_large":     413,
	"rate_limit_error":      429,
	"api_error":             500,
	"timeout_error":         504,
	"overloaded_error":      529,
}

func anthropicStop(r string) string {
	switch r {
	case "end_turn":
		return "end"
	case "tool_use":
		return "tool_calls"
	case "max_tokens":
		return "max_tokens"
	}
	return r // stop_sequence, pause_turn, refusal, model_context_window_exceeded
}
