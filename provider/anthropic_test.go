package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tern-dev/tern/render"
)

const anthropicModel = "claude-sonnet-4-5"

func init() {
	wireCases = append(wireCases, wireCase{provider: "anthropic", model: anthropicModel, base: "", path: "/v1/messages",
		header: "x-api-key", headerValue: testKey,
		errBody: func(status int, msg string) string {
			return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`, anthropicErrorType(status), msg)
		},
		stream: "@anthropic/text.sse",
		cut: anthropicSSE(
			`{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 32, "output_tokens": 1}}}`,
			`{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}`,
			`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "It is"}}`)})
}

// anthropicErrorType is the error type Anthropic answers a status with.
func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

// anthropicSSE makes a stream of the given event data, each under the
// event name its "type" says, as the API sends them.
func anthropicSSE(data ...string) string {
	var b strings.Builder
	for _, d := range data {
		var e struct {
			Type string `json:"type"`
		}
		json.Unmarshal([]byte(d), &e)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", e.Type, d)
	}
	return b.String()
}

// The start and end of a stream, around its blocks.
const (
	anthropicStart       = `{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}}}`
	anthropicMessageStop = `{"type": "message_stop"}`
)

func anthropicDelta(stop string, output int) string {
	return fmt.Sprintf(`{"type": "message_delta", "delta": {"stop_reason": %q, "stop_sequence": null}, "usage": {"output_tokens": %d}}`, stop, output)
}

// anthropicRun takes one step against a stub that answers with rep.
func anthropicRun(t *testing.T, opt Options, rep reply) (*Result, *deltas, *stub, Settings, error) {
	t.Helper()
	s := newStub(t, "/v1/messages", rep)
	set := s.settings("anthropic", anthropicModel, "")
	m, err := NewWith(set, opt)
	if err != nil {
		t.Fatal(err)
	}
	var d deltas
	res, err := m.Step(context.Background(), body(t, render.Anthropic, anthropicModel), d.add)
	return res, &d, s, set, err
}

func anthropicStep(t *testing.T, rep reply) (*Result, *deltas, *stub, Settings) {
	t.Helper()
	res, d, s, set, err := anthropicRun(t, fast, rep)
	if err != nil {
		t.Fatal(err)
	}
	return res, d, s, set
}

// replayed renders the step back for the model and host that wrote it,
// thinking on, and returns the assistant message's content blocks.
func replayed(t *testing.T, res *Result, set Settings) ([]map[string]any, string) {
	t.Helper()
	r, err := render.Render(render.Request{Events: signed(t, res), Agent: weather,
		Target: render.Target{Provider: render.Anthropic, Model: set.Model, Host: set.Host(), Thinking: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range r.Notes {
		t.Errorf("render: %s", n)
	}
	var b struct {
		Thinking *struct {
			Type string `json:"type"`
		} `json:"thinking"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatal(err)
	}
	if b.Thinking == nil || b.Thinking.Type != "enabled" {
		t.Fatalf("thinking is not on in %s", r.Body)
	}
	if len(b.Messages) < 2 || b.Messages[1].Role != "assistant" {
		t.Fatalf("no assistant message second in %s", r.Body)
	}
	return b.Messages[1].Content, string(r.Body)
}

