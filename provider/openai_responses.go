package provider

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/openai/openai-go/v3/packages/ssestream"
)

// responsesWire is OpenAI Responses: POST {base}/responses, an SSE stream
// of typed events (the SDK's Response*Event types; each data carries its
// type, a sequence_number and, for an item's events, its output_index)
// that ends with response.completed, response.incomplete or
// response.failed, with no [DONE].
//
// Output items stream one after the other, each from
// response.output_item.added to response.output_item.done: a message's
// text as response.output_text.delta; a function call's arguments as
// response.function_call_arguments.delta, keyed by output_index, under
// the call_id (call_…) the journal keeps, not the item's id (fc_…); a
// reasoning item's summary as response.reasoning_summary_text.delta (its
// parts separated by a blank line), and its id, encrypted_content and
// summary, which render replays, taken from output_item.done: the item
// that output_item.added announces already carries an encrypted_content,
// but one made before the reasoning, not the one to send back.
type responsesWire struct{}

func (responsesWire) endpoint(s Settings) string { return s.baseURL() + "/responses" }

func (responsesWire) auth(h http.Header, key string) { chatWire{}.auth(h, key) }

func (responsesWire) message(body []byte) string { return errorMessage(body) }

// responsesEvent is what tern reads of the events it handles: the fields
// of the SDK's Response*Event types, flattened. Items are decoded only for
// the types that matter (other item types have fields of other shapes).
type responsesEvent struct {
	Type         string            `json:"type"`
	OutputIndex  int               `json:"output_index"`
	ContentIndex int               `json:"content_index"`
	SummaryIndex int               `json:"summary_index"`
	Delta        string            `json:"delta"`
	Item         json.RawMessage   `json:"item"`
	Response     responsesResponse `json:"response"`
	// The error event: flat as ResponseErrorEvent documents it, or nested
	// under "error" as the API sends it.
	Code    any             `json:"code"`
	Message string          `json:"message"`
	Error   json.RawMessage `json:"error"`
}

// responsesItem is a function_call or reasoning output item.
type responsesItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        string          `json:"arguments"`
	EncryptedContent string          `json:"encrypted_content"`
	Summary          json.RawMessage `json:"summary"`
	Content          []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// responsesResponse is what tern reads of the response object of
