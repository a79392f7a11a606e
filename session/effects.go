package session

// Unfinished returns the operations whose intent has no outcome, in
// journal order: effects that may or may not have happened (a crash, or a
// move, between the call and its record). The runtime reconciles each
// (Reconcile) before the session goes on.
func (s *Session) Unfinished() []Intent {
	var out []Intent
	for _, in := range s.intents {
		if !in.Outcome {
			out = append(out, *in)
		}
	}
	return out
}

// Dangling returns the tool calls that have no result, no intent and no
// action waiting for an answer: calls that never ran (the step was cut
// after the model proposed them). The runtime writes render's error result
// for each before the next model call.
func (s *Session) Dangling() []Call {
	waiting := map[string]bool{}
	for _, a := range s.Pending() {
		waiting[a.CallID] = true
	}
	intended := map[string]bool{}
	for _, in := range s.intents {
		intended[in.CallID] = true
	}
	var out []Call
	for _, c := range s.calls {
		if !c.Result && !intended[c.CallID] && !waiting[c.CallID] && s.byCall[c.CallID] == c {
			out = append(out, *c)
		}
	}
	return out
}

// Check is what a tool's status check says of an operation id.
type Check int

// What a status check can say.
const (
	CheckUnknown      Check = iota // no status check, or it could not tell
	CheckCommitted                 // the effect happened
	CheckNotCommitted              // the effect did not happen
)

// Verdict is what to do about an unfinished operation.
type Verdict int

// The verdicts of Reconcile.
const (
	// Record: write its outcome from the check; do not call again.
	Record Verdict = iota + 1
	// Retry: call again with the same operation id (its idempotency key).
	Retry
	// Ask: pause the turn with a reconcile action for a person.
	Ask
)

// Reconcile decides what to do about an unfinished operation given what
// the tool's status check says: committed → record; not committed → retry
// (it happened zero times, so once more is at most once); unknown → retry
// an idempotent effect (the same key makes a second call a no-op), and
// ask a person about an at-most-once one: it is never retried blind.
func Reconcile(in Intent, check Check) Verdict {
	switch {
	case check == CheckCommitted:
		return Record
	case check == CheckNotCommitted:
		return Retry
	case in.Effect == "idempotent":
		return Retry
	}
	return Ask
}

// ReconcileAction is the required action that asks a person whether the
// operation in happened (Approve true: it did; false: it did not).
func (s *Session) ReconcileAction(in Intent) Action {
	a := Action{ID: ActionID(KindReconcile, in.Event), Kind: KindReconcile, Tool: in.Tool, CallID: in.CallID, Operation: in.OperationID}
	if c := s.byCall[in.CallID]; c != nil {
		a.Arguments, a.Message = c.Arguments, c.Event
	}
	return a
}
