package render

import (
	"errors"
	"strings"
	"testing"
)

// bigResult is a tool result of about n tokens.
func bigResult(id string, n int) ev {
	return result(id, strings.Repeat("abc ", n*3/4), false)
}

func TestWindowFitting(t *testing.T) {
	conversation := []ev{
		user("First, read the notes."),
		call("c1", "read_file", `{"path":"notes.txt"}`), bigResult("c1", 400),
		assistant("Read them."),
		user("Now the last question."),
		call("c2", "read_file", `{"path":"big.txt"}`), bigResult("c2", 400),
		call("c3", "read_file", `{"path":"small.txt"}`), result("c3", "small", false),
		assistant("Done."),
	}
	cases := []struct {
		name        string
		window      int
		dropped     int
		summary     bool
		keeps, lose []string // text the body must and must not hold
	}{
		{"a request that fits is sent whole", 0, 0, false, []string{"First, read", "small.txt", "big.txt"}, nil},
		{"the oldest units go first, with a summary at the head", 1000, 3,
			true, []string{"[tern: 3 earlier events", "Read them.", "Now the last question.", "big.txt", "small.txt"}, []string{"notes.txt"}},
		{"the last user message stays when the units after it do not all fit", 600, 6,
			true, []string{"Now the last question.", "small.txt", "First, read the notes."}, []string{"big.txt", "notes.txt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Render(Request{Events: events(t, conversation...), Agent: weatherAgent,
				Target: Target{Provider: Anthropic, Model: "m", Window: tc.window}})
			if err != nil {
				t.Fatal(err)
			}
			if r.Dropped != tc.dropped {
				t.Errorf("dropped %d events, want %d", r.Dropped, tc.dropped)
			}
			if tc.window > 0 && r.Tokens > tc.window {
				t.Errorf("estimated %d tokens for a window of %d", r.Tokens, tc.window)
			}
			body := string(r.Body)
			if got := strings.Contains(body, "[tern: "); got != tc.summary {
				t.Errorf("summary present: %v, want %v", got, tc.summary)
			}
			for _, s := range tc.keeps {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %q", s)
				}
			}
			for _, s := range tc.lose {
				if strings.Contains(body, s) {
					t.Errorf("body still holds %q", s)
				}
			}
			if err := checkRules(Anthropic, r.Body); err != nil {
				t.Errorf("%v\n%s", err, body)
			}
		})
	}
}

func TestAWindowTooSmallForTheLastUserMessageIsAnError(t *testing.T) {
	_, err := Render(Request{Events: events(t, user(strings.Repeat("long question ", 100))),
		Agent: weatherAgent, Target: Target{Provider: OpenAIChat, Model: "m", Window: 200}})
	var we *WindowError
	if !errors.Is(err, ErrWindowTooSmall) || !errors.As(err, &we) {
		t.Fatalf("err = %v, want a *WindowError", err)
	}
	if we.Window != 200 || we.LastUser <= 200-we.Fixed || !strings.Contains(err.Error(), "last user message") {
		t.Fatalf("%+v: %v", we, err)
	}
}

func TestATightWindowLeavesOutEventsWithANoteWhenASummaryCannotFit(t *testing.T) {
	evs := events(t, user("old"), assistant(strings.Repeat("old answer ", 50)), user("new question"))
	r, err := Render(Request{Events: evs, Agent: weatherAgent, Target: Target{Provider: Gemini, Window: 110}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Dropped != 2 || strings.Contains(string(r.Body), "old") || !strings.Contains(strings.Join(r.Notes, "\n"), "no room") {
		t.Fatalf("dropped %d, notes %q, body %s", r.Dropped, r.Notes, r.Body)
	}
}

func TestTheSummarySaysWhatWasLeftOut(t *testing.T) {
	u := buildView(events(t,
		user("Please refactor the parser."),
		call("a", "read_file", `{}`), result("a", "x", false),
		call("b", "read_file", `{}`), result("b", "x", true),
		call("c", "grep", `{}`), result("c", "x", false),
		assistant("Refactored."),
		user("Thanks")), &blobCache{}, &notes{})
	s := summarize(u[:len(u)-1], -1, 8)
	for _, want := range []string{"8 earlier events", "1 user message", "1 assistant message",
		"3 tool calls (read_file 2x, grep 1x) with 1 error result", `"Please refactor the parser."`} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q lacks %q", s, want)
		}
	}
}

// The events tern writes about members, acceptance, holders and heals are
// no part of a conversation: render skips them without a note; a type it
// does not know still gets one.
func TestTernsOwnEventsAreSkippedWithoutANote(t *testing.T) {
	evs := events(t, ev{"member.added", `{"peer":"p"}`}, ev{"agent.accepted", `{"sha256":"00"}`},
		ev{"holder.activated", `{}`}, ev{"chain.healed", `{"replaced":[]}`}, user("hi"))
	r, err := Render(Request{Events: evs, Agent: weatherAgent, Target: Target{Provider: Anthropic, Model: "m"}})
	if err != nil || len(r.Notes) != 0 {
		t.Fatalf("notes %q (%v), want none", r.Notes, err)
	}
	r, _ = Render(Request{Events: events(t, ev{"mystery", `{}`}, user("hi")), Agent: weatherAgent, Target: Target{Provider: Anthropic, Model: "m"}})
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "mystery") {
		t.Fatalf("an unknown type: notes %q", r.Notes)
	}
}