func TestAnthropicStreamsTextInDeltasWithItsUsage(t *testing.T) {
	res, d, s, _ := anthropicStep(t, reply{body: "@anthropic/text.sse"})
	if d.text(DeltaText) != "It is 18°C in Paris." || d.count(DeltaText) != 4 || len(d.got) != 4 {
		t.Fatalf("deltas %+v", d.got)
	}
	want := `message {"content":[{"text":"It is 18°C in Paris.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"claude-sonnet-4-5","provider":"anthropic","stop":"end","usage":{"cached_tokens":10,"input_tokens":42,"output_tokens":9}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if res.Stop != "end" || res.Usage != (Usage{InputTokens: 42, OutputTokens: 9, CachedTokens: 10}) {
		t.Fatalf("stop %q, usage %+v", res.Stop, res.Usage)
	}
	h := s.headers[0]
	if h.Get("anthropic-version") != "2023-06-01" || h.Get("x-api-key") != testKey || h.Get("Authorization") != "" {
		t.Fatalf("headers %v", h)
	}
	rendersEverywhere(t, res)
}

func TestAnthropicPostsToTheOfficialBaseURLByDefault(t *testing.T) {
	if got := (anthropicWire{}).endpoint(Settings{Provider: "anthropic"}); got != "https://api.anthropic.com/v1/messages" {
		t.Fatalf("endpoint %s", got)
	}
	if got := (anthropicWire{}).endpoint(Settings{Provider: "anthropic", BaseURL: "https://gateway.example/anthropic/"}); got != "https://gateway.example/anthropic/v1/messages" {
		t.Fatalf("endpoint %s", got)
	}
}

// The thinking and signature of thinking_tools.sse, whole.
const (
	fixtureThinking  = "The user wants the \"current\" weather in Paris & Rome. I have get_weather <city>; the two calls don't depend on each other —\nso I'll make both at once."
	fixtureSignature = "EqQBCkgIBBABGAIiQDv+0HyqQvR3n0Y3mGq2rZk8i6z1o/6kZ2yH8Tn4c2QwE9x5P1sYfLr7bJm+Vd0uXo3eKp4Wq8Ng2t1hC5aJfR0SDK9wZ3lVbG3xYp8sUhoM5nT2Rw7xQk1cYd4bIjBn0Qe3rS/8uVw6x+YzAb2cDe4fGh5iJk6lMn7oPq8rSt9uVw0xYz1AbC2dE3fG4hIKhMEgN1pQr2sTu3vWx4yZa5bCd6eFg7hIj8kLm9nOp0qRs1tUv2wXy3zAB4C=="
)

func TestAnthropicKeepsThinkingWithItsSignatureThenTextThenParallelCalls(t *testing.T) {
	res, d, _, _ := anthropicStep(t, reply{body: "@anthropic/thinking_tools.sse"})
	want := `reasoning {"data":{"signature":"` + fixtureSignature + `"},"host":"HOST","model":"claude-sonnet-4-5","provider":"anthropic","text":"The user wants the \"current\" weather in Paris & Rome. I have get_weather <city>; the two calls don't depend on each other —\nso I'll make both at once."}
message {"content":[{"text":"I'll check both cities.","type":"text"}],"role":"assistant"}
tool_call {"arguments":{"city":"Paris"},"call_id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather"}
tool_call {"arguments":{"city":"Rome"},"call_id":"toolu_01Bq8AfdRyk4ktgRLN4AsSaz","name":"get_weather"}
turn.usage {"host":"HOST","model":"claude-sonnet-4-5","provider":"anthropic","stop":"tool_calls","usage":{"input_tokens":488,"output_tokens":187,"reasoning_tokens":61}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if d.text(DeltaReasoning) != fixtureThinking || d.count(DeltaReasoning) != 3 {
		t.Fatalf("reasoning deltas %+v", d.got)
	}
	if d.text(DeltaText) != "I'll check both cities." || d.count(DeltaText) != 2 {
		t.Fatalf("text deltas %+v", d.got)
	}
	var calls []Delta
	for _, x := range d.got {
		if x.Kind == DeltaCall || x.Kind == DeltaCallArgs {
			calls = append(calls, x)
		}
	}
	wantCalls := []Delta{
		{Kind: DeltaCall, Index: 0, ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather"},
		{Kind: DeltaCallArgs, Index: 0, Text: `{"ci`},
		{Kind: DeltaCallArgs, Index: 0, Text: `ty": "Par`},
		{Kind: DeltaCallArgs, Index: 0, Text: `is"}`},
		{Kind: DeltaCall, Index: 1, ID: "toolu_01Bq8AfdRyk4ktgRLN4AsSaz", Name: "get_weather"},
		{Kind: DeltaCallArgs, Index: 1, Text: `{"city": "Ro`},
		{Kind: DeltaCallArgs, Index: 1, Text: `me"}`},
	}
	if fmt.Sprint(calls) != fmt.Sprint(wantCalls) {
		t.Fatalf("call deltas\n%+v\nwant\n%+v", calls, wantCalls)
	}
	if res.Stop != "tool_calls" || res.Usage != (Usage{InputTokens: 488, OutputTokens: 187, ReasoningTokens: 61}) {
		t.Fatalf("stop %q, usage %+v", res.Stop, res.Usage)
	}
	rendersEverywhere(t, res)
}

func TestAnthropicThinkingGoesBackByteExactToTheModelAndHostThatWroteIt(t *testing.T) {
	res, _, _, set := anthropicStep(t, reply{body: "@anthropic/thinking_tools.sse"})
	content, raw := replayed(t, res, set)
	if len(content) != 4 {
		t.Fatalf("assistant content %v", content)
	}
	first := content[0]
	if len(first) != 3 || first["type"] != "thinking" || first["thinking"] != fixtureThinking || first["signature"] != fixtureSignature {
		t.Fatalf("first block %q\nwant the thinking %q with the signature %q", first, fixtureThinking, fixtureSignature)
	}
	if !strings.Contains(raw, `"signature":"`+fixtureSignature+`"`) {
		t.Fatalf("the signature is not in the body byte for byte:\n%s", raw)
	}
	if content[1]["type"] != "text" || content[2]["type"] != "tool_use" || content[3]["type"] != "tool_use" {
		t.Fatalf("assistant content %v", content)
	}
}

func TestAnthropicKeepsARedactedThinkingBlockAsOpaqueData(t *testing.T) {
	const data = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB8URj2pLmN3kJxTmG/4uA=="
	res, d, _, set := anthropicStep(t, reply{body: "@anthropic/redacted.sse"})
	want := `reasoning {"data":{"redacted":"` + data + `"},"host":"HOST","model":"claude-sonnet-4-5","provider":"anthropic"}
message {"content":[{"text":"Mild, 18°C.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"claude-sonnet-4-5","provider":"anthropic","stop":"end","usage":{"input_tokens":61,"output_tokens":40}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if d.count(DeltaReasoning) != 0 || d.text(DeltaText) != "Mild, 18°C." {
		t.Fatalf("deltas %+v", d.got)
	}
	rendersEverywhere(t, res)
	content, _ := replayed(t, res, set)
	if len(content) != 2 || len(content[0]) != 2 || content[0]["type"] != "redacted_thinking" || content[0]["data"] != data {
		t.Fatalf("assistant content %v", content)
	}
}

func TestAnthropicErrorEventIsTheErrorItsTypeNames(t *testing.T) {
	res, d, s, _, err := anthropicRun(t, Options{Retries: -1}, reply{body: "@anthropic/overloaded.sse"})
	var e *Error
	if res != nil || !errors.As(err, &e) || !errors.Is(err, ErrUnavailable) || e.Status != 529 || e.Message != "Overloaded" {
		t.Fatalf("an overloaded_error mid-stream: %v (%+v); want ErrUnavailable, 529, Overloaded", err, e)
	}
	if d.text(DeltaText) != "It is" || s.requests() != 1 {
		t.Fatalf("deltas %+v after %d requests", d.got, s.requests())
	}
	if !strings.Contains(err.Error(), "anthropic at 127.0.0.1:") || !strings.Contains(err.Error(), "unavailable (529)") {
		t.Fatalf("error %v", err)
	}

	for _, c := range []struct {
		event  string
		kind   error
		status int
		msg    string
	}{
		{`{"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}}`, ErrRateLimited, 429, "Number of request tokens has exceeded your per-minute rate limit"},
		{`{"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}`, ErrUnavailable, 500, "Internal server error"},
		{`{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 215000 tokens > 200000 maximum"}}`, ErrContextLength, 400, "prompt is too long: 215000 tokens > 200000 maximum"},
		{`{"type": "error", "error": {"type": "permission_error", "message": "Your API key does not have permission to use the specified resource."}}`, ErrAuth, 403, "Your API key does not have permission to use the specified resource."},
		{`{"type": "error", "error": {"type": "brand_new_error", "message": "Something new"}}`, ErrBadRequest, 0, "brand_new_error: Something new"},
	} {
		_, _, _, _, err := anthropicRun(t, Options{Retries: -1}, reply{body: anthropicSSE(anthropicStart, c.event)})
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, c.kind) || e.Status != c.status || e.Message != c.msg {
			t.Errorf("%s: %v (%+v); want %v, %d, %q", c.event, err, e, c.kind, c.status, c.msg)
		}
	}

	// The error in data only, without its event name, is still the error.
	stream := "event: message_start\ndata: " + anthropicStart + "\n\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n"
	_, _, _, _, err = anthropicRun(t, Options{Retries: -1}, reply{body: stream})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("an unnamed error event: %v; want ErrUnavailable", err)
	}
}

