package render

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

// ev is a draft event for tests: a type and a body written as JSON.
type ev struct {
	typ  string
	body string
}

func user(text string) ev { return ev{"message", msg("user", text)} }
func assistant(text string) ev {
	return ev{"message", msg("assistant", text)}
}
func msg(role, text string) string {
	t, _ := json.Marshal(text)
	return `{"role":"` + role + `","content":[{"type":"text","text":` + string(t) + `}]}`
}
func call(id, name, args string) ev {
	i, _ := json.Marshal(id)
	return ev{"tool_call", `{"call_id":` + string(i) + `,"name":"` + name + `","arguments":` + args + `}`}
}
func result(id, text string, isError bool) ev {
	i, _ := json.Marshal(id)
	t, _ := json.Marshal(text)
	return ev{"tool_result", fmt.Sprintf(`{"call_id":%s,"content":[{"type":"text","text":%s}],"is_error":%v}`, i, t, isError)}
}
func thinking(provider, model, host, text, data string) ev {
	t, _ := json.Marshal(text)
	return ev{"reasoning", fmt.Sprintf(`{"provider":%q,"model":%q,"host":%q,"text":%s,"data":%s}`, provider, model, host, t, data)}
}

// events builds journal events, in order, as one machine would write them:
// canonical bodies, unsigned (render reads only type and body).
func events(t testing.TB, drafts ...ev) []*journal.Event {
	t.Helper()
	out := make([]*journal.Event, len(drafts))
	for i, d := range drafts {
		body, err := journal.Canonical([]byte(d.body))
		if err != nil {
			t.Fatalf("event %d: body %s: %v", i, d.body, err)
		}
		out[i] = &journal.Event{ID: fmt.Sprintf("ev%03d", i+1), V: 1, Machine: "m", Seq: uint64(i + 1),
			Clock: uint64(i + 1), Session: "s1", Type: d.typ, Body: body}
	}
	return out
}

// weatherAgent has one tool, get_weather, and terse instructions.
var weatherAgent = capsule.Agent{
	Name:         "weather",
	Instructions: "You are terse.",
	Tools: []capsule.Tool{{Name: "get_weather", Description: "Current weather in a city.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
}
