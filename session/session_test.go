package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tern-dev/tern/journal"
)

// log is a journal being written: drafts become events with ids e1, e2, …
// and are applied to the state as they are written.
type log struct {
	t      *testing.T
	st     *State
	events []*journal.Event
}

func newLog(t *testing.T, sessions ...string) *log {
	l := &log{t: t, st: Derive(nil)}
	for _, s := range sessions {
		l.write(journal.Draft{Type: SessionCreated, Session: s, Body: json.RawMessage(`{}`)})
	}
	return l
}

func (l *log) write(drafts ...journal.Draft) []*journal.Event {
	var out []*journal.Event
	for _, d := range drafts {
		body := d.Body
		if len(body) == 0 {
			body = json.RawMessage(`{}`)
		}
		e := &journal.Event{ID: fmt.Sprintf("e%d", len(l.events)+1), V: 1, Type: d.Type, Session: d.Session, Turn: d.Turn, Body: body}
		l.events = append(l.events, e)
		l.st.Apply(e)
		out = append(out, e)
	}
	return out
}

// plan plans req in session s and writes its events; it fails the test on
// a refusal.
func (l *log) plan(s string, req Request) {
	l.t.Helper()
	ds, err := l.st.Plan(s, req)
	if err != nil {
		l.t.Fatal(err)
	}
	l.write(ds...)
}

