package render

import (
	"encoding/json"
	"testing"

	"github.com/tern-dev/tern/journal"
)

// FuzzRender feeds arbitrary bodies, as any event type, to every
// renderer: it must never panic, and what it writes is always one JSON
// document.
func FuzzRender(f *testing.F) {
	for _, c := range catalogue {
		for _, d := range c.build(targetFor(Anthropic)) {
			f.Add(d.typ, []byte(d.body))
		}
	}
	f.Add("message", []byte(`{"role":"user","content":"plain"}`))
	f.Add("tool_call", []byte(`{"call_id":"c","name":"n","arguments":"{bad"}`))
	f.Add("message", []byte(`{"role":"user","content":[{"type":"text","text":"\ud800 lone"}]}`))
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		evs := []*journal.Event{
			{ID: "e1", Type: "message", Body: []byte(`{"role":"user","content":[{"type":"text","text":"hi"}]}`)},
			{ID: "e2", Type: "tool_call", Body: []byte(`{"call_id":"c","name":"get_weather","arguments":{}}`)},
			{ID: "e3", Type: typ, Body: body},
			{ID: "e4", Type: "tool_result", Body: []byte(`{"call_id":"c","content":[{"type":"text","text":"ok"}]}`)},
		}
		for _, p := range Providers() {
			for _, window := range []int{0, 400} {
				target := targetFor(p)
				target.Window = window
				r, err := Render(Request{Events: evs, Agent: weatherAgent, Target: target, Blobs: testBlobs})
				if err != nil {
					continue // a window too small for the fuzzed message
				}
				if !json.Valid(r.Body) {
					t.Fatalf("%s: invalid JSON for %s %q:\n%s", p, typ, body, r.Body)
				}
			}
		}
	})
}
