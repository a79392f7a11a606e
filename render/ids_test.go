package render

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestCallIDsAreKeptWhenValidAndEncodedOtherwise(t *testing.T) {
	long := strings.Repeat("x", 70)
	cases := []struct {
		name     string
		provider Provider
		neutral  string
		want     string // exact id, or a prefix ending in "-"
	}{
		{"a valid id is kept", Anthropic, "toolu_01AbC-9", "toolu_01AbC-9"},
		{"a dot is outside Anthropic's alphabet", Anthropic, "call.1", "t64-"},
		{"non-ASCII is encoded", Gemini, "call_ä", "t64-"},
		{"the empty id is encoded", OpenAIResponses, "", "tsha-"},
		{"an id over 64 characters is hashed", Anthropic, long, "tsha-"},
		{"OpenAI Chat takes at most 40", OpenAIChat, strings.Repeat("y", 41), "tsha-"},
		{"an id that looks encoded is encoded again", Ollama, "t64-Y2FsbA", "t64-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newIDMap(tc.provider)
			got := m.of(&entry{kind: entCall, callID: tc.neutral, callData: &callData{}})
			if strings.HasSuffix(tc.want, "-") {
				if !strings.HasPrefix(got, tc.want) {
					t.Fatalf("id %q, want prefix %q", got, tc.want)
				}
			} else if got != tc.want {
				t.Fatalf("id %q, want %q", got, tc.want)
			}
			if !providerID.MatchString(got) || len(got) > maxIDLen(tc.provider) {
				t.Fatalf("id %q is not valid for %s", got, tc.provider)
			}
			if got != tc.neutral && m.back[got] != tc.neutral {
				t.Fatalf("CallIDs maps %q to %q, want %q", got, m.back[got], tc.neutral)
			}
			if rest, ok := strings.CutPrefix(got, idPrefix64); ok {
				if b, err := base64.RawURLEncoding.DecodeString(rest); err != nil || string(b) != tc.neutral {
					t.Fatalf("%q is not %q and the base64url of %q", got, idPrefix64, tc.neutral)
				}
			}
		})
	}
}

func TestARepeatedCallIDGetsADistinctProviderID(t *testing.T) {
	evs := events(t, user("twice"),
		call("same", "get_weather", `{}`), result("same", "a", false),
		call("same", "get_weather", `{}`), result("same", "b", false))
	for _, p := range Providers() {
		r, err := Render(Request{Events: evs, Agent: weatherAgent, Target: targetFor(p)})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkRules(p, r.Body); err != nil {
			t.Fatalf("%s: %v\n%s", p, err, r.Body)
		}
		if len(r.CallIDs) != 1 {
			t.Fatalf("%s: CallIDs %v, want the second call's id mapped back to \"same\"", p, r.CallIDs)
		}
		for _, neutral := range r.CallIDs {
			if neutral != "same" {
				t.Fatalf("%s: CallIDs %v", p, r.CallIDs)
			}
		}
	}
}
