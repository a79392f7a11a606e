package provider

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tern-dev/tern/render"
)

func init() {
	wireCases = append(wireCases, wireCase{provider: "ollama", model: "llama3.2", base: "", path: "/api/chat",
		header: "Authorization", headerValue: "Bearer " + testKey,
		errBody: func(status int, msg string) string {
			b, _ := json.Marshal(map[string]string{"error": msg})
			return string(b)
		},
		stream: "@ollama/text.ndjson",
		cut: `{"model":"llama3.2","created_at":"2026-01-05T10:00:00.1Z","message":{"role":"assistant","content":"It is"},"done":false}` + "\n" +
			`{"model":"llama3.2","created_at":"2026-01-05T10:00:00.2Z","message":{"role":"assistant","content":" 18°C"},"done":false}` + "\n"})
}

var ollamaNDJSON = map[string]string{"Content-Type": "application/x-ndjson"}

// ollamaStep runs one step against a stub answering with the file (or,
// for a body that does not start with "{", that text) as Ollama does.
func ollamaStep(t *testing.T, model, answer string) (*Result, *deltas, *stub, error) {
	t.Helper()
	if !strings.HasPrefix(answer, "{") {
		answer = "@ollama/" + answer
	}
	s := newStub(t, "/api/chat", reply{header: ollamaNDJSON, body: answer})
	m, err := NewWith(s.settings("ollama", model, ""), fast)
	if err != nil {
		t.Fatal(err)
	}
	var d deltas
	res, err := m.Step(context.Background(), body(t, render.Ollama, model), d.add)
	return res, &d, s, err
}

func ollamaOK(t *testing.T, model, answer string) (*Result, *deltas) {
	t.Helper()
	res, d, _, err := ollamaStep(t, model, answer)
	if err != nil {
		t.Fatal(err)
	}
	return res, d
}