func TestAnthropicStepIsWholeOnlyAtMessageStop(t *testing.T) {
	text := []string{anthropicStart,
		`{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}`,
		`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi."}}`,
		`{"type": "content_block_stop", "index": 0}`,
		anthropicDelta("end_turn", 3)}
	for name, stream := range map[string]string{
		"ends after message_delta":  anthropicSSE(text...),
		"ends inside a block":       anthropicSSE(text[:3]...),
		"an event that is not JSON": anthropicSSE(text[:3]...) + "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"ind\n\n" + anthropicSSE(text[3:]...) + anthropicSSE(anthropicMessageStop),
	} {
		_, _, _, _, err := anthropicRun(t, fast, reply{body: stream})
		if !errors.Is(err, ErrStreamCut) {
			t.Errorf("%s: %v; want ErrStreamCut", name, err)
		}
	}
}

func TestAnthropicToolInputGivenWholeAtStartIsTheCallsArguments(t *testing.T) {
	res, d, _, _ := anthropicStep(t, reply{body: anthropicSSE(anthropicStart,
		`{"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}}}`,
		`{"type": "content_block_stop", "index": 0}`,
		`{"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {}}}`,
		`{"type": "content_block_stop", "index": 1}`,
		anthropicDelta("tool_use", 30), anthropicMessageStop)})
	want := `tool_call {"arguments":{"city":"Paris"},"call_id":"toolu_01A","name":"get_weather"}
tool_call {"arguments":{},"call_id":"toolu_01B","name":"get_weather"}
turn.usage {"host":"HOST","model":"claude-sonnet-4-5","provider":"anthropic","stop":"tool_calls","usage":{"input_tokens":20,"output_tokens":30}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if d.count(DeltaCall) != 2 || d.count(DeltaCallArgs) != 1 || d.text(DeltaCallArgs) != `{"city": "Paris"}` {
		t.Fatalf("deltas %+v", d.got)
	}
	rendersEverywhere(t, res)
}

func TestAnthropicSignatureInPiecesAndTwoThinkingBlocksStayApart(t *testing.T) {
	res, _, _, _ := anthropicStep(t, reply{body: anthropicSSE(anthropicStart,
		`{"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}`,
		`{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "One."}}`,
		`{"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "Ab+/"}}`,
		`{"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "Cd=="}}`,
		`{"type": "content_block_stop", "index": 0}`,
		`{"type": "content_block_start", "index": 1, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}`,
		`{"type": "content_block_delta", "index": 1, "delta": {"type": "signature_delta", "signature": "Ef=="}}`,
		`{"type": "content_block_stop", "index": 1}`,
		`{"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}`,
		`{"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Two."}}`,
		`{"type": "content_block_stop", "index": 2}`,
		anthropicDelta("max_tokens", 50), anthropicMessageStop)})
	want := `reasoning {"data":{"signature":"Ab+/Cd=="},"host":"HOST","model":"claude-sonnet-4-5","provider":"anthropic","text":"One."}
reasoning {"data":{"signature":"Ef=="},"host":"HOST","model":"claude-sonnet-4-5","provider":"anthropic"}
message {"content":[{"text":"Two.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"claude-sonnet-4-5","provider":"anthropic","stop":"max_tokens","usage":{"input_tokens":20,"output_tokens":50}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	rendersEverywhere(t, res)
}

func TestAnthropicStopReasons(t *testing.T) {
	for reason, want := range map[string]string{"end_turn": "end", "tool_use": "tool_calls", "max_tokens": "max_tokens",
		"stop_sequence": "stop_sequence", "refusal": "refusal", "pause_turn": "pause_turn"} {
		res, _, _, _ := anthropicStep(t, reply{body: anthropicSSE(anthropicStart,
			`{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}`,
			`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi."}}`,
			`{"type": "content_block_stop", "index": 0}`,
			anthropicDelta(reason, 2), anthropicMessageStop)})
		if res.Stop != want {
			t.Errorf("stop_reason %s: stop %q, want %q", reason, res.Stop, want)
		}
	}
}

// A gateway that adds the key itself still gets the API version.
func TestAnthropicSendsItsVersionWithoutAKey(t *testing.T) {
	s := newStub(t, "/v1/messages", reply{body: "@anthropic/text.sse"})
	st := s.settings("anthropic", "claude-sonnet-4-5", "")
	st.Key, st.KeySecret = "", ""
	m, err := NewWith(st, fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(context.Background(), body(t, render.Anthropic, "claude-sonnet-4-5"), nil); err != nil {
		t.Fatal(err)
	}
	if h := s.headers[0]; h.Get("anthropic-version") != "2023-06-01" || h.Get("x-api-key") != "" {
		t.Fatalf("headers %v", h)
	}
}
