package render

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// A random valid journal: users talk, assistants think (for any provider,
// model and host), answer and call tools in parallel; results come in any
// order, some never (the machine died), some after the user spoke again;
// a few events are unknown, orphaned or carry invalid arguments.
type journalGen struct {
	r       *rand.Rand
	evs     []ev
	n       int               // calls made, for ids
	markers map[string]string // a reasoning event's marker -> its key
}

var keys = func() []Target {
	var ts []Target
	for _, p := range Providers() {
		for _, m := range []string{"m1", "m2"} {
			for _, h := range []string{"", "eu.example.net"} {
				ts = append(ts, Target{Provider: p, Model: m, Host: h})
			}
		}
	}
	return ts
}()

func keyOf(t Target) string { return string(t.Provider) + "|" + t.Model + "|" + t.host() }

func (g *journalGen) reasoning() {
	k := keys[g.r.IntN(len(keys))]
	i := len(g.markers)
	mark := fmt.Sprintf("rsn-%d-end", i)
	data := `{}`
	switch k.Provider {
	case OpenAIResponses:
		data = fmt.Sprintf(`{"id":"rs_%d","encrypted_content":%q,"summary":[]}`, i, mark)
	case Anthropic:
		data = fmt.Sprintf(`{"signature":%q}`, mark)
		if g.r.IntN(4) == 0 {
			data = fmt.Sprintf(`{"redacted":%q}`, mark)
		}
	case Gemini:
		mark = base64.StdEncoding.EncodeToString([]byte(mark))
		data = fmt.Sprintf(`{"thought_signature":%q}`, mark)
	}
	g.markers[mark] = keyOf(k)
	text := "thinking " + mark
	if k.Provider == Gemini || k.Provider == OpenAIResponses {
		text = "summary" // their text is not sent back
	}
	g.evs = append(g.evs, thinking(string(k.Provider), k.Model, k.host(), text, data))
}

func (g *journalGen) text() string {
	words := []string{"alpha", "béta", "γάμμα", "数据", "🙂", "line\nbreak", `"quoted"`, `back\slash`}
	var b strings.Builder
	for i := 0; i < 1+g.r.IntN(8); i++ {
		b.WriteString(words[g.r.IntN(len(words))] + " ")
	}
	return b.String()
}

func (g *journalGen) callID() string {
	g.n++
	switch g.r.IntN(10) {
	case 0:
		return fmt.Sprintf("call.%d/ä", g.n)
	case 1:
		return strings.Repeat("x", 50) + fmt.Sprint(g.n)
	case 2:
		return "t64-" + fmt.Sprint(g.n)
	}
	return fmt.Sprintf("call_%d", g.n)
}

func (g *journalGen) args() string {
	switch g.r.IntN(8) {
	case 0:
		return `"{\"city\": \"Par"` // invalid JSON, kept as a string
	case 1:
		return `[1,2]`
	case 2:
		return `{}`
	}
	b, _ := json.Marshal(map[string]string{"q": g.text()})
	return string(b)
}

func (g *journalGen) build(size int) []ev {
	var deferred []ev // results that arrive after the user speaks again
	for len(g.evs) < size {
		switch x := g.r.IntN(20); {
		case x < 5:
			if g.r.IntN(6) == 0 {
				g.evs = append(g.evs, image("user", g.text(), pngCID, "image/png"))
			} else {
				g.evs = append(g.evs, user(g.text()))
			}
			g.evs = append(g.evs, deferred...)
			deferred = nil
		case x < 15:
			if g.r.IntN(2) == 0 {
				g.reasoning()
			}
			if g.r.IntN(2) == 0 {
				g.evs = append(g.evs, assistant(g.text()))
			}
			var ids []string
			for range g.r.IntN(4) {
				if g.r.IntN(3) == 0 {
					g.reasoning()
				}
				id := g.callID()
				ids = append(ids, id)
				g.evs = append(g.evs, call(id, "tool_"+fmt.Sprint(g.r.IntN(3)), g.args()))
			}
			g.r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			for _, id := range ids {
				res := result(id, g.text(), g.r.IntN(5) == 0)
				switch g.r.IntN(12) {
				case 0: // the machine died mid-call
				case 1:
					deferred = append(deferred, res)
				default:
					g.evs = append(g.evs, res)
				}
			}
		case x < 16:
			g.evs = append(g.evs, ev{"message", msg("system", g.text())})
		case x < 17:
			g.evs = append(g.evs, ev{"x.unknown", `{"n":1}`}, ev{"turn.completed", `{}`})
		case x < 18:
			g.evs = append(g.evs, result("call_nobody", "orphan", false))
		default:
			g.evs = append(g.evs, assistant(g.text()))
		}
	}
	return g.evs
}