func draft(s, turn, typ, body string) journal.Draft {
	return journal.Draft{Type: typ, Session: s, Turn: turn, Body: json.RawMessage(body)}
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

func TestOneTurnRunsPerSessionUnlessTheRequestCancelsIt(t *testing.T) {
	l := newLog(t, "s")
	l.plan("s", Request{Turn: "t1", Text: "hello"})
	s := l.st.Session("s")
	if a := s.Active(); a == nil || a.ID != "t1" {
		t.Fatalf("active %+v, want t1", a)
	}
	_, err := l.st.Plan("s", Request{Turn: "t2", Text: "again"})
	if !errors.Is(err, ErrTurnRunning) || !strings.Contains(err.Error(), "t1") {
		t.Fatalf("a second turn: %v; want ErrTurnRunning naming t1", err)
	}
	ds, err := l.st.Plan("s", Request{Turn: "t2", Text: "instead", CancelActive: true})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, d := range ds {
		types = append(types, d.Type+"/"+d.Turn)
	}
	if got := strings.Join(types, " "); got != "turn.ended/t1 turn.started/t2 message/t2" {
		t.Fatalf("cancel_active wrote %s", got)
	}
	l.write(ds...)
	if t1 := s.Turn("t1"); t1.Status != Cancelled || t1.CancelledBy != "t2" {
		t.Fatalf("t1 %+v: want cancelled by t2", t1)
	}
	if _, err := l.st.Plan("s", Request{Turn: "t2", Text: "x", CancelActive: true}); !errors.Is(err, ErrTurnExists) {
		t.Fatalf("a reused turn id: %v", err)
	}
	if _, err := l.st.Plan("nope", Request{Turn: "t9", Text: "x"}); !errors.Is(err, ErrNoSession) {
		t.Fatalf("an unknown session: %v", err)
	}
	if _, err := l.st.Plan("s", Request{Turn: "t9", CancelActive: true}); !errors.Is(err, ErrEmptyRequest) {
		t.Fatalf("an empty request: %v", err)
	}
}

// pausedWithThree writes a turn whose model made three parallel calls and
// that paused for two approvals and one client-side output.
func pausedWithThree(t *testing.T) (*log, []Action) {
	l := newLog(t, "s")
	l.plan("s", Request{Turn: "t1", Text: "refund both orders and ask the client for the receipt"})
	calls := l.write(
		draft("s", "t1", "tool_call", `{"call_id":"c1","name":"refund","arguments":{"order":1}}`),
		draft("s", "t1", "tool_call", `{"call_id":"c2","name":"refund","arguments":{"order":2}}`),
		draft("s", "t1", "tool_call", `{"call_id":"c3","name":"receipt","arguments":{}}`),
	)
	actions := []Action{
		{ID: ActionID(KindApproval, calls[0].ID), Kind: KindApproval, Tool: "refund", CallID: "c1", Message: calls[0].ID},
		{ID: ActionID(KindApproval, calls[1].ID), Kind: KindApproval, Tool: "refund", CallID: "c2", Message: calls[1].ID},
		{ID: ActionID(KindToolOutput, calls[2].ID), Kind: KindToolOutput, Tool: "receipt", CallID: "c3", Message: calls[2].ID},
	}
	body, _ := json.Marshal(map[string]any{"status": Paused, "required_actions": actions})
	l.write(journal.Draft{Type: TurnEnded, Session: "s", Turn: "t1", Body: body})
	return l, actions
}

func TestAPausedTurnIsContinuedOnlyByTheCompleteMatchingSetOfAnswers(t *testing.T) {
	l, as := pausedWithThree(t)
	s := l.st.Session("s")
	if s.Last().Status != Paused || len(s.Pending()) != 3 {
		t.Fatalf("t1 %+v, pending %d", s.Last(), len(s.Pending()))
	}
	receipt := json.RawMessage(`{"url":"https://example.com/r.pdf"}`)
	for _, c := range []struct {
		name string
		req  Request
		want error
		says string
	}{
		{"no answers", Request{Turn: "t2", Text: "go on"}, ErrPartialAnswers, as[0].ID},
		{"two of three", Request{Turn: "t2", Responses: []Response{{ActionID: as[0].ID, Approve: yes()}, {ActionID: as[1].ID, Approve: no()}}}, ErrPartialAnswers, as[2].ID},
		{"an unknown action", Request{Turn: "t2", Responses: []Response{{ActionID: "act_approval_nope", Approve: yes()}}}, ErrUnknownAction, "act_approval_nope"},
		{"an answer twice", Request{Turn: "t2", Responses: []Response{{ActionID: as[0].ID, Approve: yes()}, {ActionID: as[0].ID, Approve: no()}}}, ErrDuplicateAnswer, as[0].ID},
		{"an approval given output", Request{Turn: "t2", Responses: []Response{{ActionID: as[0].ID, Output: receipt}, {ActionID: as[1].ID, Approve: yes()}, {ActionID: as[2].ID, Output: receipt}}}, ErrMismatchedAnswer, "takes \"approve\""},
		{"an output that is not JSON", Request{Turn: "t2", Responses: []Response{{ActionID: as[0].ID, Approve: yes()}, {ActionID: as[1].ID, Approve: yes()}, {ActionID: as[2].ID, Output: json.RawMessage(`{nope`)}}}, ErrMismatchedAnswer, "not JSON"},
		{"two answers in one", Request{Turn: "t2", Responses: []Response{{ActionID: as[0].ID, Approve: yes(), Authorization: "x"}, {ActionID: as[1].ID, Approve: yes()}, {ActionID: as[2].ID, Output: receipt}}}, ErrMismatchedAnswer, "no single answer"},
		{"no action id", Request{Turn: "t2", Responses: []Response{{Approve: yes()}}}, ErrUnknownAction, "responses[0]"},
	} {
		ds, err := l.st.Plan("s", c.req)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) || ds != nil {
			t.Errorf("%s: %v (%d events); want %v saying %q, and nothing written", c.name, err, len(ds), c.want, c.says)
		}
	}
	if len(s.Pending()) != 3 {
		t.Fatal("a refused request changed the pending set")
	}

	l.plan("s", Request{Turn: "t2", Text: "thanks", Responses: []Response{
		{ActionID: as[2].ID, Output: receipt}, {ActionID: as[0].ID, Approve: yes()}, {ActionID: as[1].ID, Approve: no()}}})
	t2 := s.Turn("t2")
	if t2.Continues != "t1" || len(s.Pending()) != 0 || s.Active() != t2 {
		t.Fatalf("t2 %+v, pending %v", t2, s.Pending())
	}
	if t1 := s.Turn("t1"); t1.Status != Paused || t1.ContinuedBy != "t2" {
		t.Fatalf("t1 %+v: want paused, continued by t2", t1)
	}
	var answered []string
	for _, e := range l.events {
		if e.Type == ActionAnswered {
			answered = append(answered, string(e.Body))
		}
	}
	if len(answered) != 3 || !strings.Contains(answered[1], `"approve":true`) || !strings.Contains(answered[2], `"approve":false`) || !strings.Contains(answered[0], `"output":{"url"`) {
		t.Fatalf("answers recorded: %v", answered)
	}
	l.write(draft("s", "t2", TurnEnded, `{"status":"completed"}`))
	_, err := l.st.Plan("s", Request{Turn: "t3", Responses: []Response{{ActionID: as[0].ID, Approve: yes()}}})
	if !errors.Is(err, ErrStaleAnswer) || !strings.Contains(err.Error(), "t2") {
		t.Fatalf("answering again: %v; want ErrStaleAnswer naming t2", err)
	}
}

