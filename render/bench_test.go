package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tern-dev/tern/journal"
)

// bigSession is a session of about n events: turns of a user message, an
// assistant's reasoning (Anthropic's), text and two parallel tool calls
// with their results.
func bigSession(b testing.TB, n int) []*journal.Event {
	var drafts []ev
	para := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)
	for t := 0; len(drafts) < n; t++ {
		a, c := fmt.Sprintf("call_%d_a", t), fmt.Sprintf("call_%d_b", t)
		drafts = append(drafts,
			user(fmt.Sprintf("Question %d: %s", t, para)),
			reasoningFrom(Anthropic, models[Anthropic], t),
			assistant("Let me look that up. "+para),
			call(a, "get_weather", fmt.Sprintf(`{"city":"Paris %d"}`, t)),
			call(c, "get_weather", fmt.Sprintf(`{"city":"Rome %d"}`, t)),
			result(a, fmt.Sprintf(`{"temp_c":%d,"sky":"clear","wind_kmh":12}`, t%30), false),
			result(c, fmt.Sprintf(`{"temp_c":%d,"sky":"rain","wind_kmh":30}`, t%30), false),
		)
	}
	evs := events(b, drafts[:n]...)
	// Allocate the events as journal.Decode does, one after another with
	// nothing in between, rather than scattered among the test's garbage.
	for i, e := range evs {
		c := *e
		c.Body = bytes.Clone(e.Body)
		evs[i] = &c
	}
	return evs
}

// plainRequest is the Chat Completions request as plain Go structs: the
// same messages render writes, marshalled by encoding/json for comparison.
type plainRequest struct {
	Model    string         `json:"model"`
	Messages []plainMessage `json:"messages"`
}

type plainMessage struct {
	Role       string      `json:"role"`
	Content    string      `json:"content,omitempty"`
	ToolCalls  []plainCall `json:"tool_calls,omitempty"`
	ToolCallID string      `json:"tool_call_id,omitempty"`
}

type plainCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// BenchmarkRender100k renders a 100,000-event session for each provider
// and, in the same run, marshals the same messages with encoding/json;
// x-json is render's time over encoding/json's (goal: at most 2).
func BenchmarkRender100k(b *testing.B) {
	evs := bigSession(b, 100_000)
	chat, err := Render(Request{Events: evs, Agent: weatherAgent, Target: targetFor(OpenAIChat)})
	if err != nil {
		b.Fatal(err)
	}
	var plain plainRequest
	if err := json.Unmarshal(chat.Body, &plain); err != nil {
		b.Fatal(err)
	}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(&plain)
		}
	})
	for _, p := range Providers() {
		b.Run(string(p), func(b *testing.B) {
			req := Request{Events: evs, Agent: weatherAgent, Target: targetFor(p), Blobs: testBlobs}
			var size int
			// The machine is shared: compare the fastest run of each.
			fastRender, fastJSON := time.Duration(1<<62), time.Duration(1<<62)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				r, err := Render(req)
				if err != nil {
					b.Fatal(err)
				}
				fastRender = min(fastRender, time.Since(start))
				size = len(r.Body)
				b.StopTimer()
				start = time.Now()
				json.Marshal(&plain)
				fastJSON = min(fastJSON, time.Since(start))
				b.StartTimer()
			}
			b.ReportMetric(float64(size), "body-bytes")
			b.ReportMetric(float64(fastRender.Milliseconds()), "best-ms")
			b.ReportMetric(float64(fastJSON.Milliseconds()), "best-json-ms")
			b.ReportMetric(float64(fastRender)/float64(fastJSON), "x-json")
		})
	}
}

// BenchmarkWindowFitting fits sessions of growing size into a window that
// keeps about the last tenth; ns/event stays flat when fitting is O(n).
func BenchmarkWindowFitting(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			units := make([]unit, n)
			total := 0
			for i := range units {
				e := &entry{kind: entMessage, role: roleUser, parts: []part{{kind: partText, text: []byte(`"hello there"`)}}}
				if i%2 == 1 {
					units[i] = unit{items: []*entry{{kind: entCall, callData: &callData{name: fmt.Sprint("tool", i%7)}}}, results: []*entry{{kind: entResult}}, tokens: 40, events: 2}
				} else {
					units[i] = unit{msg: e, tokens: 20, events: 1}
				}
				total += units[i].tokens
			}
			for b.Loop() {
				f, err := fit(units, 100, total/10)
				if err != nil || f.dropped == 0 {
					b.Fatal(err, f.dropped)
				}
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(n), "ns/unit")
		})
	}
}
