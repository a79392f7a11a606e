package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tern-dev/tern/capsule"
)

// memBlobs is an in-memory Blobs.
type memBlobs map[string][]byte

func (m memBlobs) Blob(cid string) ([]byte, error) {
	b, ok := m[cid]
	if !ok {
		return nil, fmt.Errorf("blob %s not found", cid)
	}
	return b, nil
}

// put stores data and returns its CID.
func (m memBlobs) put(data []byte) string {
	sum := sha256.Sum256(data)
	c := capsule.BlobCID(hex.EncodeToString(sum[:]))
	m[c] = data
	return c
}

var (
	testBlobs = memBlobs{}
	// A 1x1 PNG and a one-page PDF, small enough for golden files.
	pngBytes, _ = hex.DecodeString("89504e470d0a1a0a0000000d4948445200000001000000010806000000" +
		"1f15c4890000000d49444154789c6360f8cf00000301010018dd8db00000000049454e44ae426082")
	pdfBytes  = []byte("%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")
	pngCID    = testBlobs.put(pngBytes)
	pdfCID    = testBlobs.put(pdfBytes)
	notesCID  = testBlobs.put([]byte("meeting notes:\n- ship render\n"))
	binCID    = testBlobs.put([]byte{0, 1, 2, 3, 0xff})
	absentCID = capsule.BlobCID(strings.Repeat("ab", 32))
)

// models are the model names the catalogue renders for.
var models = map[Provider]string{
	OpenAIChat:      "gpt-4.1",
	OpenAIResponses: "gpt-5",
	Anthropic:       "claude-sonnet-4-5",
	Gemini:          "gemini-3-pro-preview",
	Ollama:          "qwen3",
}

func targetFor(p Provider) Target { return Target{Provider: p, Model: models[p]} }

// other is a provider that is not p.
func other(p Provider) Provider {
	if p == Anthropic {
		return OpenAIResponses
	}
	return Anthropic
}

// reasoningFrom is a reasoning event as provider p's adapter records it,
// with a marker n in every opaque field so that tests can see where it went.
func reasoningFrom(p Provider, model string, n int) ev {
	host := DefaultHost(p)
	text := fmt.Sprintf("thought %d of %s", n, p)
	var data string
	switch p {
	case OpenAIResponses:
		data = fmt.Sprintf(`{"id":"rs_%d","encrypted_content":"enc-%s-%d","summary":[{"type":"summary_text","text":%q}]}`, n, p, n, text)
	case Anthropic:
		data = fmt.Sprintf(`{"signature":"sig-%s-%d"}`, p, n)
	case Gemini:
		data = fmt.Sprintf(`{"thought_signature":%q}`, base64Of(fmt.Sprintf("sig-%s-%d", p, n)))
	default:
		data = `{}`
	}
	return thinking(string(p), model, host, text, data)
}

func base64Of(s string) string {
	b, _ := json.Marshal([]byte(s))
	return strings.Trim(string(b), `"`)
}

func image(role, text, cid, mediaType string) ev {
	t, _ := json.Marshal(text)
	return ev{"message", fmt.Sprintf(`{"role":%q,"content":[{"type":"text","text":%s},{"type":"image","cid":%q,"media_type":%q}]}`, role, t, cid, mediaType)}
}

// conversation is one entry of the golden catalogue: events built for a
// target (reasoning depends on it) and a window. The agent is weatherAgent.
type conversation struct {
	name   string
	window int
	build  func(t Target) []ev
}