func TestOllamaStreamsTextInDeltasAndEndsWithUsage(t *testing.T) {
	res, d := ollamaOK(t, "llama3.2", "text.ndjson")
	if d.text(DeltaText) != "It is 18°C in Paris." || d.count(DeltaText) != 3 {
		t.Fatalf("deltas %+v", d.got)
	}
	want := `message {"content":[{"text":"It is 18°C in Paris.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"llama3.2","provider":"ollama","stop":"end","usage":{"input_tokens":42,"output_tokens":7}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if res.Stop != "end" || res.Usage != (Usage{InputTokens: 42, OutputTokens: 7}) {
		t.Fatalf("stop %q, usage %+v", res.Stop, res.Usage)
	}
	rendersEverywhere(t, res)
}

func TestOllamaSendsNoKeyWithoutOne(t *testing.T) {
	s := newStub(t, "/api/chat", reply{header: ollamaNDJSON, body: "@ollama/text.ndjson"})
	set := s.settings("ollama", "llama3.2", "")
	set.Key, set.KeySecret = "", ""
	m, err := NewWith(set, fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(context.Background(), body(t, render.Ollama, "llama3.2"), nil); err != nil {
		t.Fatal(err)
	}
	if h := s.headers[0].Get("Authorization"); h != "" {
		t.Fatalf("Authorization %q sent without a key", h)
	}
	if got := (ollamaWire{}).endpoint(Settings{Provider: "ollama", Model: "m"}); got != "http://127.0.0.1:11434/api/chat" {
		t.Fatalf("default endpoint %s", got)
	}
}

func TestOllamaKeepsThinkingAsReasoningText(t *testing.T) {
	res, d := ollamaOK(t, "qwen3:8b", "thinking.ndjson")
	want := `reasoning {"host":"HOST","model":"qwen3:8b","provider":"ollama","text":"The user asks about Paris."}
message {"content":[{"text":"Mild.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"qwen3:8b","provider":"ollama","stop":"end","usage":{"input_tokens":12,"output_tokens":9}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if d.text(DeltaReasoning) != "The user asks about Paris." || d.count(DeltaReasoning) != 2 {
		t.Fatalf("deltas %+v", d.got)
	}
	rendersEverywhere(t, res)
	// Back to the same model and host, the thinking goes with the answer.
	msg := ollamaReplay(t, res, render.Target{Provider: render.Ollama, Model: "qwen3:8b", Host: draftHost(t, res)})
	if msg["thinking"] != "The user asks about Paris." || msg["content"] != "Mild." {
		t.Fatalf("replayed %v", msg)
	}
}

func TestOllamaAssemblesParallelToolCalls(t *testing.T) {
	res, d := ollamaOK(t, "qwen3:8b", "tools.ndjson")
	want := `reasoning {"host":"HOST","model":"qwen3:8b","provider":"ollama","text":"Two cities: two calls."}
tool_call {"arguments":{"city":"Paris"},"call_id":"call_k3x9a2mq","name":"get_weather"}
tool_call {"arguments":{"city":"Rome"},"call_id":"call_p0z7c4rt","name":"get_weather"}
turn.usage {"host":"HOST","model":"qwen3:8b","provider":"ollama","stop":"tool_calls","usage":{"input_tokens":80,"output_tokens":40}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if d.count(DeltaCall) != 2 || d.count(DeltaCallArgs) != 2 || d.got[4].Index != 1 || d.got[4].Text != `{"city":"Rome"}` {
		t.Fatalf("deltas %+v", d.got)
	}
	if res.Stop != "tool_calls" {
		t.Fatalf("stop %q", res.Stop)
	}
	rendersEverywhere(t, res)
	msg := ollamaReplay(t, res, render.Target{Provider: render.Ollama, Model: "qwen3:8b", Host: draftHost(t, res)})
	if b, _ := json.Marshal(msg["tool_calls"]); string(b) != `[{"function":{"arguments":{"city":"Paris"},"index":0,"name":"get_weather"},"id":"call_k3x9a2mq"},{"function":{"arguments":{"city":"Rome"},"index":1,"name":"get_weather"},"id":"call_p0z7c4rt"}]` {
		t.Fatalf("replayed %s", b)
	}
}

func TestOllamaKeysCallsByOrderNotByTheirIndex(t *testing.T) {
	res, d := ollamaOK(t, "gpt-oss:20b", "tools-noid.ndjson")
	ids := draftCallIDs(t, res)
	want := `tool_call {"arguments":{"city":"Paris"},"call_id":"` + ids[0] + `","name":"get_weather"}
tool_call {"arguments":{},"call_id":"` + ids[1] + `","name":"get_weather"}
turn.usage {"host":"HOST","model":"gpt-oss:20b","provider":"ollama","stop":"tool_calls","usage":{"input_tokens":80,"output_tokens":40}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if ids[0] == ids[1] || !strings.HasPrefix(ids[0], "call_") {
		t.Fatalf("made-up ids %v", ids)
	}
	if d.count(DeltaCall) != 2 || d.got[2].Index != 1 {
		t.Fatalf("deltas %+v", d.got)
	}
	rendersEverywhere(t, res)
}

func TestOllamaSaysWhyAStepStopped(t *testing.T) {
	res, _ := ollamaOK(t, "llama3.2", "max-tokens.ndjson")
	if res.Stop != "max_tokens" || !strings.Contains(lines(res), `"text":"It is 18°C and sunny"`) {
		t.Fatalf("stop %q, drafts\n%s", res.Stop, lines(res))
	}
	// A newer server says how much of the prompt came from its cache.
	res, _ = ollamaOK(t, "llama3.2", `{"model":"llama3.2","created_at":"2026-01-05T10:00:00Z","message":{"role":"assistant","content":"Hi."},"done":true,"done_reason":"stop","prompt_eval_count":42,"prompt_eval_cached_count":30,"eval_count":2}`+"\n")
	if res.Usage != (Usage{InputTokens: 42, OutputTokens: 2, CachedTokens: 30}) || res.Stop != "end" {
		t.Fatalf("stop %q, usage %+v", res.Stop, res.Usage)
	}
}

func TestOllamaStreamErrors(t *testing.T) {
	line := `{"model":"llama3.2","created_at":"2026-01-05T10:00:00Z","message":{"role":"assistant","content":"It is"},"done":false}` + "\n"
	for _, c := range []struct {
		name, stream string
		kind         error
		says         string
	}{
		{"an error line", "error-midstream.ndjson", ErrBadRequest, "an error was encountered while running the model: unexpected EOF"},
		{"a context error line", line + `{"error":"the input length exceeds the context length"}` + "\n", ErrContextLength, "exceeds the context length"},
		{"no done line", line, ErrStreamCut, "no line with done: true"},
		{"half a line", line + `{"model":"llama3.2","message":{"role":"assi`, ErrStreamCut, "unexpected EOF"},
		{"not JSON", line + "data: [DONE]\n", ErrStreamCut, "not JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, s, err := ollamaStep(t, "llama3.2", c.stream)
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("%v; want %v saying %q", err, c.kind, c.says)
			}
			if s.requests() != 1 {
				t.Fatalf("%d requests", s.requests())
			}
		})
	}
}

func TestOllamaReadsItsErrorBodies(t *testing.T) {
	jsonCT := map[string]string{"Content-Type": "application/json"}
	s := newStub(t, "/api/chat", reply{status: 404, header: jsonCT, body: "@ollama/error-model.json"})
	m, _ := NewWith(s.settings("ollama", "llama9", ""), fast)
	_, err := m.Step(context.Background(), body(t, render.Ollama, "llama9"), nil)
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), `(404): model "llama9" not found, try pulling it first`) {
		t.Fatalf("%v", err)
	}
	s = newStub(t, "/api/chat", reply{status: 401, header: jsonCT, body: `{"error":"unauthorized"}`})
	set := s.settings("ollama", "gpt-oss:120b", "")
	m, _ = NewWith(set, fast)
	_, err = m.Step(context.Background(), body(t, render.Ollama, "gpt-oss:120b"), nil)
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("%v", err)
	}
	if got := (ollamaWire{}).message([]byte(`{"error":"llama runner process has terminated: exit status 2"}`)); got != "llama runner process has terminated: exit status 2" {
		t.Fatalf("message %q", got)
	}
}

// ollamaReplay renders the step back for target and returns the
// assistant's message.
func ollamaReplay(t *testing.T, res *Result, target render.Target) map[string]any {
	t.Helper()
	r, err := render.Render(render.Request{Events: signed(t, res), Agent: weather, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatal(err)
	}
	for _, m := range b.Messages {
		if m["role"] == "assistant" {
			return m
		}
	}
	t.Fatalf("no assistant message in %s", r.Body)
	return nil
}
