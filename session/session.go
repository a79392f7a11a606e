// Package session derives an agent's sessions and turns from its journal
// and decides, purely, what a request to continue them may do: Agent →
// Session → Turn → Event → Delta. Like fencing, it does no I/O and keeps
// no clock: state is a function of the journal's events in their total
// order, so it syncs, merges and migrates with the capsule, and every node
// that holds the same events derives the same sessions.
//
// Three recoveries stay apart (docs/SESSIONS.md):
//
//   - transport: a client that lost its stream reconnects to the same turn
//     (the node's business; each event of a turn has a sequence number);
//   - workflow: a turn paused with required actions is continued by a turn
//     whose answers match the pending set exactly (Plan);
//   - effects: a non-pure tool call has an operation.intent before it and an
//     operation.outcome after; an intent without an outcome is reconciled
//     before anything else (Unfinished), and a call with neither a result
//     nor an intent gets an explicit error result (Dangling).
package session

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tern-dev/tern/journal"
)

// The event types this package reads and writes. Render skips the
// session., turn., action. and operation. families silently.
const (
	SessionCreated   = "session.created"  // {} : an empty session exists
	TurnStarted      = "turn.started"     // {"continues"?: turn, "model"?: {"provider","name"}}
	TurnEnded        = "turn.ended"       // {"status", "error"?, "retryable"?, "cancelled_by"?, "required_actions"?: [Action]}
	ActionAnswered   = "action.answered"  // {"action_id", "kind", "approve"? | "output"? | "authorized"?}
	OperationIntent  = "operation.intent" // {"operation_id", "call_id", "tool", "effect"}
	OperationOutcome = "operation.outcome"
)

// Status is a turn's state.
type Status string

// The states of a turn. Only running is not final; paused waits for a
// turn that answers its required actions.
const (
	Running   Status = "running"
	Completed Status = "completed"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
	Paused    Status = "paused"
)

// Kind is what a required action asks of a person or a client.
type Kind string

// The kinds of required action.
const (
	KindApproval   Kind = "approval"      // approve or deny a tool call
	KindToolOutput Kind = "client_output" // the client runs the tool and gives its output
	KindMCPAuth    Kind = "mcp_auth"      // authorize an MCP server
	KindReconcile  Kind = "reconcile"     // say whether an uncertain effect happened
)