func TestRandomJournalsRenderValidRequestsForEveryProvider(t *testing.T) {
	for seed := uint64(1); seed <= 150; seed++ {
		g := &journalGen{r: rand.New(rand.NewPCG(seed, 7)), markers: map[string]string{}}
		evs := events(t, g.build(5+g.r.IntN(60))...)
		window := 0
		if seed%3 == 0 {
			window = 300 + g.r.IntN(3000)
		}
		for _, p := range Providers() {
			target := Target{Provider: p, Model: "m1", Window: window, Thinking: 1024}
			req := Request{Events: evs, Agent: weatherAgent, Target: target, Blobs: testBlobs}
			r, err := Render(req)
			if errors.Is(err, ErrWindowTooSmall) {
				continue
			}
			if err != nil {
				t.Fatalf("seed %d, %s: %v", seed, p, err)
			}
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d, %s (replay: go test ./render -run %s): %s\nbody: %s", seed, p, t.Name(), fmt.Sprintf(format, args...), r.Body)
			}
			again, _ := Render(req)
			if !bytes.Equal(again.Body, r.Body) || fmt.Sprint(again.Notes) != fmt.Sprint(r.Notes) {
				fail("rendering twice gave different output")
			}
			if window > 0 && r.Tokens > window {
				fail("estimated %d tokens, over the window of %d", r.Tokens, window)
			}
			for mark, key := range g.markers {
				if !strings.Contains(string(r.Body), mark) {
					continue
				}
				if key != keyOf(target) {
					fail("reasoning of %s crossed to %s", key, keyOf(target))
				}
				if r.Dropped > 0 {
					fail("reasoning replayed after a trim")
				}
			}
			if err := sdkRoundTrip(p, r.Body); err != nil {
				fail("%v", err)
			}
			if err := checkRules(p, r.Body); err != nil {
				fail("%v", err)
			}
		}
	}
}

