package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"
)

// geminiWire is the Gemini API's streamGenerateContent: POST
// {base}/v1beta/models/{model}:streamGenerateContent?alt=sse with the key
// in x-goog-api-key (never in the URL); an SSE stream of
// GenerateContentResponse objects in genai's JSON names, each holding
// more parts of candidate 0, the last one its finishReason. Usage comes in
// every chunk's usageMetadata, whole in the last.
//
// Parts are read in order: a thought part (thought: true) is reasoning, a
// text part text, a functionCall part a whole call (args an object; an id
// only on some models, else the assembler makes one up). A thoughtSignature
// on a part is kept as a reasoning event {"thought_signature": …} just
// before the part's own event, which is where render puts it back (on the
// first part of the event after the reasoning event); a thought part's
// signature stays on its own reasoning. (Gemini 3 ends a text answer with
// an empty text part holding the signature: it is kept, last in the step,
// and render, which writes no empty part, does not send it back.) Output
// tokens are candidates plus thoughts, as the other APIs count them. The
// stream is whole once candidate 0 has a finishReason and the stream
// ended cleanly.
type geminiWire struct{}

func (geminiWire) endpoint(s Settings) string {
	model := strings.TrimPrefix(s.Model, "models/") // the SDKs accept both spellings
	return s.baseURL() + "/v1beta/models/" + url.PathEscape(model) + ":streamGenerateContent?alt=sse"
}

func (geminiWire) auth(h http.Header, key string) {
	if key != "" {
		h.Set("x-goog-api-key", key)
	}
}

// message reads Google's {"error":{"code","message","status"}}, which some
// endpoints wrap in a JSON array ([{"error":…}], as streamGenerateContent
// without alt=sse answers).
func (geminiWire) message(body []byte) string {
	b := bytes.TrimSpace(body)
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) == nil && len(arr) > 0 {
			b = arr[0]
		}
	}
	return errorMessage(b)
}

// refine reads what Google's error details say beyond the status: a bad
// key is 400 INVALID_ARGUMENT with reason API_KEY_INVALID (not 401), and a
// 429 says how long to wait in a RetryInfo detail ("37s"), not in a
// Retry-After header.
func (geminiWire) refine(e *Error, body []byte) {
	b := bytes.TrimSpace(body)
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) == nil && len(arr) > 0 {
			b = arr[0]
		}
	}
	var v struct {
		Error struct {
			Status  string `json:"status"`
			Details []struct {
				Type       string `json:"@type"`
				Reason     string `json:"reason"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &v) != nil {
		return
	}
	if v.Error.Status == "UNAUTHENTICATED" || v.Error.Status == "PERMISSION_DENIED" {
		e.Kind = ErrAuth
	}
	for _, d := range v.Error.Details {
		switch {
		case d.Reason == "API_KEY_INVALID":
			e.Kind = ErrAuth
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo") && d.RetryDelay != "":
			if w, err := time.ParseDuration(d.RetryDelay); err == nil && w >= 0 {
				e.wait = w
			}
		}
	}
}

type geminiChunk struct {
	Candidates []struct {
		Index   int `json:"index"`
		Content *struct {
			Parts []geminiPart `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason        string `json:"blockReason"`
		BlockReasonMessage string `json:"blockReasonMessage"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        int `json:"promptTokenCount"`
		CandidatesTokenCount    int `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
		CachedContentTokenCount int `json:"cachedContentTokenCount"`
		ToolUsePromptTokenCount int `json:"toolUsePromptTokenCount"`
	} `json:"usageMetadata"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

type geminiPart struct {
	Text             string `json:"text"`
	Thought          bool   `json:"thought"`
	ThoughtSignature string `json:"thoughtSignature"` // genai's []byte: base64, kept as sent
	FunctionCall     *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
}

func (geminiWire) read(m *httpModel, body io.Reader, a *assembler) error {
	finished := false
	calls := 0
	_, err := sse(body, func(ev ssestream.Event) (bool, error) {
		data := trimNewline(ev.Data)
		var c geminiChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return false, m.cut("a chunk that is not JSON: " + err.Error())
		}
		if e := c.Error; e != nil {
			msg := e.Message
			if msg == "" {
				msg = errorMessage(data)
			}
			return false, geminiStreamError(m, e.Code, e.Status, msg)
		}
		if f := c.PromptFeedback; f != nil && f.BlockReason != "" && len(c.Candidates) == 0 {
			msg := "the prompt was blocked (" + f.BlockReason + ")"
			if f.BlockReasonMessage != "" {
				msg += ": " + f.BlockReasonMessage
			}
			return false, m.classify(0, msg)
		}
		for _, cand := range c.Candidates {
			if cand.Index != 0 {
				continue // tern asks for one candidate
			}
			if cand.Content != nil {
				for _, p := range cand.Content.Parts {
					geminiAdd(a, p, &calls)
				}
			}
			if r := cand.FinishReason; r != "" && r != "FINISH_REASON_UNSPECIFIED" {
				finished = true
				a.stop = geminiStop(r)
			}
		}
		if u := c.UsageMetadata; u != nil {
			a.usage = Usage{InputTokens: u.PromptTokenCount + u.ToolUsePromptTokenCount,
				OutputTokens:    u.CandidatesTokenCount + u.ThoughtsTokenCount,
				ReasoningTokens: u.ThoughtsTokenCount, CachedTokens: u.CachedContentTokenCount}
		}
		return true, nil
	})
	switch {
	case err != nil:
		return m.streamErr(err)
	case !finished:
		return m.cut("no finishReason")
	}
	return nil
}

// geminiAdd adds one part of candidate 0 to the step; calls counts the
// step's function calls (each arrives whole, so each is its own key).
func geminiAdd(a *assembler, p geminiPart, calls *int) {
	if p.Thought {
		if it := a.last(itemReasoning); it != nil && it.data != nil {
			a.newReasoning() // a signature closes the thoughts it signs
		}
		a.reasoning(p.Text)
		if p.ThoughtSignature != "" {
			a.reasoningData("thought_signature", p.ThoughtSignature)
		}
		return
	}
	if p.ThoughtSignature != "" {
		// Render writes a reasoning event's signature on the first part of
		// the next event: the signature goes just before this part's event,
		// on the thoughts that precede it if they have none of their own.
		if it := a.last(itemReasoning); it == nil || it.data != nil {
			a.newReasoning()
		}
		a.reasoningData("thought_signature", p.ThoughtSignature)
	}
	if fc := p.FunctionCall; fc != nil {
		k := *calls
		*calls++
		a.call(k, fc.ID, fc.Name)
		if args := bytes.TrimSpace(fc.Args); len(args) > 0 && string(args) != "null" {
			a.callArgs(k, string(args))
		}
		return
	}
	a.text(p.Text)
}

// geminiStop is the step's stop reason for a finishReason: empty for STOP,
// so that the assembler says "end" or "tool_calls".
func geminiStop(r string) string {
	switch r {
	case "STOP":
		return ""
	case "MAX_TOKENS":
		return "max_tokens"
	}
	return r
}

// geminiStreamError is the error Gemini reports in the middle of its
// stream: as its status says, except that a rate limit or a server error
// is a cut stream, which Step does not send again (the answer has begun
// to stream).
func geminiStreamError(m *httpModel, status int, name, msg string) *Error {
	e := m.classify(status, msg)
	if e.Kind == ErrRateLimited || e.Kind == ErrUnavailable {
		what := fmt.Sprint(status)
		if name != "" {
			what += " " + name
		}
		return m.cut("the API reported " + what + " mid-stream: " + msg)
	}
	return e
}