func TestUnfinishedEffectsAndDanglingCallsAreFound(t *testing.T) {
	l, as := pausedWithThree(t)
	l.plan("s", Request{Turn: "t2", Responses: []Response{
		{ActionID: as[0].ID, Approve: yes()}, {ActionID: as[1].ID, Approve: yes()}, {ActionID: as[2].ID, Output: json.RawMessage(`{}`)}}})
	l.write(
		draft("s", "t2", OperationIntent, `{"operation_id":"op1","call_id":"c1","tool":"refund","effect":"at-most-once"}`),
		draft("s", "t2", OperationOutcome, `{"operation_id":"op1","status":"committed"}`),
		draft("s", "t2", "tool_result", `{"call_id":"c1","content":[],"is_error":false}`),
		draft("s", "t2", OperationIntent, `{"operation_id":"op2","call_id":"c2","tool":"refund","effect":"at-most-once"}`),
		// crash: no outcome for op2
		draft("s", "t2", "tool_result", `{"call_id":"c3","content":[],"is_error":false}`),
		draft("s", "t2", "tool_call", `{"call_id":"c4","name":"read_file","arguments":{"path":"a"}}`),
		// cut: c4 never ran
	)
	s := l.st.Session("s")
	un := s.Unfinished()
	if len(un) != 1 || un[0].OperationID != "op2" || un[0].Effect != "at-most-once" {
		t.Fatalf("unfinished %+v, want op2", un)
	}
	dang := s.Dangling()
	if len(dang) != 1 || dang[0].CallID != "c4" {
		t.Fatalf("dangling %+v, want c4 alone (c2 has an intent, the others results)", dang)
	}
	a := s.ReconcileAction(un[0])
	if a.Kind != KindReconcile || a.Operation != "op2" || a.CallID != "c2" || a.Message == "" || string(a.Arguments) != `{"order":2}` {
		t.Fatalf("reconcile action %+v", a)
	}
}

func TestAnAtMostOnceEffectIsNeverRetriedBlind(t *testing.T) {
	for _, c := range []struct {
		effect string
		check  Check
		want   Verdict
	}{
		{"at-most-once", CheckCommitted, Record},
		{"at-most-once", CheckNotCommitted, Retry},
		{"at-most-once", CheckUnknown, Ask},
		{"idempotent", CheckCommitted, Record},
		{"idempotent", CheckNotCommitted, Retry},
		{"idempotent", CheckUnknown, Retry},
	} {
		if got := Reconcile(Intent{Effect: c.effect}, c.check); got != c.want {
			t.Errorf("%s, check %d: %d, want %d", c.effect, c.check, got, c.want)
		}
	}
}

// Sessions are a function of the journal: deriving the same events again
// gives the same sessions, and bad events become notes, not failures.
func TestStateIsAFunctionOfTheEvents(t *testing.T) {
	l, _ := pausedWithThree(t)
	l.write(draft("s", "ghost", TurnEnded, `{"status":"completed"}`), draft("s", "t1", TurnEnded, `{"status":"completed"}`))
	again := Derive(l.events)
	a, b := l.st.Session("s"), again.Session("s")
	if fmt.Sprint(a.Turns[0], a.Pending()) != fmt.Sprint(b.Turns[0], b.Pending()) {
		t.Fatalf("derived twice, differently:\n%v\n%v", a.Turns[0], b.Turns[0])
	}
	if len(again.Notes) != 2 || !strings.Contains(again.Notes[0], "never started") || !strings.Contains(again.Notes[1], "ended twice") {
		t.Fatalf("notes %q", again.Notes)
	}
	if b.Turns[0].Status != Paused {
		t.Fatal("a second end changed a turn")
	}
}

// Two copies written apart that each started a turn in one session merge
// into one running turn: the later one; the earlier is cancelled.
func TestTwoTurnsStartedApartMergeIntoOneRunning(t *testing.T) {
	l := newLog(t, "s")
	l.write(draft("s", "a", TurnStarted, `{}`), draft("s", "b", TurnStarted, `{}`))
	s := l.st.Session("s")
	if s.Active().ID != "b" || s.Turn("a").Status != Cancelled || s.Turn("a").CancelledBy != "b" {
		t.Fatalf("turns %+v %+v", s.Turn("a"), s.Turn("b"))
	}
}