var providerID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkRules checks a body against its provider's pairing and ordering
// rules: every call has exactly one result right after its step, no result
// lacks a call, roles come in an order the provider accepts, ids are in
// the provider's alphabet.
func checkRules(p Provider, body []byte) error {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("body is not JSON: %v", err)
	}
	seen := map[string]bool{}
	newID := func(id any) error {
		s, _ := id.(string)
		if !providerID.MatchString(s) || (p == OpenAIChat && len(s) > 40) {
			return fmt.Errorf("call id %q is not valid for %s", s, p)
		}
		if seen[s] {
			return fmt.Errorf("call id %q used twice", s)
		}
		seen[s] = true
		return nil
	}
	switch p {
	case OpenAIChat, Ollama:
		msgs := list_(doc["messages"])
		pending := map[string]bool{}
		for i, m := range msgs {
			m := m.(map[string]any)
			role := m["role"]
			if role == "tool" {
				id := m["tool_call_id"].(string)
				if !pending[id] {
					return fmt.Errorf("message %d: tool message for %q answers no pending call", i, id)
				}
				delete(pending, id)
				continue
			}
			if len(pending) > 0 && !(p == OpenAIChat && role == "user" && i > 0 && msgs[i-1].(map[string]any)["role"] == "tool") {
				return fmt.Errorf("message %d (%s): calls %v still unanswered", i, role, pending)
			}
			if len(pending) > 0 {
				return fmt.Errorf("message %d: calls %v unanswered", i, pending)
			}
			for _, c := range list_(m["tool_calls"]) {
				id := c.(map[string]any)["id"]
				if err := newID(id); err != nil {
					return err
				}
				pending[id.(string)] = true
			}
		}
		if len(pending) > 0 {
			return fmt.Errorf("calls %v unanswered at the end", pending)
		}
	case OpenAIResponses:
		pending := map[string]bool{}
		for i, it := range list_(doc["input"]) {
			it := it.(map[string]any)
			if _, has := it["id"]; has && it["type"] != "reasoning" {
				return fmt.Errorf("item %d (%s) carries an id", i, it["type"])
			}
			switch it["type"] {
			case "function_call":
				if err := newID(it["call_id"]); err != nil {
					return err
				}
				pending[it["call_id"].(string)] = true
			case "function_call_output":
				id := it["call_id"].(string)
				if !pending[id] {
					return fmt.Errorf("item %d: output for %q answers no pending call", i, id)
				}
				delete(pending, id)
			case "message":
				if it["role"] != "assistant" && len(pending) > 0 {
					return fmt.Errorf("item %d: calls %v unanswered before a %s message", i, pending, it["role"])
				}
			}
		}
		if len(pending) > 0 {
			return fmt.Errorf("calls %v unanswered at the end", pending)
		}
	case Anthropic, Gemini:
		msgs, field, model, callKey, resKey := list_(doc["messages"]), "content", "assistant", "tool_use", "tool_result"
		if p == Gemini {
			msgs, field, model = list_(doc["contents"]), "parts", "model"
		}
		var want []string // ids the next user message must answer first
		for i, m := range msgs {
			m := m.(map[string]any)
			role := m["role"]
			if (i%2 == 0) != (role == "user") {
				return fmt.Errorf("message %d has role %v: roles must alternate, the user's first", i, role)
			}
			blocks := list_(m[field])
			if len(blocks) == 0 {
				return fmt.Errorf("message %d is empty", i)
			}
			var calls []string
			for j, b := range blocks {
				b := b.(map[string]any)
				id, isCall, isRes := blockIDs(p, b, callKey, resKey)
				switch {
				case isRes:
					if j >= len(want) || role != "user" {
						return fmt.Errorf("message %d block %d: result %q not first in the message after its call", i, j, id)
					}
					if id != want[j] {
						return fmt.Errorf("message %d block %d: result %q, want %q (call order)", i, j, id, want[j])
					}
				case isCall:
					if err := newID(id); err != nil {
						return err
					}
					if p == Gemini && len(calls) == 0 && b["thoughtSignature"] == nil {
						return fmt.Errorf("message %d: first functionCall has no thought signature", i)
					}
					calls = append(calls, id)
				default:
					if j < len(want) {
						return fmt.Errorf("message %d block %d: %v before the results", i, j, b)
					}
				}
			}
			if role == "user" && len(blocks) < len(want) {
				return fmt.Errorf("message %d answers %d of %d calls", i, len(blocks), len(want))
			}
			if role == model {
				want = calls
			} else {
				want = nil
			}
		}
		if len(want) > 0 {
			return fmt.Errorf("calls %v unanswered at the end", want)
		}
		// With thinking on, a request that ends in a tool loop must have
		// its last assistant message start with thinking.
		if _, on := doc["thinking"]; on && len(msgs) >= 2 {
			lastUser := list_(msgs[len(msgs)-1].(map[string]any)[field])
			prev := list_(msgs[len(msgs)-2].(map[string]any)[field])
			if blocks := lastUser; len(blocks) > 0 && blocks[0].(map[string]any)["type"] == resKey {
				if t := prev[0].(map[string]any)["type"]; t != "thinking" && t != "redacted_thinking" {
					return fmt.Errorf("thinking is on, but the last tool loop starts with %v", t)
				}
			}
		}
	}
	return nil
}

func blockIDs(p Provider, b map[string]any, callKey, resKey string) (id string, isCall, isRes bool) {
	if p == Gemini {
		if fc, ok := b["functionCall"].(map[string]any); ok {
			return fc["id"].(string), true, false
		}
		if fr, ok := b["functionResponse"].(map[string]any); ok {
			return fr["id"].(string), false, true
		}
		return "", false, false
	}
	switch b["type"] {
	case callKey:
		return b["id"].(string), true, false
	case resKey:
		return b["tool_use_id"].(string), false, true
	}
	return "", false, false
}

func list_(v any) []any {
	l, _ := v.([]any)
	return l
}