var catalogue = []conversation{
	{name: "plain-chat", build: func(Target) []ev {
		return []ev{user("Hi!"), assistant("Hello. What can I do?"), user("Nothing, thanks."), assistant("Goodbye.")}
	}},
	{name: "one-tool-call", build: func(Target) []ev {
		return []ev{user("Weather in Paris?"), assistant("Checking."),
			call("call_1", "get_weather", `{"city":"Paris"}`), result("call_1", `{"temp_c":18}`, false),
			assistant("18°C in Paris.")}
	}},
	{name: "parallel-calls", build: func(Target) []ev {
		return []ev{user("Weather in Paris and Rome?"),
			call("call_p", "get_weather", `{"city":"Paris"}`), call("call_r", "get_weather", `{"city":"Rome"}`),
			result("call_r", `{"temp_c":24}`, false), result("call_p", `{"temp_c":18}`, false),
			assistant("Paris 18°C, Rome 24°C.")}
	}},
	{name: "tool-error", build: func(Target) []ev {
		return []ev{user("Weather in Atlantis?"),
			call("call_a", "get_weather", `{"city":"Atlantis"}`), result("call_a", "no such city: Atlantis", true),
			assistant("I could not find Atlantis.")}
	}},
	{name: "dangling-call", build: func(Target) []ev {
		return []ev{user("Weather in Oslo?"), assistant("Checking."),
			call("call_o", "get_weather", `{"city":"Oslo"}`),
			user("Are you still there?")}
	}},
	{name: "reasoning-same-provider", build: func(t Target) []ev {
		return []ev{user("Weather in Paris?"), reasoningFrom(t.Provider, t.Model, 1),
			call("call_1", "get_weather", `{"city":"Paris"}`), result("call_1", `{"temp_c":18}`, false),
			reasoningFrom(t.Provider, t.Model, 2), assistant("18°C in Paris.")}
	}},
	{name: "reasoning-other-provider", build: func(t Target) []ev {
		o := other(t.Provider)
		return []ev{user("Weather in Paris?"), reasoningFrom(o, models[o], 1),
			call("call_1", "get_weather", `{"city":"Paris"}`), result("call_1", `{"temp_c":18}`, false),
			reasoningFrom(o, models[o], 2), assistant("18°C in Paris.")}
	}},
	{name: "reasoning-switch-and-back", build: func(t Target) []ev {
		o := other(t.Provider)
		return []ev{
			user("Weather in Paris?"), reasoningFrom(t.Provider, t.Model, 1),
			call("call_1", "get_weather", `{"city":"Paris"}`), result("call_1", `{"temp_c":18}`, false),
			assistant("18°C in Paris."),
			user("And Rome?"), reasoningFrom(o, models[o], 2),
			call("call_2", "get_weather", `{"city":"Rome"}`), result("call_2", `{"temp_c":24}`, false),
			assistant("24°C in Rome."),
			user("And Oslo?"), reasoningFrom(t.Provider, t.Model, 3),
			call("call_3", "get_weather", `{"city":"Oslo"}`), result("call_3", `{"temp_c":4}`, false),
			reasoningFrom(t.Provider, t.Model, 4), assistant("4°C in Oslo."),
		}
	}},
	{name: "images", build: func(Target) []ev {
		return []ev{
			{"message", `{"role":"user","content":[{"type":"text","text":"What is in these?"},` +
				`{"type":"image","cid":"` + pngCID + `","media_type":"image/png"},` +
				`{"type":"file","cid":"` + pdfCID + `","media_type":"application/pdf","name":"report.pdf"},` +
				`{"type":"file","cid":"` + notesCID + `","media_type":"text/plain","name":"notes.txt"},` +
				`{"type":"file","cid":"` + binCID + `","media_type":"application/octet-stream","name":"blob.bin"},` +
				`{"type":"image","cid":"` + absentCID + `","media_type":"image/png"}]}`},
			call("call_s", "screenshot", `{}`),
			{"tool_result", `{"call_id":"call_s","content":[{"type":"text","text":"captured"},{"type":"image","cid":"` + pngCID + `","media_type":"image/png"}],"is_error":false}`},
			assistant("A single pixel, a report, and notes."),
		}
	}},
	{name: "window-trims-mid-tool-loop", window: 800, build: func(t Target) []ev {
		long := strings.Repeat("data ", 60)
		evs := []ev{user("Summarise the four files."), reasoningFrom(t.Provider, t.Model, 1)}
		for i := 1; i <= 4; i++ {
			id := fmt.Sprintf("call_%d", i)
			evs = append(evs, call(id, "read_file", fmt.Sprintf(`{"path":"f%d.txt"}`, i)),
				result(id, fmt.Sprintf("file %d: %s", i, long), false))
		}
		return append(evs, reasoningFrom(t.Provider, t.Model, 2), assistant("All four files hold data."),
			user("Thanks. Which was longest?"), reasoningFrom(t.Provider, t.Model, 3), assistant("They are the same length."))
	}},
	{name: "empty-session", build: func(Target) []ev { return nil }},
	{name: "unicode-and-long-arguments", build: func(Target) []ev {
		long := strings.Repeat("長い引数🙂 ", 300)
		args, _ := json.Marshal(map[string]string{"path": "文書/ノート.md", "content": long})
		return []ev{user("请写入笔记 ✍️ — «quotes» \"and\" \\backslashes\\ \u2028 tabs\t."),
			call("call_u", "write_file", string(args)), result("call_u", "✅ wrote 1 file", false),
			assistant("Écrit. 👍")}
	}},
	{name: "invalid-arguments", build: func(Target) []ev {
		return []ev{user("Weather in Paris?"),
			call("call_bad", "get_weather", `"{\"city\": \"Par"`), result("call_bad", "arguments are not valid JSON", true),
			call("call_arr", "get_weather", `["Paris"]`), result("call_arr", "arguments must be an object", true),
			call("call_ok", "get_weather", `{"city":"Paris"}`), result("call_ok", "sunny", false),
			assistant("Sunny in Paris.")}
	}},
	{name: "bad-events", build: func(Target) []ev {
		return []ev{
			{"turn.started", `{}`},
			user("Hello?"),
			{"x.future_type", `{"whatever":1}`},
			{"x.future_type", `{"whatever":2}`},
			{"message", `{"role":"robot","content":[{"type":"text","text":"beep"}]}`},
			{"message", `{"role":"user","content":[{"type":"text","text":"still here"},{"type":"hologram","cid":"x"}]}`},
			{"tool_call", `{"call_id":"call_x"}`},
			result("call_nobody", "orphan", false),
			assistant("Hello."),
		}
	}},
	{name: "assistant-first-and-system", build: func(Target) []ev {
		return []ev{assistant("Hi, I am your assistant."),
			{"message", `{"role":"system","content":[{"type":"text","text":"Answer in French."}]}`},
			user("What time is it?"), assistant("Il est midi.")}
	}},
	{name: "foreign-tool-ids", build: func(Target) []ev {
		return []ev{user("Two calls with awkward ids."),
			call("call.1/ä", "get_weather", `{"city":"Paris"}`),
			call(strings.Repeat("x", 70), "get_weather", `{"city":"Rome"}`),
			result("call.1/ä", "sunny", false), result(strings.Repeat("x", 70), "rainy", false),
			call("call_dup", "get_weather", `{"city":"Oslo"}`), result("call_dup", "cold", false),
			call("call_dup", "get_weather", `{"city":"Bergen"}`), result("call_dup", "wet", false),
			assistant("Done.")}
	}},
}
