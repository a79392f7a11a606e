package session

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/tern-dev/tern/journal"
)

// tools is a policy for Next's tests: read runs at once, deploy asks for
// approval, pay is the client's, shell is a built-in nobody offered here.
var tools = Policy{MaxSteps: 3, Tool: func(name string, _ json.RawMessage) ToolPolicy {
	switch name {
	case "read":
		return ToolPolicy{Offered: true, Runs: true}
	case "deploy", "fix":
		return ToolPolicy{Offered: true, Runs: true, Approval: true}
	case "pay":
		return ToolPolicy{Offered: true}
	}
	return ToolPolicy{Missing: "no tool " + name}
}}

// scene is a session "s" whose turn t1 runs: what the tests of Next add
// to it.
type scene struct {
	*log
	calls map[string]*journal.Event // by call id
}

func newScene(t *testing.T) *scene {
	l := newLog(t, "s")
	l.plan("s", Request{Turn: "t1", Text: "go"})
	return &scene{log: l, calls: map[string]*journal.Event{}}
}

// call has the model of turn call a tool.
func (s *scene) call(turn, id, name string) *scene {
	s.calls[id] = s.write(draft("s", turn, "tool_call", `{"call_id":"`+id+`","name":"`+name+`","arguments":{}}`))[0]
	return s
}

// intent records an operation.intent for a call, with no outcome.
func (s *scene) intent(id, name, effect string) *scene {
	op := OperationID(s.calls[id].ID)
	s.write(draft("s", "t1", OperationIntent, `{"operation_id":"`+op+`","call_id":"`+id+`","tool":"`+name+`","effect":"`+effect+`"}`))
	return s
}

func (s *scene) say(role string) *scene {
	s.write(draft("s", "t1", "message", `{"role":"`+role+`","content":[{"type":"text","text":"…"}]}`))
	return s
}

// answered pauses t1 with one action and has t2 answer it with r.
func (s *scene) answered(a Action, r Response) *scene {
	body, _ := json.Marshal(map[string]any{"status": Paused, "required_actions": []Action{a}})
	s.write(journal.Draft{Type: TurnEnded, Session: "s", Turn: "t1", Body: body})
	r.ActionID = a.ID
	s.plan("s", Request{Turn: "t2", Responses: []Response{r}})
	return s
}

func (s *scene) action(kind Kind, id string) Action {
	c := s.calls[id]
	return Action{ID: ActionID(kind, c.ID), Kind: kind, Tool: "x", CallID: id, Message: c.ID}
}

func (s *scene) view(turn string) View {
	sess := s.st.Session("s")
	return View{Session: sess, Turn: sess.Turn(turn), Events: s.events, Checks: map[string]Check{}}
}

