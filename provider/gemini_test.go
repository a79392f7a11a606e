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

const geminiPath = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"

func init() {
	wireCases = append(wireCases, wireCase{provider: "gemini", model: "gemini-2.5-flash", base: "", path: geminiPath,
		header: "x-goog-api-key", headerValue: testKey,
		errBody: func(status int, msg string) string {
			return fmt.Sprintf(`{"error":{"code":%d,"message":%q,"status":"INVALID_ARGUMENT"}}`, status, msg)
		},
		stream: "@gemini/text.sse",
		cut:    `data: {"candidates": [{"content": {"parts": [{"text": "It is"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 42,"totalTokenCount": 42},"modelVersion": "gemini-2.5-flash"}` + "\r\n\r\n"})
}

// geminiStep runs one step against a stub answering with file (or, for a
// body that does not start with "@", that text) and returns what it got.
func geminiStep(t *testing.T, model, answer string) (*Result, *deltas, *stub, error) {
	t.Helper()
	if !strings.HasPrefix(answer, "@") && !strings.HasPrefix(answer, "data:") {
		answer = "@gemini/" + answer
	}
	s := newStub(t, "/v1beta/models/"+model+":streamGenerateContent", reply{body: answer})
	m, err := NewWith(s.settings("gemini", model, ""), fast)
	if err != nil {
		t.Fatal(err)
	}
	var d deltas
	res, err := m.Step(context.Background(), body(t, render.Gemini, model), d.add)
	return res, &d, s, err
}

func geminiOK(t *testing.T, model, answer string) (*Result, *deltas, *stub) {
	t.Helper()
	res, d, s, err := geminiStep(t, model, answer)
	if err != nil {
		t.Fatal(err)
	}
	return res, d, s
}

