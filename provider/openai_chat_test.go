package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/tern-dev/tern/render"
)

func init() {
	wireCases = append(wireCases, wireCase{provider: "openai-chat", model: "gpt-4.1", base: "/v1", path: "/v1/chat/completions",
		header: "Authorization", headerValue: "Bearer " + testKey,
		errBody: func(status int, msg string) string {
			return fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error","param":null,"code":null}}`, msg)
		},
		stream: "@openai-chat/text.sse",
		cut:    `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"It is"},"finish_reason":null}]}` + "\n\n"})
}

func chatStep(t *testing.T, file string) (*Result, *deltas) {
	t.Helper()
	s := newStub(t, "/v1/chat/completions", reply{body: "@openai-chat/" + file})
	m, err := NewWith(s.settings("openai-chat", "gpt-4.1", "/v1"), fast)
	if err != nil {
		t.Fatal(err)
	}
	var d deltas
	res, err := m.Step(context.Background(), body(t, render.OpenAIChat, "gpt-4.1"), d.add)
	if err != nil {
		t.Fatal(err)
	}
	return res, &d
}

func TestOpenAIChatStreamsTextInDeltasAndEndsWithUsage(t *testing.T) {
	res, d := chatStep(t, "text.sse")
	if d.text(DeltaText) != "It is 18°C in Paris." || d.count(DeltaText) != 3 {
		t.Fatalf("deltas %+v", d.got)
	}
	want := `message {"content":[{"text":"It is 18°C in Paris.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"gpt-4.1","provider":"openai-chat","stop":"end","usage":{"cached_tokens":10,"input_tokens":42,"output_tokens":7}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if res.Stop != "end" || res.Usage.InputTokens != 42 {
		t.Fatalf("stop %q, usage %+v", res.Stop, res.Usage)
	}
}

func TestOpenAIChatAssemblesParallelCallsWhoseArgumentsArriveInPieces(t *testing.T) {
	res, d := chatStep(t, "tools.sse")
	want := `tool_call {"arguments":{"city":"Paris"},"call_id":"call_paris","name":"get_weather"}
tool_call {"arguments":{"city":"Rome"},"call_id":"call_rome","name":"get_weather"}
turn.usage {"host":"HOST","model":"gpt-4.1","provider":"openai-chat","stop":"tool_calls","usage":{"input_tokens":80,"output_tokens":40}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	if d.count(DeltaCall) != 2 || d.count(DeltaCallArgs) != 4 {
		t.Fatalf("deltas %+v", d.got)
	}
	rendersEverywhere(t, res)
}

func TestOpenAIChatKeepsACompatibleServersReasoningAsText(t *testing.T) {
	res, _ := chatStep(t, "reasoning.sse")
	want := `reasoning {"host":"HOST","model":"gpt-4.1","provider":"openai-chat","text":"The user asks about Paris."}
message {"content":[{"text":"Mild.","type":"text"}],"role":"assistant"}
turn.usage {"host":"HOST","model":"gpt-4.1","provider":"openai-chat","stop":"end","usage":{"input_tokens":12,"output_tokens":9,"reasoning_tokens":6}}
`
	if got := hostless(lines(res)); got != want {
		t.Fatalf("drafts\n%s\nwant\n%s", got, want)
	}
	rendersEverywhere(t, res)
}
