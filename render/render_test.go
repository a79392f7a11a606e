package render

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tern-dev/tern/capsule"
)

// marker is what reasoningFrom puts in reasoning n of provider p where a
// replayed body would show it.
func marker(p Provider, n int) string {
	switch p {
	case OpenAIResponses:
		return "enc-openai-responses-" + string(rune('0'+n))
	case Anthropic:
		return "sig-anthropic-" + string(rune('0'+n))
	case Gemini:
		return base64Of("sig-gemini-" + string(rune('0'+n)))
	}
	return "thought " + string(rune('0'+n)) + " of " + string(p)
}

func TestReasoningGoesBackOnlyToTheProviderModelAndHostThatMadeIt(t *testing.T) {
	for _, p := range Providers() {
		model := models[p]
		cases := []struct {
			name   string
			from   ev
			target Target
			replay bool
		}{
			{"the same provider, model and host get it back", reasoningFrom(p, model, 1), targetFor(p), p != OpenAIChat},
			{"another model does not", reasoningFrom(p, model, 1), Target{Provider: p, Model: "other-model"}, false},
			{"another host does not", reasoningFrom(p, model, 1), Target{Provider: p, Model: model, Host: "eu.example.net"}, false},
			{"another provider does not", reasoningFrom(other(p), models[other(p)], 1), targetFor(p), false},
		}
		for _, tc := range cases {
			t.Run(string(p)+"/"+tc.name, func(t *testing.T) {
				evs := events(t, user("Weather?"), tc.from, call("c", "get_weather", `{"city":"Paris"}`),
					result("c", "sunny", false), assistant("Sunny."))
				r, err := Render(Request{Events: evs, Agent: weatherAgent, Target: tc.target})
				if err != nil {
					t.Fatal(err)
				}
				mark := marker(p, 1)
				if tc.from.body != reasoningFrom(p, model, 1).body {
					mark = marker(other(p), 1)
				}
				if got := strings.Contains(string(r.Body), mark); got != tc.replay {
					t.Fatalf("replayed: %v, want %v\n%s", got, tc.replay, r.Body)
				}
			})
		}
	}
}

func TestReasoningThatPrecedesNothingIsNotReplayed(t *testing.T) {
	for _, p := range []Provider{OpenAIResponses, Anthropic, Gemini, Ollama} {
		evs := events(t, user("Hi"), reasoningFrom(p, models[p], 1), user("Still there?"))
		r, err := Render(Request{Events: evs, Agent: weatherAgent, Target: targetFor(p)})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(r.Body), marker(p, 1)) {
			t.Errorf("%s: reasoning with no output after it was replayed:\n%s", p, r.Body)
		}
	}
}

func TestGeminiCallsFromAnotherModelCarryTheSkipSentinel(t *testing.T) {
	evs := events(t, user("Weather?"),
		reasoningFrom(Anthropic, models[Anthropic], 1), call("a", "get_weather", `{"city":"Paris"}`), call("b", "get_weather", `{"city":"Rome"}`),
		result("a", "sunny", false), result("b", "rain", false),
		reasoningFrom(Gemini, models[Gemini], 2), call("c", "get_weather", `{"city":"Oslo"}`), result("c", "snow", false))
	r, err := Render(Request{Events: evs, Agent: weatherAgent, Target: targetFor(Gemini)})
	if err != nil {
		t.Fatal(err)
	}
	var body geminiRequest
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	sigs := map[string]string{}
	for _, c := range body.Contents {
		for _, part := range c.Parts {
			if part.FunctionCall != nil {
				sigs[part.FunctionCall.ID] = string(part.ThoughtSignature)
			}
		}
	}
	want := map[string]string{"a": "skip_thought_signature_validator", "b": "", "c": "sig-gemini-2"}
	for id, sig := range want {
		if sigs[id] != sig {
			t.Errorf("call %s has signature %q, want %q", id, sigs[id], sig)
		}
	}
}

