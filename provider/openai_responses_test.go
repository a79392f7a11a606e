package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tern-dev/tern/render"
)

// responsesCut is a stream cut short: text has begun, and neither
// response.completed nor response.incomplete came.
const responsesCut = `event: response.created
data: {"type":"response.created","response":{"id":"resp_cut","object":"response","created_at":1767225600,"status":"in_progress","error":null,"incomplete_details":null,"model":"gpt-4.1-2025-04-14","output":[],"usage":null},"sequence_number":0}

event: response.output_item.added
data: {"type":"response.output_item.added","item":{"id":"msg_cut","type":"message","status":"in_progress","content":[],"role":"assistant"},"output_index":0,"sequence_number":1}

event: response.output_text.delta
data: {"type":"response.output_text.delta","content_index":0,"delta":"It is","item_id":"msg_cut","logprobs":[],"obfuscation":"x1y2z3","output_index":0,"sequence_number":2}

`

func init() {
	wireCases = append(wireCases, wireCase{provider: "openai-responses", model: "gpt-4.1", base: "/v1", path: "/v1/responses",
		header: "Authorization", headerValue: "Bearer " + testKey,
		errBody: func(status int, msg string) string {
			typ, code := "invalid_request_error", "null"
			switch {
			case status == 401:
				code = `"invalid_api_key"`
			case status == 429:
				typ, code = "requests", `"rate_limit_exceeded"`
			case status >= 500:
				typ = "server_error"
			}
			return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":null,"code":%s}}`, msg, typ, code)
		},
		stream: "@openai-responses/text.sse",
		cut:    responsesCut})
}

// responsesStep takes a step of model against a stub answering replies.
func responsesStep(t *testing.T, model string, replies ...reply) (*Result, *deltas, Settings, *stub, error) {
	t.Helper()
	s := newStub(t, "/v1/responses", replies...)
	set := s.settings("openai-responses", model, "/v1")
	m, err := NewWith(set, fast)
	if err != nil {
		t.Fatal(err)
	}
	var d deltas
	res, err := m.Step(context.Background(), body(t, render.OpenAIResponses, model), d.add)
	return res, &d, set, s, err
}

// replay renders the step (with its results) for openai-responses at
// set's host, for model.
func replay(t *testing.T, res *Result, set Settings, model string) string {
	t.Helper()
	r, err := render.Render(render.Request{Events: signed(t, res), Agent: weather,
		Target: render.Target{Provider: render.OpenAIResponses, Model: model, Host: set.Host()}})
	if err != nil {
		t.Fatal(err)
	}
	return string(r.Body)
}