// Action is a required action of a paused turn.
type Action struct {
	ID        string          `json:"id"`   // globally unique: derived from the call's event id
	Kind      Kind            `json:"kind"` // what it asks
	Tool      string          `json:"tool"`
	CallID    string          `json:"call_id"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Message is the journal id of the event that proposed the call (the
	// model's tool_call).
	Message string `json:"message"`
	// Operation is the operation id a reconcile action is about.
	Operation string `json:"operation,omitempty"`
	// Server, URL and Scopes are an mcp_auth action's: the MCP server that
	// waits for authorization, where the person authorizes it, and the
	// scopes it asks for.
	Server string   `json:"server,omitempty"`
	URL    string   `json:"url,omitempty"`
	Scopes []string `json:"scopes,omitempty"`
}

// ActionID is the id of the action about the call in event callEvent: a
// journal id is unique and every node derives the same.
func ActionID(kind Kind, callEvent string) string {
	return "act_" + string(kind) + "_" + callEvent
}

// Turn is one turn of a session.
type Turn struct {
	ID        string
	Session   string
	Status    Status
	Continues string // the paused turn whose actions this one answered, if any
	// ContinuedBy is the turn that answered this paused turn's actions,
	// if one did.
	ContinuedBy string
	Error       string // why it failed
	// Retryable says the failure was the model API's, unreachable or
	// rate limiting: the same turn again may work.
	Retryable bool
	Actions   []Action // a paused turn's required actions
	// Events are the journal ids of the turn's events in order: an event's
	// position (from 1) is its sequence number within the turn.
	Events []string
	// CancelledBy is the turn that cancelled this one (cancel_active).
	CancelledBy string
	// Model is the provider and model turn.started asked for, if any:
	// this turn talks to it instead of agent.json's.
	Model *Model
}

// Answer is what a continuing turn answered to one action.
type Answer struct {
	Turn string // the turn that answered
	Response
}

// Session is one conversation: its turns in order.
type Session struct {
	ID    string
	Turns []*Turn
	// answered holds the actions already answered: the first answer each.
	answered map[string]Answer
	calls    []*Call            // tool calls in journal order
	byCall   map[string]*Call   // by call id: the latest call with that id
	intents  []*Intent          // operation intents in journal order
	byOp     map[string]*Intent // by operation id
}

// Call is a tool call the model made, and what became of it.
type Call struct {
	CallID    string
	Tool      string
	Arguments json.RawMessage
	Event     string // the tool_call event's id
	Turn      string
	Result    bool // a tool_result answers it
}

// Intent is an operation.intent: a non-pure tool call about to run.
type Intent struct {
	OperationID string `json:"operation_id"`
	CallID      string `json:"call_id"`
	Tool        string `json:"tool"`
	Effect      string `json:"effect"` // idempotent or at-most-once
	Event       string `json:"-"`      // the intent event's id
	Turn        string `json:"-"`
	Outcome     bool   `json:"-"` // an operation.outcome records how it ended
}

// Active returns the session's running turn, or nil.
func (s *Session) Active() *Turn {
	if n := len(s.Turns); n > 0 && s.Turns[n-1].Status == Running {
		return s.Turns[n-1]
	}
	return nil
}

// Last returns the session's last turn, or nil.
func (s *Session) Last() *Turn {
	if n := len(s.Turns); n > 0 {
		return s.Turns[n-1]
	}
	return nil
}

// Pending returns the actions waiting for an answer: those of the last
// turn if it is paused, without those already answered.
func (s *Session) Pending() []Action {
	t := s.Last()
	if t == nil || t.Status != Paused {
		return nil
	}
	var out []Action
	for _, a := range t.Actions {
		if _, done := s.answered[a.ID]; !done {
			out = append(out, a)
		}
	}
	return out
}

// Answered returns the answer given to the action id, if one was.
func (s *Session) Answered(actionID string) (Answer, bool) {
	a, ok := s.answered[actionID]
	return a, ok
}

// Call returns the latest tool call with the call id, or nil.
func (s *Session) Call(callID string) *Call { return s.byCall[callID] }

// Open returns the tool calls that have neither a result nor an intent, in
// journal order: calls not yet run (or never to run). Calls whose id a
// later call reuses count once, as the later.
func (s *Session) Open() []Call {
	intended := map[string]bool{}
	for _, in := range s.intents {
		intended[in.CallID] = true
	}
	var out []Call
	for _, c := range s.calls {
		if !c.Result && !intended[c.CallID] && s.byCall[c.CallID] == c {
			out = append(out, *c)
		}
	}
	return out
}

// Turn returns the session's turn id, or nil.
func (s *Session) Turn(id string) *Turn {
	for _, t := range s.Turns {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// State is every session of an agent, derived from its journal.
type State struct {
	Sessions map[string]*Session
	// Notes say what was wrong with events that could not be applied (a
	// turn.ended for an unknown turn, a malformed body). They never stop
	// the rest.
	Notes []string
}

// Derive builds the state from events in the journal's total order (the
// readable events, journal.Sort).
func Derive(events []*journal.Event) *State {
	st := &State{Sessions: map[string]*Session{}}
	for _, e := range events {
		st.Apply(e)
	}
	return st
}

// Session returns the session id, or nil.
func (st *State) Session(id string) *Session { return st.Sessions[id] }

func (st *State) session(id string) *Session {
	s := st.Sessions[id]
	if s == nil {
		s = &Session{ID: id, answered: map[string]Answer{}, byCall: map[string]*Call{}, byOp: map[string]*Intent{}}
		st.Sessions[id] = s
	}
	return s
}

func (st *State) notef(e *journal.Event, format string, args ...any) {
	st.Notes = append(st.Notes, fmt.Sprintf("event %s (%s): ", e.ID, e.Type)+fmt.Sprintf(format, args...))
}

// Apply applies one event, the next in journal order.
func (st *State) Apply(e *journal.Event) {
	if e.Session == "" {
		return
	}
	switch e.Type {
	case TurnStarted:
		var b struct {
			Continues string `json:"continues"`
			Model     *Model `json:"model"`
		}
		if err := json.Unmarshal(e.Body, &b); err != nil || e.Turn == "" {
			st.notef(e, "a turn.started needs a turn id and an object body")
			return
		}
		s := st.session(e.Session)
		if s.Turn(e.Turn) != nil {
			st.notef(e, "turn %s started twice; the second is ignored", e.Turn)
			return
		}
		if a := s.Active(); a != nil {
			// Two turns running at once can only come from copies written
			// apart; the newer wins, the older is recorded as cancelled.
			a.Status, a.CancelledBy = Cancelled, e.Turn
		}
		s.Turns = append(s.Turns, &Turn{ID: e.Turn, Session: e.Session, Status: Running, Continues: b.Continues, Model: b.Model, Events: []string{e.ID}})
		if p := s.Turn(b.Continues); p != nil && p.ContinuedBy == "" {
			p.ContinuedBy = e.Turn
		}
		return
	}
	if e.Type == SessionCreated {
		st.session(e.Session)
		return
	}
	s := st.Sessions[e.Session]
	var t *Turn
	if s != nil && e.Turn != "" {
		t = s.Turn(e.Turn)
	}
	if t != nil {
		t.Events = append(t.Events, e.ID)
	}
	switch e.Type {
	case TurnEnded:
		if t == nil {
			st.notef(e, "turn.ended for turn %q, which never started", e.Turn)
			return
		}
		var b struct {
			Status      Status   `json:"status"`
			Error       string   `json:"error"`
			Retryable   bool     `json:"retryable"`
			CancelledBy string   `json:"cancelled_by"`
			Actions     []Action `json:"required_actions"`
		}
		if err := json.Unmarshal(e.Body, &b); err != nil || !slices.Contains([]Status{Completed, Failed, Cancelled, Paused}, b.Status) {
			st.notef(e, "a turn.ended needs a final status")
			return
		}
		if t.Status != Running {
			st.notef(e, "turn %s ended twice; the first end stands", t.ID)
			return
		}
		t.Status, t.Error, t.Retryable, t.CancelledBy, t.Actions = b.Status, b.Error, b.Retryable, b.CancelledBy, b.Actions
	case ActionAnswered:
		var b Response
		if json.Unmarshal(e.Body, &b) != nil || b.ActionID == "" || s == nil {
			st.notef(e, "an action.answered needs an action_id in a known session")
			return
		}
		if _, done := s.answered[b.ActionID]; !done {
			s.answered[b.ActionID] = Answer{Turn: e.Turn, Response: b}
		}
	case "tool_call", "tool_result", OperationIntent, OperationOutcome:
		if s == nil {
			s = st.session(e.Session) // a conversation written before sessions were recorded
		}
		s.effect(e)
	}
}

// effect applies a tool call, a result, an intent or an outcome.
func (s *Session) effect(e *journal.Event) {
	var b struct {
		CallID      string          `json:"call_id"`
		Name        string          `json:"name"`
		Arguments   json.RawMessage `json:"arguments"`
		OperationID string          `json:"operation_id"`
		Tool        string          `json:"tool"`
		Effect      string          `json:"effect"`
	}
	if json.Unmarshal(e.Body, &b) != nil {
		return
	}
	switch e.Type {
	case "tool_call":
		c := &Call{CallID: b.CallID, Tool: b.Name, Arguments: b.Arguments, Event: e.ID, Turn: e.Turn}
		s.calls = append(s.calls, c)
		s.byCall[b.CallID] = c
	case "tool_result":
		if c := s.byCall[b.CallID]; c != nil {
			c.Result = true
		}
	case OperationIntent:
		if b.OperationID == "" || s.byOp[b.OperationID] != nil {
			return
		}
		in := &Intent{OperationID: b.OperationID, CallID: b.CallID, Tool: b.Tool, Effect: b.Effect, Event: e.ID, Turn: e.Turn}
		s.intents = append(s.intents, in)
		s.byOp[b.OperationID] = in
	case OperationOutcome:
		if in := s.byOp[b.OperationID]; in != nil {
			in.Outcome = true
		}
	}
}