// response.completed, response.incomplete and response.failed.
type responsesResponse struct {
	Usage *struct {
		InputTokens        int `json:"input_tokens"`
		OutputTokens       int `json:"output_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *responsesError `json:"error"`
}

type responsesError struct {
	Type    string `json:"type"`
	Code    any    `json:"code"`
	Message string `json:"message"`
}

// responsesReader follows one stream into its assembler.
type responsesReader struct {
	m *httpModel
	a *assembler
	// The reasoning item the assembler's last item holds: its output
	// index (-1 for none), the part its text came from last, and whether
	// it has text.
	rs     int
	rsPart string
	rsText bool
	args   map[int]bool // calls (by output index) whose arguments streamed
	begun  bool         // whether a delta went out
	done   bool         // response.completed or response.incomplete arrived
}

func (responsesWire) read(m *httpModel, body io.Reader, a *assembler) error {
	r := &responsesReader{m: m, a: a, rs: -1, args: map[int]bool{}}
	_, err := sse(body, func(ev ssestream.Event) (bool, error) {
		data := trimNewline(ev.Data)
		if string(data) == "[DONE]" {
			return false, nil
		}
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(data, &head); err != nil {
			return false, m.cut("an event that is not JSON: " + err.Error())
		}
		if head.Type == "" {
			head.Type = ev.Type
		}
		switch head.Type {
		case "response.output_text.delta", "response.refusal.delta",
			"response.reasoning_summary_text.delta", "response.reasoning_text.delta",
			"response.function_call_arguments.delta",
			"response.output_item.added", "response.output_item.done",
			"response.completed", "response.incomplete", "response.failed", "error":
		default:
			return true, nil // lifecycle events, and what tern does not use
		}
		var e responsesEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return false, m.cut(head.Type + " event that tern cannot read: " + err.Error())
		}
		return r.event(head.Type, &e)
	})
	switch {
	case err != nil:
		return m.streamErr(err)
	case !r.done:
		return m.cut("no response.completed")
	}
	return nil
}

// event handles one event; false once the response is over.
func (r *responsesReader) event(typ string, e *responsesEvent) (bool, error) {
	a := r.a
	switch typ {
	case "response.output_text.delta", "response.refusal.delta":
		r.text(e.Delta)
	case "response.reasoning_summary_text.delta":
		r.reasoningText(e.OutputIndex, "s"+strconv.Itoa(e.SummaryIndex), e.Delta)
	case "response.reasoning_text.delta":
		r.reasoningText(e.OutputIndex, "c"+strconv.Itoa(e.ContentIndex), e.Delta)
	case "response.function_call_arguments.delta":
		if e.Delta != "" && a.callArgs(e.OutputIndex, e.Delta) {
			r.args[e.OutputIndex] = true
		}
	case "response.output_item.added", "response.output_item.done":
		var it responsesItem
		if len(e.Item) == 0 || json.Unmarshal(e.Item, &struct {
			Type *string `json:"type"`
		}{&it.Type}) != nil {
			return false, r.m.cut(typ + " without an item")
		}
		if it.Type == "message" && typ == "response.output_item.added" {
			r.a.newText() // two message items (a preamble, then the answer) are two messages
		}
		if it.Type != "function_call" && it.Type != "reasoning" {
			return true, nil // a message (its text streams) or a built-in tool's item
		}
		if err := json.Unmarshal(e.Item, &it); err != nil {
			return false, r.m.cut(typ + " with a " + it.Type + " item that tern cannot read: " + err.Error())
		}
		r.item(e.OutputIndex, &it, typ == "response.output_item.done")
	case "response.completed":
		r.usage(&e.Response)
		r.done = true
		return false, nil
	case "response.incomplete":
		r.usage(&e.Response)
		a.stop = "incomplete"
		if d := e.Response.IncompleteDetails; d != nil && d.Reason != "" {
			a.stop = d.Reason
			if d.Reason == "max_output_tokens" {
				a.stop = "max_tokens"
			}
		}
		r.done = true
		return false, nil
	case "response.failed":
		var code, msg string
		if f := e.Response.Error; f != nil {
			code, msg = codeString(f.Code), f.Message
			if code == "" {
				code = f.Type
			}
		}
		return false, r.failure(code, msg)
	case "error":
		code, msg := codeString(e.Code), e.Message
		var nested responsesError
		var s string
		switch {
		case json.Unmarshal(e.Error, &nested) == nil:
			if c := codeString(nested.Code); c != "" {
				code = c
			} else if code == "" {
				code = nested.Type
			}
			if nested.Message != "" {
				msg = nested.Message
			}
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			msg = s
		}
		return false, r.failure(code, msg)
	}
	return true, nil
}

// text appends to the assistant's message.
func (r *responsesReader) text(s string) {
	if s == "" {
		return
	}
	r.a.text(s)
	r.rs, r.begun = -1, true
}

// reasoningItem makes the assembler's last item the reasoning item at
// output index i, starting it if it is not.
func (r *responsesReader) reasoningItem(i int) {
	if r.rs == i && r.a.last(itemReasoning) != nil {
		return
	}
	r.a.newReasoning()
	r.rs, r.rsPart, r.rsText = i, "", false
}

// reasoningText appends s, from part (a summary part, a content part), to
// the reasoning item at output index i.
func (r *responsesReader) reasoningText(i int, part, s string) {
	if s == "" {
		return
	}
	r.reasoningItem(i)
	if r.rsText && part != r.rsPart {
		r.a.reasoning("\n\n")
	}
	r.a.reasoning(s)
	r.rsPart, r.rsText, r.begun = part, true, true
}

// item handles a function call or a reasoning item announced (added) or
// finished (done) at output index i.
func (r *responsesReader) item(i int, it *responsesItem, done bool) {
	a := r.a
	if it.Type == "function_call" {
		if !a.hasCall(i) {
			a.call(i, it.CallID, it.Name)
			r.rs, r.begun = -1, true
		}
		// A server that sends the arguments whole rather than in deltas.
		if !r.args[i] && it.Arguments != "" {
			a.callArgs(i, it.Arguments)
			r.args[i] = true
		}
		return
	}
	r.reasoningItem(i)
	if !done {
		return
	}
	if !r.rsText {
		// A server that sends the summary whole rather than in deltas.
		var parts []struct {
			Text string `json:"text"`
		}
		json.Unmarshal(it.Summary, &parts)
		for k, p := range parts {
			r.reasoningText(i, "s"+strconv.Itoa(k), p.Text)
		}
		if !r.rsText {
			for k, p := range it.Content {
				r.reasoningText(i, "c"+strconv.Itoa(k), p.Text)
			}
		}
	}
	if it.ID != "" {
		a.reasoningData("id", it.ID)
	}
	if it.EncryptedContent != "" {
		a.reasoningData("encrypted_content", it.EncryptedContent)
	}
	if len(it.Summary) > 0 && it.Summary[0] == '[' {
		a.reasoningData("summary", it.Summary)
	}
}

func (r *responsesReader) usage(resp *responsesResponse) {
	if u := resp.Usage; u != nil {
		r.a.usage = Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			ReasoningTokens: u.OutputTokensDetails.ReasoningTokens, CachedTokens: u.InputTokensDetails.CachedTokens}
	}
}

// failure is the error of an error event or a failed response. A rate
// limit or a server error that comes before anything streamed is one the
// step retries; after, the step is cut (retrying would stream its start
// again).
func (r *responsesReader) failure(code, msg string) *Error {
	if msg == "" {
		msg = code
	}
	if msg == "" {
		msg = "the response failed, with no message"
	}
	e := r.m.classify(0, msg)
	var transient error
	switch code {
	case "context_length_exceeded":
		e.Kind = ErrContextLength
	case "rate_limit_exceeded", "too_many_requests":
		transient = ErrRateLimited
	case "server_error", "internal_error", "server_is_overloaded", "service_unavailable", "overloaded":
		transient = ErrUnavailable
	}
	switch {
	case transient == nil || e.Kind == ErrContextLength:
	case !r.begun:
		e.Kind = transient
	default:
		e.Kind = ErrStreamCut
	}
	return e
}

// codeString is an error code as a string (codes are strings or null;
// some servers send numbers).
func codeString(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case float64:
		return strconv.FormatFloat(c, 'f', -1, 64)
	}
	return ""
}
