package provider

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/render"
)

var offline = Settings{Provider: Offline, Model: "tern-offline"}

// offlineStep renders the conversation for the offline model (OpenAI
// Chat) and takes one step.
func offlineStep(t *testing.T, drafts ...journal.Draft) (*Result, *deltas) {
	t.Helper()
	var evs []*journal.Event
	for i, d := range drafts {
		body, err := journal.Canonical(d.Body)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, &journal.Event{ID: string(rune('a' + i)), V: 1, Type: d.Type, Session: "s", Body: body})
	}
	r, err := render.Render(render.Request{Events: evs, Agent: weather, Target: render.Target{Provider: offline.Wire(), Model: offline.Model, Host: offline.Host(), Stream: true}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(offline)
	if err != nil {
		t.Fatal(err)
	}
	var d deltas
	res, err := m.Step(context.Background(), r.Body, d.add)
	if err != nil {
		t.Fatal(err)
	}
	return res, &d
}

func userSays(text string) journal.Draft {
	b, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": text}}})
	return journal.Draft{Type: "message", Body: b}
}

// The offline model's script, step by step, against golden drafts
// (testdata/offline/*.golden; TERN_UPDATE_GOLDEN=1 rewrites them).
func TestTheOfflineModelFollowsItsScript(t *testing.T) {
	plain, d := offlineStep(t, userSays("Hello there, model."))
	if d.count(DeltaText) < 3 {
		t.Errorf("a plain reply streams as %d deltas, want several", d.count(DeltaText))
	}
	calls, d2 := offlineStep(t, userSays("!reason The user wants two cities.\n!call get_weather {\"city\":\"Paris\"}\n!call get_weather {\"city\":\"Rome\"}"))
	if d2.count(DeltaCall) != 2 || d2.text(DeltaReasoning) != "The user wants two cities." {
		t.Errorf("deltas %+v", d2.got)
	}
	steps := []journal.Draft{userSays("!call get_weather {\"city\":\"Paris\"}\n!call get_weather {\"city\":\"Rome\"}")}
	first, _ := offlineStep(t, steps...)
	steps = append(steps, first.Drafts...)
	for _, dr := range first.Drafts {
		if dr.Type == "tool_call" {
			var c struct {
				CallID string `json:"call_id"`
			}
			json.Unmarshal(dr.Body, &c)
			id, _ := json.Marshal(c.CallID)
			steps = append(steps, journal.Draft{Type: "tool_result", Body: json.RawMessage(`{"call_id":` + string(id) + `,"content":[{"type":"text","text":"{\"temp_c\":18}"}],"is_error":false}`)})
		}
	}
	after, _ := offlineStep(t, steps...)
	reasoned, _ := offlineStep(t, userSays("!reason Keep it short.\nWhat is tern?"))

	got := "# plain\n" + lines(plain) + "# reasoning and parallel calls\n" + lines(calls) +
		"# after the results\n" + lines(after) + "# reasoning, then a reply\n" + lines(reasoned)
	golden := filepath.Join("testdata", "offline", "script.golden")
	if os.Getenv("TERN_UPDATE_GOLDEN") != "" {
		os.MkdirAll(filepath.Dir(golden), 0o755)
		os.WriteFile(golden, []byte(got), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("the offline model's script changed:\n%s\nwant\n%s", got, want)
	}
	for _, res := range []*Result{plain, calls, after, reasoned} {
		rendersEverywhere(t, res)
	}
	if !strings.Contains(lines(after), `get_weather returned {\"temp_c\":18}`) {
		t.Errorf("the answer after the results does not quote them:\n%s", lines(after))
	}
}

func TestTheOfflineModelIsDeterministic(t *testing.T) {
	a, _ := offlineStep(t, userSays("!call get_weather {\"city\":\"Paris\"}"))
	b, _ := offlineStep(t, userSays("!call get_weather {\"city\":\"Paris\"}"))
	if lines(a) != lines(b) {
		t.Fatalf("two runs differ:\n%s\n%s", lines(a), lines(b))
	}
}

func TestAProbeOfTheOfflineModelSaysOK(t *testing.T) {
	p, err := RunProbe(context.Background(), offline, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Reply != `OK. You said: "Say OK."` || p.FirstDeltaMS <= 0 || p.Usage.OutputTokens == 0 {
		t.Fatalf("%+v", p)
	}
}
