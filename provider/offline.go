package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tern-dev/tern/render"
)

// offlineModel is the built-in offline model: deterministic, no network,
// no key. It reads an OpenAI Chat body (Settings.Wire) and follows the
// script in the last user message (docs/API.md, "The offline model"):
//
//   - each line "!call TOOL {json arguments}" calls TOOL; several such
//     lines are parallel calls in one step;
//   - each line "!reason TEXT" is reasoning it emits before its answer;
//   - a message without calls gets a short reply that quotes its first
//     other line, streamed word by word;
//   - after tool results, it answers with a short text quoting them.
type offlineModel struct{ s Settings }

// chatBody is what the offline model reads of an OpenAI Chat body.
type chatBody struct {
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

func (m offlineModel) Step(ctx context.Context, body []byte, deltas func(Delta)) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var req chatBody
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		return nil, &Error{Kind: ErrBadRequest, Provider: Offline, Host: Offline, Model: m.s.Model,
			Message: "the offline model reads an OpenAI Chat body with at least one message (render it for openai-chat)"}
	}
	a := newAssembler(m.s, body, deltas)
	out := 0
	say := func(emit func(string), text string) {
		for _, w := range strings.SplitAfter(text, " ") {
			if w != "" {
				emit(w)
				out++
			}
		}
	}
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	media := 0 // images and files of the tool results, which render moved to a user message after them
	if n := len(msgs); n > 1 && last.Role == "user" && msgs[n-2].Role == "tool" && strings.HasPrefix(textOf(last.Content), render.ToolMediaLead) {
		media = partsOtherThanText(last.Content)
		msgs = msgs[:n-1]
		last = msgs[n-2]
	}
	switch last.Role {
	case "tool":
		names := map[string]string{}
		for _, msg := range msgs {
			for _, c := range msg.ToolCalls {
				names[c.ID] = c.Function.Name
			}
		}
		first := len(msgs) - 1
		for first > 0 && msgs[first-1].Role == "tool" {
			first--
		}
		var quotes []string
		for _, msg := range msgs[first:] {
			name := names[msg.ToolCallID]
			if name == "" {
				name = msg.ToolCallID
			}
			quotes = append(quotes, fmt.Sprintf("%s returned %s", name, cut(textOf(msg.Content), 200)))
		}
		done := "Done: " + strings.TrimSuffix(strings.Join(quotes, "; "), ".") + "." // one period, even after a result's own
		if media > 0 {
			done += fmt.Sprintf(" I also got %d image(s) or file(s).", media)
		}
		say(a.text, done)
	case "user":
		var reasons, rest []string
		calls := 0
		for _, line := range strings.Split(textOf(last.Content), "\n") {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "!reason "):
				reasons = append(reasons, strings.TrimSpace(strings.TrimPrefix(line, "!reason ")))
			case strings.HasPrefix(line, "!call "):
				name, args, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "!call ")), " ")
				if name == "" {
					continue
				}
				if len(reasons) > 0 && calls == 0 {
					say(a.reasoning, strings.Join(reasons, "\n"))
					reasons = nil
				}
				a.call(calls, "", name)
				a.callArgs(calls, strings.TrimSpace(args))
				calls++
			case line != "":
				rest = append(rest, line)
			}
		}
		if calls > 0 {
			break
		}
		if len(reasons) > 0 {
			say(a.reasoning, strings.Join(reasons, "\n"))
		}
		reply := "OK."
		if len(rest) > 0 {
			reply = "OK. You said: " + quote(rest[0], 80)
		}
		say(a.text, reply)
	default:
		say(a.text, "OK.")
	}
	a.usage = Usage{InputTokens: len(body)/4 + 1, OutputTokens: out}
	return a.result()
}

// textOf is the text of an OpenAI Chat content: a string, or the text
// parts of a list.
func textOf(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(content, &parts)
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// partsOtherThanText counts the parts of content that are not text.
func partsOtherThanText(content json.RawMessage) int {
	var parts []struct {
		Type string `json:"type"`
	}
	json.Unmarshal(content, &parts)
	n := 0
	for _, p := range parts {
		if p.Type != "text" {
			n++
		}
	}
	return n
}

// cut is s cut to n runes.
func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// quote is s in double quotes, cut to n runes.
func quote(s string, n int) string { return `"` + cut(s, n) + `"` }