func TestAnthropicThinkingIsTurnedOffWhenTheLastToolLoopCannotStartWithIt(t *testing.T) {
	cases := []struct {
		name     string
		from     Provider
		thinking bool
	}{
		{"a loop Claude started with thinking keeps thinking on", Anthropic, true},
		{"a loop another model started turns thinking off", OpenAIResponses, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs := events(t, user("Weather?"), reasoningFrom(tc.from, models[tc.from], 1),
				call("a", "get_weather", `{"city":"Paris"}`), result("a", "sunny", false))
			target := targetFor(Anthropic)
			target.Thinking = 2048
			r, err := Render(Request{Events: evs, Agent: weatherAgent, Target: target})
			if err != nil {
				t.Fatal(err)
			}
			on := strings.Contains(string(r.Body), `"thinking":{"type":"enabled","budget_tokens":2048}`)
			if on != tc.thinking {
				t.Fatalf("thinking on: %v, want %v; notes %q\n%s", on, tc.thinking, r.Notes, r.Body)
			}
			if !on && !strings.Contains(strings.Join(r.Notes, "\n"), "thinking turned off") {
				t.Fatalf("no note says why thinking is off: %q", r.Notes)
			}
		})
	}
}

func TestArgumentsThatAreNotAnObjectStillGoOutPairedWithTheirResult(t *testing.T) {
	evs := events(t, user("Weather?"), call("bad", "get_weather", `"{\"city\": \"Par"`), result("bad", "invalid JSON", true))
	cases := map[Provider]string{
		OpenAIChat:      `"arguments":"{\"city\": \"Par"`,
		OpenAIResponses: `"arguments":"{\"city\": \"Par"`,
		Anthropic:       `"input":{"raw_arguments":"{\"city\": \"Par"}`,
		Gemini:          `"args":{"raw_arguments":"{\"city\": \"Par"}`,
		Ollama:          `"arguments":{"raw_arguments":"{\"city\": \"Par"}`,
	}
	for p, want := range cases {
		t.Run(string(p), func(t *testing.T) {
			r, err := Render(Request{Events: evs, Agent: weatherAgent, Target: targetFor(p)})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(r.Body), want) {
				t.Fatalf("body lacks %s:\n%s", want, r.Body)
			}
			if err := checkRules(p, r.Body); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestADanglingCallGetsTheInterruptedErrorResultEverywhere(t *testing.T) {
	evs := events(t, user("Weather?"), call("c", "get_weather", `{"city":"Paris"}`))
	for _, p := range Providers() {
		r, err := Render(Request{Events: evs, Agent: weatherAgent, Target: targetFor(p)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(r.Body), Interrupted) {
			t.Errorf("%s: no %q in\n%s", p, Interrupted, r.Body)
		}
		if err := checkRules(p, r.Body); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestBadTargetsAreErrors(t *testing.T) {
	cases := []struct {
		name   string
		target Target
		want   error
	}{
		{"an unknown provider", Target{Provider: "openia", Model: "m"}, ErrUnknownProvider},
		{"no model for a provider that names it in the body", Target{Provider: Anthropic}, ErrNoModel},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(Request{Target: tc.target})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Render(Request{Target: Target{Provider: Gemini}}); err != nil {
		t.Fatalf("Gemini names the model in the URL, yet: %v", err)
	}
	if _, err := ParseProvider("nope"); err == nil || !strings.Contains(err.Error(), "openai-chat, openai-responses, anthropic, gemini, ollama") {
		t.Fatalf("ParseProvider error does not list the providers: %v", err)
	}
}

// A streamed request is the same body with the fields that ask for the
// stream, where each API wants them, and nothing else changed.
func TestStreamAddsOnlyTheFieldsThatAskForAStream(t *testing.T) {
	evs := events(t, user("Weather in Paris?"), call("call_1", "get_weather", `{"city":"Paris"}`), result("call_1", `{"temp_c":18}`, false))
	agent := capsule.Agent{Name: "a", Instructions: "You are terse.", Tools: []capsule.Tool{{Name: "get_weather"}}}
	added := map[Provider]string{
		OpenAIChat:      `,"stream":true,"stream_options":{"include_usage":true}`,
		OpenAIResponses: `,"stream":true`,
		Anthropic:       `,"stream":true`,
		Gemini:          ``,
		Ollama:          ``,
	}
	for _, p := range Providers() {
		plain, err := Render(Request{Events: evs, Agent: agent, Target: Target{Provider: p, Model: "m"}})
		if err != nil {
			t.Fatal(err)
		}
		streamed, err := Render(Request{Events: evs, Agent: agent, Target: Target{Provider: p, Model: "m", Stream: true}})
		if err != nil {
			t.Fatal(err)
		}
		want := string(plain.Body[:len(plain.Body)-1]) + added[p] + "}"
		if string(streamed.Body) != want {
			t.Errorf("%s: streamed body\n%s\nwant\n%s", p, streamed.Body, want)
		}
	}
}