func TestGeminiStreamsTextInDeltasAndEndsWithUsage(t *testing.T) {
	res, d, s := geminiOK(t, "gemini-2.5-flash", "text.sse")
	if d.text(DeltaText) != "It is 18°C in Paris." || d.count(DeltaText) != 3 {
		t.Fatalf("deltas %+v", d.got)
	}
	want := `message {"content":[{"text":"It is 18°C in Paris.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"gemini-2.5-flash","provider":"gemini","stop":"end","usage":{"cached_tokens":10,"input_tokens":42,"output_tokens":7}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if res.Stop != "end" || res.Usage != (Usage{InputTokens: 42, OutputTokens: 7, CachedTokens: 10}) {
		t.Fatalf("stop %q, usage %+v", res.Stop, res.Usage)
	}
	if u := s.urls[0]; u != geminiPath+"?alt=sse" {
		t.Fatalf("posted to %s, want %s?alt=sse", u, geminiPath)
	}
	rendersEverywhere(t, res)
}

func TestGeminiEscapesTheModelAsOnePathSegment(t *testing.T) {
	w := geminiWire{}
	for model, want := range map[string]string{
		"gemini-2.5-flash":        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		"models/gemini-2.5-flash": "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		"my model/v2?x":           "https://generativelanguage.googleapis.com/v1beta/models/my%20model%2Fv2%3Fx:streamGenerateContent?alt=sse",
	} {
		if got := w.endpoint(Settings{Provider: "gemini", Model: model}); got != want {
			t.Errorf("%q: %s, want %s", model, got, want)
		}
	}
	if got := w.endpoint(Settings{Provider: "gemini", Model: "m", BaseURL: "https://proxy.example/gemini/"}); got != "https://proxy.example/gemini/v1beta/models/m:streamGenerateContent?alt=sse" {
		t.Errorf("with a base URL: %s", got)
	}
}

func TestGeminiKeepsThoughtsAndTheSignatureOfTheFirstAnswerPart(t *testing.T) {
	res, d, _ := geminiOK(t, "gemini-2.5-flash", "thinking.sse")
	want := `reasoning {"data":{"thought_signature":"CiSgCygegJsHl+/irz2oJbxNsAsKp+laaQmBeygRL5tW7iqVeZkkLn8xmU+JPxGMLvZCOizRH3Agvobq"},"host":"HOST","model":"gemini-2.5-flash","provider":"gemini","text":"**Considering the weather**\n\nThe user asks about Paris. No tool is needed for a general answer."}
message {"content":[{"text":"Mild in spring.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"gemini-2.5-flash","provider":"gemini","stop":"end","usage":{"input_tokens":12,"output_tokens":34,"reasoning_tokens":30}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if d.count(DeltaReasoning) != 2 || d.count(DeltaText) != 2 {
		t.Fatalf("deltas %+v", d.got)
	}
	rendersEverywhere(t, res)
	parts := geminiReplay(t, res, "gemini-2.5-flash")
	if len(parts) != 1 || parts[0]["text"] != "Mild in spring." || parts[0]["thoughtSignature"] != "CiSgCygegJsHl+/irz2oJbxNsAsKp+laaQmBeygRL5tW7iqVeZkkLn8xmU+JPxGMLvZCOizRH3Agvobq" {
		t.Fatalf("replayed %v; want the answer with its signature", parts)
	}
}

func TestGeminiKeepsAThoughtPartsOwnSignatureOnItsReasoning(t *testing.T) {
	res, _, _ := geminiOK(t, "gemini-2.5-flash", "thought-signed.sse")
	want := `reasoning {"data":{"thought_signature":"CiS+PEJQqyNZYc0m632LmQqxg0EPcA8LtvAh2HGzjIM/1ncbdZpv8sBtj5eEOz6Wp9fkqPXJ"},"host":"HOST","model":"gemini-2.5-flash","provider":"gemini","text":"Paris in spring is mild."}
message {"content":[{"text":"Mild.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"gemini-2.5-flash","provider":"gemini","stop":"end","usage":{"input_tokens":12,"output_tokens":22,"reasoning_tokens":20}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	rendersEverywhere(t, res)
	// Render sends no thought parts back: the signature goes on the next part.
	parts := geminiReplay(t, res, "gemini-2.5-flash")
	if len(parts) != 1 || parts[0]["thoughtSignature"] != "CiS+PEJQqyNZYc0m632LmQqxg0EPcA8LtvAh2HGzjIM/1ncbdZpv8sBtj5eEOz6Wp9fkqPXJ" {
		t.Fatalf("replayed %v", parts)
	}
}

func TestGeminiKeepsASignatureOnATrailingEmptyPartWithoutReplayingIt(t *testing.T) {
	res, d, _ := geminiOK(t, "gemini-3-pro-preview", "signature-last.sse")
	want := `message {"content":[{"text":"Hello! How can I help you today?","type":"text"}],"role":"assistant"}
reasoning {"data":{"thought_signature":"CiTGHjPTnT7dcBvYr8iGAgSob6v+Xt18cgR5aBGzteRCAHLs12RwWGJQUhowzy5b"},"host":"HOST","model":"gemini-3-pro-preview","provider":"gemini"}
turn.usage {"host":"HOST","model":"gemini-3-pro-preview","provider":"gemini","stop":"end","usage":{"input_tokens":8,"output_tokens":129,"reasoning_tokens":120}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if d.count(DeltaText) != 2 || d.count(DeltaReasoning) != 0 {
		t.Fatalf("deltas %+v", d.got)
	}
	rendersEverywhere(t, res)
	// Render writes no empty part, so the signature has no part to go on
	// (genai's Chat leaves such a chunk out of its history too).
	parts := geminiReplay(t, res, "gemini-3-pro-preview")
	if len(parts) != 1 || parts[0]["thoughtSignature"] != nil {
		t.Fatalf("replayed %v", parts)
	}
}

func TestGeminiAssemblesParallelCallsFromOneChunkWithTheSignatureOnTheFirst(t *testing.T) {
	res, d, _ := geminiOK(t, "gemini-3-pro-preview", "tools.sse")
	got := hostless(lines(res))
	ids := draftCallIDs(t, res)
	want := `reasoning {"data":{"thought_signature":"CiR/fZn/IMDv8m8tCbBmcVh9NoE12G0wCoHV2MM4/H98IjgvZ5Xa/8MV3agRByGiCThW1DGmdtJ18f59oWWLEFYUkW9xehC2"},"host":"HOST","model":"gemini-3-pro-preview","provider":"gemini"}
tool_call {"arguments":{"city":"Paris"},"call_id":"` + ids[0] + `","name":"get_weather"}
tool_call {"arguments":{"city":"Rome"},"call_id":"` + ids[1] + `","name":"get_weather"}
turn.usage {"host":"HOST","model":"gemini-3-pro-preview","provider":"gemini","stop":"tool_calls","usage":{"input_tokens":80,"output_tokens":135,"reasoning_tokens":95}}
`
	if got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if !strings.HasPrefix(ids[0], "call_") || ids[0] == ids[1] {
		t.Fatalf("made-up ids %v", ids)
	}
	if d.count(DeltaCall) != 2 || d.count(DeltaCallArgs) != 2 || d.got[0].ID != ids[0] || d.got[2].Index != 1 {
		t.Fatalf("deltas %+v", d.got)
	}
	if res.Stop != "tool_calls" {
		t.Fatalf("stop %q", res.Stop)
	}
	rendersEverywhere(t, res)
	parts := geminiReplay(t, res, "gemini-3-pro-preview")
	if len(parts) != 2 || parts[0]["thoughtSignature"] != "CiR/fZn/IMDv8m8tCbBmcVh9NoE12G0wCoHV2MM4/H98IjgvZ5Xa/8MV3agRByGiCThW1DGmdtJ18f59oWWLEFYUkW9xehC2" || parts[1]["thoughtSignature"] != nil {
		t.Fatalf("replayed %v; want the signature on the first call only", parts)
	}
	if fc, _ := parts[1]["functionCall"].(map[string]any); fc["name"] != "get_weather" || fmt.Sprint(fc["args"]) != "map[city:Rome]" {
		t.Fatalf("replayed %v", parts)
	}
}

func TestGeminiAssemblesCallsFromConsecutiveChunksKeepingTheirIDs(t *testing.T) {
	res, d, _ := geminiOK(t, "gemini-2.5-flash", "tools-split.sse")
	want := `reasoning {"data":{"thought_signature":"CiSzNq1Izr1syPsXNIoL3nkvxbO90Rb9kT3y2GOXP0bdOoe17rcpm/L+Xp66hdRxW6aU+CI1pT0bPw2oXMWBPMkj"},"host":"HOST","model":"gemini-2.5-flash","provider":"gemini","text":"I need the weather in both cities."}
tool_call {"arguments":{"city":"Paris"},"call_id":"fc_paris01","name":"get_weather"}
tool_call {"arguments":{"city":"Rome","units":"metric"},"call_id":"fc_rome002","name":"get_weather"}
turn.usage {"host":"HOST","model":"gemini-2.5-flash","provider":"gemini","stop":"tool_calls","usage":{"input_tokens":80,"output_tokens":86,"reasoning_tokens":50}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if d.text(DeltaCallArgs) != `{"city": "Paris"}{"city": "Rome","units": "metric"}` || d.count(DeltaText) != 0 {
		t.Fatalf("deltas %+v", d.got)
	}
	rendersEverywhere(t, res)
	parts := geminiReplay(t, res, "gemini-2.5-flash")
	if len(parts) != 2 || parts[0]["thoughtSignature"] != "CiSzNq1Izr1syPsXNIoL3nkvxbO90Rb9kT3y2GOXP0bdOoe17rcpm/L+Xp66hdRxW6aU+CI1pT0bPw2oXMWBPMkj" {
		t.Fatalf("replayed %v", parts)
	}
	if fc, _ := parts[0]["functionCall"].(map[string]any); fc["id"] != "fc_paris01" {
		t.Fatalf("replayed %v", parts)
	}
}

func TestGeminiPutsASignatureInTheMiddleOfTheTextBackOnItsPart(t *testing.T) {
	const sig = "CiQBAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4fICEiIyQ="
	stream := geminiSSE(
		`{"candidates":[{"content":{"parts":[{"text":"Let me check."}],"role":"model"},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":" Paris","thoughtSignature":"`+sig+`"},{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}],"role":"model"},"index":0}]}`,
		`{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":9,"totalTokenCount":14}}`)
	res, _, _ := geminiOK(t, "gemini-3-flash-preview", stream)
	ids := draftCallIDs(t, res)
	want := `message {"content":[{"text":"Let me check.","type":"text"}],"role":"assistant"}
reasoning {"data":{"thought_signature":"` + sig + `"},"host":"HOST","model":"gemini-3-flash-preview","provider":"gemini"}
message {"content":[{"text":" Paris","type":"text"}],"role":"assistant"}
tool_call {"arguments":{"city":"Paris"},"call_id":"` + ids[0] + `","name":"get_weather"}
turn.usage {"host":"HOST","model":"gemini-3-flash-preview","provider":"gemini","stop":"tool_calls","usage":{"input_tokens":5,"output_tokens":9}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	rendersEverywhere(t, res)
	parts := geminiReplay(t, res, "gemini-3-flash-preview")
	if len(parts) != 3 || parts[0]["thoughtSignature"] != nil || parts[1]["text"] != " Paris" || parts[1]["thoughtSignature"] != sig {
		t.Fatalf("replayed %v; want the signature on the second part", parts)
	}
	// The call has no signature of its own and is not the step's first
	// output, but it is its first call: render gives it the sentinel.
	if parts[2]["thoughtSignature"] == nil {
		t.Fatalf("replayed %v", parts)
	}
	// To another model, or another host, no signature goes back.
	for _, p := range geminiReplayTo(t, res, render.Target{Provider: render.Gemini, Model: "gemini-2.5-pro", Host: draftHost(t, res)}) {
		if s, ok := p["thoughtSignature"]; ok && s != "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I=" {
			t.Fatalf("a signature went to another model: %v", p)
		}
	}
}

func TestGeminiSaysWhyAStepStopped(t *testing.T) {
	res, _, _ := geminiOK(t, "gemini-2.5-flash", "max-tokens.sse")
	if res.Stop != "max_tokens" || !strings.Contains(lines(res), `"text":"It is 18°C and sunny"`) {
		t.Fatalf("stop %q, drafts\n%s", res.Stop, lines(res))
	}
	res, _, _ = geminiOK(t, "gemini-2.5-flash", geminiSSE(`{"candidates":[{"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}`))
	if res.Stop != "SAFETY" || len(res.Drafts) != 1 {
		t.Fatalf("stop %q, drafts\n%s", res.Stop, lines(res))
	}
}

func TestGeminiStreamErrors(t *testing.T) {
	chunk := `{"candidates":[{"content":{"parts":[{"text":"It is"}],"role":"model"},"index":0}]}`
	for _, c := range []struct {
		name, stream string
		kind         error
		says         string
	}{
		{"no finishReason", geminiSSE(chunk), ErrStreamCut, "no finishReason"},
		{"overloaded mid-stream", geminiSSE(chunk, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`), ErrStreamCut, "503 UNAVAILABLE mid-stream: The model is overloaded"},
		{"refused mid-stream", geminiSSE(chunk, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`), ErrContextLength, "1048576"},
		{"a prompt blocked", geminiSSE(`{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash"}`), ErrBadRequest, "the prompt was blocked (PROHIBITED_CONTENT)"},
		{"not JSON", geminiSSE(chunk, `[DONE]`), ErrStreamCut, "not JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, s, err := geminiStep(t, "gemini-2.5-flash", c.stream)
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("%v; want %v saying %q", err, c.kind, c.says)
			}
			if s.requests() != 1 {
				t.Fatalf("%d requests: an error after the stream began must not be retried", s.requests())
			}
		})
	}
	// Cut after the finishReason: the stream did not end cleanly.
	s := newStub(t, geminiPath, reply{body: "@gemini/max-tokens.sse", cut: true})
	m, _ := NewWith(s.settings("gemini", "gemini-2.5-flash", ""), fast)
	if _, err := m.Step(context.Background(), body(t, render.Gemini, "gemini-2.5-flash"), nil); !errors.Is(err, ErrStreamCut) || s.requests() != 1 {
		t.Fatalf("cut after the last event: %v after %d requests; want ErrStreamCut at once", err, s.requests())
	}
}

func TestGeminiReadsItsErrorBodies(t *testing.T) {
	jsonCT := map[string]string{"Content-Type": "application/json"}
	s := newStub(t, geminiPath, reply{status: 400, header: jsonCT, body: "@gemini/error-key.json"})
	m, _ := NewWith(s.settings("gemini", "gemini-2.5-flash", ""), fast)
	_, err := m.Step(context.Background(), body(t, render.Gemini, "gemini-2.5-flash"), nil)
	if err == nil || !strings.Contains(err.Error(), "(400): API key not valid. Please pass a valid API key.") {
		t.Fatalf("%v; want Google's message", err)
	}

	s = newStub(t, geminiPath, reply{status: 429, header: jsonCT, body: "@gemini/error-quota.json"})
	m, _ = NewWith(s.settings("gemini", "gemini-2.5-flash", ""), Options{Retries: -1})
	_, err = m.Step(context.Background(), body(t, render.Gemini, "gemini-2.5-flash"), nil)
	if !errors.Is(err, ErrRateLimited) || !strings.Contains(err.Error(), "You exceeded your current quota") {
		t.Fatalf("%v; want ErrRateLimited with the message inside the array", err)
	}

	w := geminiWire{}
	for body, want := range map[string]string{
		`{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta.","status":"NOT_FOUND"}}`: "models/gemini-9 is not found for API version v1beta.",
		`[{"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}]`:                         "Internal error encountered.",
		` [ {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}} ] `:               "The model is overloaded.",
		`<html>502 Bad Gateway</html>`: "<html>502 Bad Gateway</html>",
		`[]`:                           "[]",
	} {
		if got := w.message([]byte(body)); got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}

// geminiSSE makes an SSE stream of data lines, as Google sends them.
func geminiSSE(data ...string) string {
	var b strings.Builder
	for _, d := range data {
		b.WriteString("data: " + d + "\r\n\r\n")
	}
	return b.String()
}

// draftCallIDs are the call ids of a step's tool_call drafts, in order.
func draftCallIDs(t *testing.T, res *Result) []string {
	t.Helper()
	var ids []string
	for _, d := range res.Drafts {
		if d.Type != "tool_call" {
			continue
		}
		var c struct {
			CallID string `json:"call_id"`
		}
		if err := json.Unmarshal(d.Body, &c); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.CallID)
	}
	return ids
}

// draftHost is the host a step's drafts record.
func draftHost(t *testing.T, res *Result) string {
	t.Helper()
	var u struct {
		Host string `json:"host"`
	}
	if err := json.Unmarshal(res.Drafts[len(res.Drafts)-1].Body, &u); err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// geminiReplay renders the step back for Gemini, to the same model and
// host, and returns the parts of the model's content.
func geminiReplay(t *testing.T, res *Result, model string) []map[string]any {
	t.Helper()
	return geminiReplayTo(t, res, render.Target{Provider: render.Gemini, Model: model, Host: draftHost(t, res)})
}

func geminiReplayTo(t *testing.T, res *Result, target render.Target) []map[string]any {
	t.Helper()
	r, err := render.Render(render.Request{Events: signed(t, res), Agent: weather, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Contents []struct {
			Role  string           `json:"role"`
			Parts []map[string]any `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatal(err)
	}
	var parts []map[string]any
	for _, c := range b.Contents {
		if c.Role == "model" {
			parts = append(parts, c.Parts...)
		}
	}
	return parts
}

// Google answers a bad key with 400 API_KEY_INVALID, and says how long to
// wait in the body: tern still names the secret, and waits as asked.
func TestGeminiBadKeyAndRetryDelayInTheBody(t *testing.T) {
	json := map[string]string{"Content-Type": "application/json"}
	badKey := `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`
	s := newStub(t, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", reply{status: 400, header: json, body: badKey})
	m, err := NewWith(s.settings("gemini", "gemini-2.5-flash", ""), fast)
	if err != nil {
		t.Fatal(err)
	}
	b := body(t, render.Gemini, "gemini-2.5-flash")
	if _, err := m.Step(context.Background(), b, nil); !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "tern secret set TEST_KEY") {
		t.Fatalf("a bad key: %v; want ErrAuth naming the secret", err)
	}
	slow := `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3600s"}]}}`
	s = newStub(t, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", reply{status: 429, header: json, body: slow})
	m, _ = NewWith(s.settings("gemini", "gemini-2.5-flash", ""), fast)
	if _, err := m.Step(context.Background(), b, nil); !errors.Is(err, ErrRateLimited) || s.requests() != 1 || !strings.Contains(err.Error(), "1h0m0s") {
		t.Fatalf("a 429 asking for an hour in its body: %v after %d requests; want ErrRateLimited at once, saying how long", err, s.requests())
	}
}
