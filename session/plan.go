package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tern-dev/tern/journal"
)

// What a request can be refused for, for errors.Is. Each refusal changes
// nothing: Plan returns no drafts with it.
var (
	// ErrNoSession: the session does not exist (404).
	ErrNoSession = errors.New("no such session")
	// ErrTurnRunning: a turn runs in the session and the request did not
	// ask cancel_active (409, naming the turn).
	ErrTurnRunning = errors.New("a turn is running")
	// ErrTurnExists: the new turn's id is taken (409).
	ErrTurnExists = errors.New("the turn exists")
	// ErrEmptyRequest: neither text nor answers (400).
	ErrEmptyRequest = errors.New("the request has neither text nor answers")
	// ErrUnknownAction: an answer names an action no turn asked for (422).
	ErrUnknownAction = errors.New("unknown action")
	// ErrDuplicateAnswer: the request answers one action twice (400).
	ErrDuplicateAnswer = errors.New("an action answered twice")
	// ErrStaleAnswer: the action was answered already (409).
	ErrStaleAnswer = errors.New("the action was answered already")
	// ErrPartialAnswers: actions are pending that the request leaves
	// unanswered (422): a paused turn is continued by answering them all.
	ErrPartialAnswers = errors.New("the answers are incomplete")
	// ErrMismatchedAnswer: the answer is not of the action's kind (422).
	ErrMismatchedAnswer = errors.New("the answer does not fit the action")
)

// Request asks a session for a new turn.
type Request struct {
	// Turn is the new turn's id, unique in the journal (the caller
	// makes it).
	Turn string
	// Text is the user's message, if any.
	Text string
	// Responses answer the pending actions: all of them, or none if none
	// is pending.
	Responses []Response
	// CancelActive cancels the running turn, if there is one, instead of
	// being refused.
	CancelActive bool
	// Model switches provider and model for this turn; nil keeps
	// agent.json's.
	Model *Model
}

// Model names a provider and a model.
type Model struct {
	Provider string `json:"provider"`
	Name     string `json:"name"`
}

// Response answers one required action: Approve for an approval (and a
// reconcile: true, the effect happened; false, it did not), Output for a
// client-side tool, Authorization for an MCP server.
type Response struct {
	ActionID      string          `json:"action_id"`
	Approve       *bool           `json:"approve,omitempty"`
	Output        json.RawMessage `json:"output,omitempty"`
	Authorization string          `json:"authorization,omitempty"`
}

// kind is the kind of answer r gives, or "" if it gives none or several.
func (r *Response) kind() string {
	var kinds []string
	if r.Approve != nil {
		kinds = append(kinds, "approve")
	}
	if len(r.Output) > 0 {
		kinds = append(kinds, "output")
	}
	if r.Authorization != "" {
		kinds = append(kinds, "authorization")
	}
	if len(kinds) != 1 {
		return ""
	}
	return kinds[0]
}

// answers is the kind of answer each action kind takes.
var answers = map[Kind]string{KindApproval: "approve", KindReconcile: "approve", KindToolOutput: "output", KindMCPAuth: "authorization"}