func TestOpenAIResponsesStreamsTextInDeltasAndEndsWithUsage(t *testing.T) {
	res, d, _, _, err := responsesStep(t, "gpt-4.1", reply{body: "@openai-responses/text.sse"})
	if err != nil {
		t.Fatal(err)
	}
	if d.text(DeltaText) != "It is 18°C in Paris." || d.count(DeltaText) != 7 || len(d.got) != 7 {
		t.Fatalf("deltas %+v", d.got)
	}
	want := `message {"content":[{"text":"It is 18°C in Paris.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"gpt-4.1","provider":"openai-responses","stop":"end","usage":{"cached_tokens":10,"input_tokens":42,"output_tokens":7}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if res.Stop != "end" || res.Usage != (Usage{InputTokens: 42, OutputTokens: 7, CachedTokens: 10}) {
		t.Fatalf("stop %q, usage %+v", res.Stop, res.Usage)
	}
	rendersEverywhere(t, res)
}

func TestOpenAIResponsesKeepsTheReasoningItemBeforeParallelCallsWhoseArgumentsArriveInPieces(t *testing.T) {
	res, d, set, _, err := responsesStep(t, "gpt-5", reply{body: "@openai-responses/reasoning_tools.sse"})
	if err != nil {
		t.Fatal(err)
	}
	want := `reasoning {"data":{"encrypted_content":"gAAAAABpdbYhTslPH39Oc9zCKo72bjavq0vLr-XuX6f6nNDOVl1gkH6R=","id":"rs_0ccfe1a2b3c4d5e6f70169b3197fec948191a5128b289bd3abd7","summary":[{"text":"**Checking the weather**\n\nThe user wants Paris and Rome.","type":"summary_text"},{"text":"I'll call get_weather for both at once.","type":"summary_text"}]},"host":"HOST","model":"gpt-5","provider":"openai-responses","text":"**Checking the weather**\n\nThe user wants Paris and Rome.\n\nI'll call get_weather for both at once."}
tool_call {"arguments":{"city":"Paris"},"call_id":"call_vTqMwYdzvdmoeNyNdQOqI1uY","name":"get_weather"}
tool_call {"arguments":{"city":"Rome"},"call_id":"call_Q2pLk8rTz0aXwYb3nCdE5fGh","name":"get_weather"}
turn.usage {"host":"HOST","model":"gpt-5","provider":"openai-responses","stop":"tool_calls","usage":{"input_tokens":80,"output_tokens":156,"reasoning_tokens":128}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if res.Stop != "tool_calls" || res.Usage.ReasoningTokens != 128 {
		t.Fatalf("stop %q, usage %+v", res.Stop, res.Usage)
	}
	// The summary streams as it comes (its two parts a blank line apart),
	// then each call, then its arguments piece by piece.
	if got := d.text(DeltaReasoning); got != "**Checking the weather**\n\nThe user wants Paris and Rome.\n\nI'll call get_weather for both at once." {
		t.Fatalf("reasoning deltas %q", got)
	}
	if d.count(DeltaReasoning) != 9 || d.count(DeltaCall) != 2 || d.count(DeltaCallArgs) != 8 || d.count(DeltaText) != 0 {
		t.Fatalf("deltas %+v", d.got)
	}
	var calls []Delta
	for _, x := range d.got {
		if x.Kind == DeltaCall {
			calls = append(calls, x)
		}
	}
	if calls[0] != (Delta{Kind: DeltaCall, Index: 0, ID: "call_vTqMwYdzvdmoeNyNdQOqI1uY", Name: "get_weather"}) ||
		calls[1] != (Delta{Kind: DeltaCall, Index: 1, ID: "call_Q2pLk8rTz0aXwYb3nCdE5fGh", Name: "get_weather"}) {
		t.Fatalf("calls %+v", calls)
	}
	rendersEverywhere(t, res)

	// Back to the same model at the same host, the reasoning item goes
	// before the calls it preceded, with the encrypted content of
	// output_item.done (not the one output_item.added announced).
	b := replay(t, res, set, "gpt-5")
	item := `{"type":"reasoning","id":"rs_0ccfe1a2b3c4d5e6f70169b3197fec948191a5128b289bd3abd7","summary":[{"text":"**Checking the weather**\n\nThe user wants Paris and Rome.","type":"summary_text"},{"text":"I'll call get_weather for both at once.","type":"summary_text"}],"encrypted_content":"gAAAAABpdbYhTslPH39Oc9zCKo72bjavq0vLr-XuX6f6nNDOVl1gkH6R="}`
	i, j := strings.Index(b, item), strings.Index(b, `"call_id":"call_vTqMwYdzvdmoeNyNdQOqI1uY"`)
	if i < 0 || j < i || strings.Contains(b, "gAAAAABpTU-v4x2") {
		t.Fatalf("replayed for gpt-5 at %s:\n%s\nwant the reasoning item %s before the first call", set.Host(), b, item)
	}
	// Another model gets no reasoning.
	if b := replay(t, res, set, "gpt-5-mini"); strings.Contains(b, "rs_") || strings.Contains(b, "encrypted_content\":\"gAAAA") {
		t.Fatalf("replayed for another model:\n%s", b)
	}
}

func TestOpenAIResponsesMakesEachReasoningItemItsOwnEvent(t *testing.T) {
	res, d, set, _, err := responsesStep(t, "gpt-5", reply{body: "@openai-responses/reasoning_twice.sse"})
	if err != nil {
		t.Fatal(err)
	}
	// The web search item between them is not tern's: skipped.
	want := `reasoning {"data":{"encrypted_content":"gAAAAABpZBUGXNKYcIB8msONj_h4Nq7IyC7TTwMLMoR23jCK=","id":"rs_0f1e2d3c4b5a69788796a5b4c3d2e1f0aa11bb22cc33dd44ee55","summary":[{"text":"Looking up today's weather.","type":"summary_text"}]},"host":"HOST","model":"gpt-5","provider":"openai-responses","text":"Looking up today's weather."}
reasoning {"data":{"encrypted_content":"gAAAAABpFbHeRNjecJVtJ9fgoe-GCyOtGCKUpm6TXU2Yde_D=","id":"rs_0f1e2d3c4b5a69788796a5b4c3d2e1f0ff66ee77dd88cc99bb00","summary":[{"text":"Found it: 18°C.","type":"summary_text"}]},"host":"HOST","model":"gpt-5","provider":"openai-responses","text":"Found it: 18°C."}
message {"content":[{"text":"It is 18°C in Paris.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"gpt-5","provider":"openai-responses","stop":"end","usage":{"cached_tokens":256,"input_tokens":310,"output_tokens":95,"reasoning_tokens":64}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if d.text(DeltaReasoning) != "Looking up today's weather.Found it: 18°C." || d.text(DeltaText) != "It is 18°C in Paris." {
		t.Fatalf("deltas %+v", d.got)
	}
	rendersEverywhere(t, res)
	b := replay(t, res, set, "gpt-5")
	i := strings.Index(b, `"id":"rs_0f1e2d3c4b5a69788796a5b4c3d2e1f0aa11bb22cc33dd44ee55"`)
	j := strings.Index(b, `"id":"rs_0f1e2d3c4b5a69788796a5b4c3d2e1f0ff66ee77dd88cc99bb00"`)
	k := strings.Index(b, `"role":"assistant"`)
	if i < 0 || j < i || k < j {
		t.Fatalf("replayed:\n%s\nwant both reasoning items, in order, before the answer", b)
	}
}

func TestOpenAIResponsesIncompleteAtMaxOutputTokensIsAWholeStep(t *testing.T) {
	res, d, set, _, err := responsesStep(t, "gpt-5", reply{body: "@openai-responses/incomplete.sse"})
	if err != nil {
		t.Fatal(err)
	}
	// The reasoning item has no summary (tern asks for none): data only.
	want := `reasoning {"data":{"encrypted_content":"gAAAAABpELNjP-BpXJ-JR0UTfFqzP_wWBaahOGNRy9FunH94JGAmgu5Z=","id":"rs_0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9","summary":[]},"host":"HOST","model":"gpt-5","provider":"openai-responses"}
message {"content":[{"text":"Paris is mild today, around","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"gpt-5","provider":"openai-responses","stop":"max_tokens","usage":{"input_tokens":30,"output_tokens":64,"reasoning_tokens":48}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if res.Stop != "max_tokens" || d.count(DeltaReasoning) != 0 || d.count(DeltaText) != 3 {
		t.Fatalf("stop %q, deltas %+v", res.Stop, d.got)
	}
	rendersEverywhere(t, res)
	if b := replay(t, res, set, "gpt-5"); !strings.Contains(b, `{"type":"reasoning","id":"rs_0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9","summary":[],"encrypted_content":"gAAAAABpELNjP-BpXJ-JR0UTfFqzP_wWBaahOGNRy9FunH94JGAmgu5Z="}`) {
		t.Fatalf("replayed:\n%s", b)
	}
}

// responsesStream is an SSE stream of the given data lines, each its own
// event named by its type.
func responsesStream(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		typ := e[len(`{"type":"`):]
		typ = typ[:strings.IndexByte(typ, '"')]
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, e)
	}
	return b.String()
}

const (
	evCreated = `{"type":"response.created","response":{"id":"resp_e","object":"response","created_at":1767225600,"status":"in_progress","error":null,"incomplete_details":null,"model":"gpt-4.1-2025-04-14","output":[],"usage":null},"sequence_number":0}`
	evAdded   = `{"type":"response.output_item.added","item":{"id":"msg_e","type":"message","status":"in_progress","content":[],"role":"assistant"},"output_index":0,"sequence_number":1}`
	evDelta   = `{"type":"response.output_text.delta","content_index":0,"delta":"It is","item_id":"msg_e","logprobs":[],"obfuscation":"a1b2c3d4e5","output_index":0,"sequence_number":2}`
)

func TestOpenAIResponsesSaysWhatWentWrongInTheStream(t *testing.T) {
	// A context-length failure as the API sends it mid-stream: the error
	// nested under "error", not flat as the SDK's ResponseErrorEvent has it.
	_, d, _, s, err := responsesStep(t, "gpt-4.1", reply{body: responsesStream(evCreated,
		`{"type":"error","error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again.","param":"input"},"sequence_number":1}`)})
	if !errors.Is(err, ErrContextLength) || s.requests() != 1 || !strings.Contains(err.Error(), "Your input exceeds") || len(d.got) != 0 {
		t.Errorf("error event, context length: %v after %d requests; want ErrContextLength quoting the API, at once", err, s.requests())
	}

	// The same by its code alone, in a failed response.
	_, _, _, _, err = responsesStep(t, "gpt-4.1", reply{body: responsesStream(evCreated,
		`{"type":"response.failed","response":{"id":"resp_e","object":"response","status":"failed","error":{"code":"context_length_exceeded","message":"Too long."},"incomplete_details":null,"output":[],"usage":null},"sequence_number":1}`)})
	if !errors.Is(err, ErrContextLength) {
		t.Errorf("response.failed, context_length_exceeded: %v; want ErrContextLength", err)
	}

	// A rate limit reported in the stream before anything streamed (flat,
	// as documented) is retried like a 429.
	res, d, _, s, err := responsesStep(t, "gpt-4.1",
		reply{body: responsesStream(evCreated,
			`{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached for gpt-4.1 on tokens per min (TPM). Please try again in 20ms.","param":null,"sequence_number":1}`)},
		reply{body: "@openai-responses/text.sse"})
	if err != nil || s.requests() != 2 || d.text(DeltaText) != "It is 18°C in Paris." || res.Stop != "end" {
		t.Errorf("a rate limit before the answer, then the answer: %v after %d requests; want the answer on the second", err, s.requests())
	}

	// A server error once text has streamed: the step is cut, not retried
	// (its start would stream again).
	_, _, _, s, err = responsesStep(t, "gpt-4.1", reply{body: responsesStream(evCreated, evAdded, evDelta,
		`{"type":"response.failed","response":{"id":"resp_e","object":"response","status":"failed","error":{"code":"server_error","message":"The server had an error while processing your request. Sorry about that!"},"incomplete_details":null,"output":[],"usage":null},"sequence_number":3}`)})
	if !errors.Is(err, ErrStreamCut) || s.requests() != 1 || !strings.Contains(err.Error(), "The server had an error") {
		t.Errorf("a server error after text: %v after %d requests; want ErrStreamCut quoting the API, at once", err, s.requests())
	}

	// Anything else the response fails with is refused, in the API's words.
	_, _, _, s, err = responsesStep(t, "gpt-4.1", reply{body: responsesStream(evCreated,
		`{"type":"response.failed","response":{"id":"resp_e","object":"response","status":"failed","error":{"code":"invalid_prompt","message":"Invalid prompt: your prompt was flagged."},"incomplete_details":null,"output":[],"usage":null},"sequence_number":1}`)})
	if !errors.Is(err, ErrBadRequest) || s.requests() != 1 || !strings.Contains(err.Error(), "your prompt was flagged") {
		t.Errorf("invalid prompt: %v after %d requests; want ErrBadRequest quoting the API", err, s.requests())
	}

	// A stream that ends cleanly without response.completed is cut.
	_, _, _, _, err = responsesStep(t, "gpt-4.1", reply{body: responsesStream(evCreated, evAdded, evDelta)})
	if !errors.Is(err, ErrStreamCut) || !strings.Contains(err.Error(), "response.completed") {
		t.Errorf("no response.completed: %v; want ErrStreamCut", err)
	}
}

// Two message items (a preamble, then the answer) are two messages, not
// one run-together text.
func TestOpenAIResponsesKeepsTwoMessagesApart(t *testing.T) {
	msg := func(i int, text string) []string {
		return []string{
			fmt.Sprintf(`{"type":"response.output_item.added","item":{"id":"msg_%d","type":"message","status":"in_progress","content":[],"role":"assistant"},"output_index":%d,"sequence_number":%d}`, i, i, 10*i+1),
			fmt.Sprintf(`{"type":"response.output_text.delta","item_id":"msg_%d","output_index":%d,"content_index":0,"delta":%q,"sequence_number":%d}`, i, i, text, 10*i+2),
		}
	}
	events := append([]string{evCreated}, msg(0, "Let me think.")...)
	events = append(events, msg(1, "It is mild.")...)
	events = append(events, `{"type":"response.completed","response":{"id":"resp_e","object":"response","status":"completed","model":"gpt-4.1","output":[],"usage":{"input_tokens":5,"output_tokens":6,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}},"sequence_number":99}`)
	res, _, _, _, err := responsesStep(t, "gpt-4.1", reply{body: responsesStream(events...)})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(lines(res), "message "); got != 2 {
		t.Fatalf("%d messages:\n%s", got, lines(res))
	}
}