// Every branch of Next, each as the runtime meets it: what a turn does
// next is a function of the session, the policy and what the runtime
// learnt (checks, MCP servers waiting).
func TestNextDecidesWhatATurnDoesNext(t *testing.T) {
	mcpAuth := Action{ID: "act_mcp_auth_web", Kind: KindMCPAuth, Server: "web"}
	for _, tc := range []struct {
		name    string
		build   func(s *scene) View
		want    Do
		check   func(t *testing.T, s *scene, d Decision)
		actions []Kind // of d.Actions, in order
	}{
		{"a turn that does not run does nothing", func(s *scene) View {
			s.write(draft("s", "t1", TurnEnded, `{"status":"completed"}`))
			return s.view("t1")
		}, DoStop, nil, nil},
		{"a user's message asks the model", func(s *scene) View { return s.view("t1") }, DoStep, nil, nil},
		{"the model's answer completes the turn", func(s *scene) View { return s.say("assistant").view("t1") }, DoComplete, nil, nil},
		{"a tool result asks the model again", func(s *scene) View {
			s.say("assistant").call("t1", "c1", "read")
			s.write(draft("s", "t1", "tool_result", `{"call_id":"c1","content":[],"is_error":false}`))
			return s.view("t1")
		}, DoStep, nil, nil},
		{"too many steps fail the turn", func(s *scene) View {
			v := s.view("t1")
			v.Steps = 3
			return v
		}, DoFail, func(t *testing.T, _ *scene, d Decision) {
			if d.Why != "the model took 3 steps without finishing the turn" {
				t.Fatalf("why %q", d.Why)
			}
		}, nil},
		{"a call that needs nothing runs", func(s *scene) View { return s.call("t1", "c1", "read").view("t1") }, DoRun,
			func(t *testing.T, s *scene, d Decision) {
				if d.CallID != "c1" || d.OperationID != OperationID(s.calls["c1"].ID) || d.Approved || d.Retry {
					t.Fatalf("%+v", d)
				}
			}, nil},
		{"a call that needs approval pauses", func(s *scene) View { return s.call("t1", "c1", "deploy").view("t1") }, DoPause, nil, []Kind{KindApproval}},
		{"a client's tool pauses for its output", func(s *scene) View { return s.call("t1", "c1", "pay").view("t1") }, DoPause, nil, []Kind{KindToolOutput}},
		{"a tool not offered is answered with why", func(s *scene) View { return s.call("t1", "c1", "shell").view("t1") }, DoAnswer,
			func(t *testing.T, _ *scene, d Decision) {
				if d.Text != "no tool shell" || !d.IsError {
					t.Fatalf("%+v", d)
				}
			}, nil},
		{"an approved call runs, approved", func(s *scene) View {
			s.call("t1", "c1", "deploy")
			return s.answered(s.action(KindApproval, "c1"), Response{Approve: yes()}).view("t2")
		}, DoRun, func(t *testing.T, _ *scene, d Decision) {
			if !d.Approved || d.CallID != "c1" {
				t.Fatalf("%+v", d)
			}
		}, nil},
		{"a denied call is answered so", func(s *scene) View {
			s.call("t1", "c1", "deploy")
			return s.answered(s.action(KindApproval, "c1"), Response{Approve: no()}).view("t2")
		}, DoAnswer, answer(TextDenied, true), nil},
		{"a client's output is the result", func(s *scene) View {
			s.call("t1", "c1", "pay")
			return s.answered(s.action(KindToolOutput, "c1"), Response{Output: json.RawMessage(`{"paid":true}`)}).view("t2")
		}, DoAnswer, answer(`{"paid":true}`, false), nil},
		{"a call of an earlier turn never runs", func(s *scene) View {
			s.call("t1", "c1", "deploy").call("t1", "c2", "read")
			s.answered(s.action(KindApproval, "c1"), Response{Approve: no()})
			s.write(draft("s", "t2", "tool_result", `{"call_id":"c1","content":[],"is_error":true}`))
			return s.view("t2")
		}, DoAnswer, answer(TextNeverRan, true), nil},
		{"an unfinished call is checked first", func(s *scene) View {
			return s.call("t1", "c1", "deploy").intent("c1", "deploy", "at-most-once").call("t1", "c2", "read").view("t1")
		}, DoCheck, func(t *testing.T, s *scene, d Decision) {
			if d.OperationID != OperationID(s.calls["c1"].ID) || d.Tool != "deploy" {
				t.Fatalf("%+v", d)
			}
		}, nil},
		{"a check that saw the effect records it", func(s *scene) View {
			v := s.call("t1", "c1", "deploy").intent("c1", "deploy", "at-most-once").view("t1")
			v.Checks[OperationID(s.calls["c1"].ID)] = CheckCommitted
			return v
		}, DoAnswer, func(t *testing.T, _ *scene, d Decision) {
			if d.Text != TextChecked || d.IsError || d.Outcome == nil || d.Outcome.Status != "committed" || d.Outcome.By != "status check" {
				t.Fatalf("%+v %+v", d, d.Outcome)
			}
		}, nil},
		{"a check that saw none retries", func(s *scene) View {
			v := s.call("t1", "c1", "deploy").intent("c1", "deploy", "at-most-once").view("t1")
			v.Checks[OperationID(s.calls["c1"].ID)] = CheckNotCommitted
			return v
		}, DoRun, func(t *testing.T, _ *scene, d Decision) {
			if !d.Retry || d.Approved {
				t.Fatalf("%+v", d)
			}
		}, nil},
		{"an idempotent effect nobody can check is retried", func(s *scene) View {
			v := s.call("t1", "c1", "fix").intent("c1", "fix", "idempotent").view("t1")
			v.Checks[OperationID(s.calls["c1"].ID)] = CheckUnknown
			return v
		}, DoRun, nil, nil},
		{"an at-most-once effect nobody can check asks a person", func(s *scene) View {
			v := s.call("t1", "c1", "deploy").intent("c1", "deploy", "at-most-once").view("t1")
			v.Checks[OperationID(s.calls["c1"].ID)] = CheckUnknown
			return v
		}, DoPause, nil, []Kind{KindReconcile}},
		{"a client's unfinished call asks a person without a check", func(s *scene) View {
			return s.call("t1", "c1", "pay").intent("c1", "pay", "idempotent").view("t1")
		}, DoPause, nil, []Kind{KindReconcile}},
		{"a person who says it happened is recorded", func(s *scene) View {
			s.call("t1", "c1", "deploy").intent("c1", "deploy", "at-most-once")
			in := s.st.Session("s").Unfinished()[0]
			return s.answered(s.st.Session("s").ReconcileAction(in), Response{Approve: yes()}).view("t2")
		}, DoAnswer, func(t *testing.T, _ *scene, d Decision) {
			if d.Text != TextHappened || d.IsError || d.Outcome.Status != "committed" || d.Outcome.By != "person" {
				t.Fatalf("%+v", d)
			}
		}, nil},
		{"a person who says it did not happen is recorded, not retried", func(s *scene) View {
			s.call("t1", "c1", "deploy").intent("c1", "deploy", "at-most-once")
			in := s.st.Session("s").Unfinished()[0]
			return s.answered(s.st.Session("s").ReconcileAction(in), Response{Approve: no()}).view("t2")
		}, DoAnswer, func(t *testing.T, _ *scene, d Decision) {
			if d.Text != TextDidNotHappen || !d.IsError || d.Outcome.Status != "not_committed" {
				t.Fatalf("%+v", d)
			}
		}, nil},
		{"a call that runs carries the questions found before it", func(s *scene) View {
			return s.call("t1", "c1", "deploy").call("t1", "c2", "read").view("t1")
		}, DoRun, func(t *testing.T, _ *scene, d Decision) {
			if d.CallID != "c2" {
				t.Fatalf("%+v", d)
			}
		}, []Kind{KindApproval}},
		{"an MCP server waiting pauses the turn", func(s *scene) View {
			v := s.view("t1")
			v.Waiting = []Action{mcpAuth}
			return v
		}, DoPause, nil, []Kind{KindMCPAuth}},
		{"an MCP server waiting is asked after a call that runs", func(s *scene) View {
			v := s.call("t1", "c1", "read").view("t1")
			v.Waiting = []Action{mcpAuth}
			return v
		}, DoRun, nil, []Kind{KindMCPAuth}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScene(t)
			v := tc.build(s)
			d := Next(v, tools)
			if d.Do != tc.want {
				t.Fatalf("Next = %+v, want Do %d", d, tc.want)
			}
			var kinds []Kind
			for _, a := range d.Actions {
				kinds = append(kinds, a.Kind)
			}
			if !slices.Equal(kinds, tc.actions) {
				t.Fatalf("actions %v, want %v", kinds, tc.actions)
			}
			if tc.check != nil {
				tc.check(t, s, d)
			}
		})
	}
}

// answer checks a DoAnswer's text and error flag.
func answer(text string, isError bool) func(t *testing.T, s *scene, d Decision) {
	return func(t *testing.T, _ *scene, d Decision) {
		t.Helper()
		if d.Text != text || d.IsError != isError || d.Outcome != nil {
			t.Fatalf("answer %q (error %v), want %q (%v)", d.Text, d.IsError, text, isError)
		}
	}
}