// Plan checks req against the session and returns the events that start
// the new turn, in order: the cancellation of the running turn (if
// CancelActive), turn.started, one action.answered per response, and the
// user's message. A refusal returns an error (wrapping one of the Err*
// above, saying what was wrong and with which action) and no events.
func (st *State) Plan(session string, req Request) ([]journal.Draft, error) {
	s := st.Sessions[session]
	if s == nil {
		return nil, fmt.Errorf("session %q: %w", session, ErrNoSession)
	}
	if req.Turn == "" {
		return nil, errors.New("plan: the new turn has no id")
	}
	if s.Turn(req.Turn) != nil {
		return nil, fmt.Errorf("turn %q: %w", req.Turn, ErrTurnExists)
	}
	if strings.TrimSpace(req.Text) == "" && len(req.Responses) == 0 {
		return nil, ErrEmptyRequest
	}
	active := s.Active()
	if active != nil && !req.CancelActive {
		return nil, fmt.Errorf("turn %s is running in session %s: wait for it, cancel it, or ask cancel_active: %w", active.ID, session, ErrTurnRunning)
	}
	pending := s.Pending()
	if active != nil {
		pending = nil // the running turn is cancelled: nothing of it waits
	}
	if err := s.check(req.Responses, pending); err != nil {
		return nil, err
	}

	var out []journal.Draft
	add := func(turn, typ string, body any) {
		b, err := json.Marshal(body)
		if err != nil {
			panic(err) // maps and strings only
		}
		out = append(out, journal.Draft{Type: typ, Session: session, Turn: turn, Body: b})
	}
	if active != nil {
		add(active.ID, TurnEnded, map[string]any{"status": Cancelled, "cancelled_by": req.Turn})
	}
	started := map[string]any{}
	if len(req.Responses) > 0 {
		started["continues"] = s.Last().ID
	}
	if req.Model != nil {
		started["model"] = req.Model
	}
	add(req.Turn, TurnStarted, started)
	byID := map[string]Action{}
	for _, a := range pending {
		byID[a.ID] = a
	}
	for _, r := range req.Responses {
		a := byID[r.ActionID]
		body := map[string]any{"action_id": r.ActionID, "kind": a.Kind, "call_id": a.CallID}
		switch {
		case r.Approve != nil:
			body["approve"] = *r.Approve
		case len(r.Output) > 0:
			body["output"] = r.Output
		default: // the code or token itself goes to the node's keyring, never to the journal
			body["authorized"] = true
		}
		add(req.Turn, ActionAnswered, body)
	}
	if strings.TrimSpace(req.Text) != "" {
		add(req.Turn, "message", map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": req.Text}}})
	}
	return out, nil
}

// check checks answers against the pending actions: every one known,
// pending, answered once, with an answer of its kind, and none left out.
func (s *Session) check(rs []Response, pending []Action) error {
	byID := map[string]Action{}
	for _, a := range pending {
		byID[a.ID] = a
	}
	seen := map[string]bool{}
	for i, r := range rs {
		a, ok := byID[r.ActionID]
		switch {
		case r.ActionID == "":
			return fmt.Errorf("responses[%d] names no action_id: %w", i, ErrUnknownAction)
		case seen[r.ActionID]:
			return fmt.Errorf("responses[%d]: action %s: %w", i, r.ActionID, ErrDuplicateAnswer)
		case !ok && s.answered[r.ActionID].Turn != "":
			return fmt.Errorf("responses[%d]: action %s was answered by turn %s: %w", i, r.ActionID, s.answered[r.ActionID].Turn, ErrStaleAnswer)
		case !ok:
			return fmt.Errorf("responses[%d]: action %s: %w (pending: %s)", i, r.ActionID, ErrUnknownAction, ids(pending))
		}
		seen[r.ActionID] = true
		want := answers[a.Kind]
		declined := r.kind() == "approve" && !*r.Approve // any action may be declined: the call gets an error result
		if got := r.kind(); got != want && !declined {
			if got == "" {
				got = "no single answer"
			}
			return fmt.Errorf("responses[%d]: action %s (%s of %s) takes %q (or \"approve\": false to decline it), not %s: %w", i, a.ID, a.Kind, a.Tool, want, got, ErrMismatchedAnswer)
		}
		if a.Kind == KindToolOutput && !declined && !json.Valid(r.Output) {
			return fmt.Errorf("responses[%d]: action %s: output is not JSON: %w", i, a.ID, ErrMismatchedAnswer)
		}
	}
	var missing []Action
	for _, a := range pending {
		if !seen[a.ID] {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %d of %d pending actions have no answer (%s); answer them all in one turn (deny, \"approve\": false, what you do not want)", ErrPartialAnswers, len(missing), len(pending), ids(missing))
	}
	return nil
}

func ids(as []Action) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
