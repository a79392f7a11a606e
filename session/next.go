package session

import (
	"encoding/json"
	"fmt"

	"github.com/tern-dev/tern/journal"
)

// ToolPolicy is how the runtime treats a call of one tool: whether the
// agent offers it, whether tern runs it (a built-in or MCP tool) or the
// client gives its output, and whether a call needs a person's approval.
type ToolPolicy struct {
	Offered  bool
	Runs     bool
	Approval bool
	// Missing, for a tool not offered, says why, for the model.
	Missing string
}

// Policy is what the runtime knows that the journal does not: the policy
// of each call (from agent.json, the built-in tools and the MCP servers),
// and how many model steps a turn may take.
type Policy struct {
	Tool     func(name string, args json.RawMessage) ToolPolicy
	MaxSteps int
}

// View is what Next decides from: a running turn of a session, the
// session's readable events in order, and what the runtime learnt that the
// journal does not say.
type View struct {
	Session *Session
	Turn    *Turn
	Events  []*journal.Event
	// Steps is how many model steps the turn has taken.
	Steps int
	// Checks holds what a status check said of an unfinished operation,
	// by operation id; an operation Next needs a check for and that has
	// none here is asked for with DoCheck.
	Checks map[string]Check
	// Waiting are actions from outside the journal that the turn must
	// pause for: MCP servers that wait for a person to authorize tern.
	Waiting []Action
}

// Do is what a Decision asks the runtime to do.
type Do int

// The decisions of Next.
const (
	// DoStop: the turn is not running; nothing is done.
	DoStop Do = iota
	// DoCheck: run the status check of the operation OperationID (the
	// tool's Check) and decide again with its answer in View.Checks.
	DoCheck
	// DoAnswer: append the tool_result Text (IsError) for CallID, after
	// the operation.outcome Outcome when there is one.
	DoAnswer
	// DoRun: run the call (CallID, Tool, Arguments) under OperationID,
	// Approved by a person or not, Retry of an intent already written.
	DoRun
	// DoPause: end the turn paused with Actions.
	DoPause
	// DoStep: take a model step.
	DoStep
	// DoComplete: end the turn completed.
	DoComplete
	// DoFail: end the turn failed, saying Why.
	DoFail
)

// Outcome is an operation.outcome the runtime appends: how an unfinished
// operation ended, and who said so.
type Outcome struct {
	OperationID string `json:"operation_id"`
	Status      string `json:"status"` // committed or not_committed
	By          string `json:"by"`     // person or status check
}

// Decision is what to do next for a turn. After a DoAnswer or a DoRun,
// the runtime ends the turn paused with Actions when there are any (what
// Next found to ask before it came to that call), and otherwise decides
// again.
type Decision struct {
	Do          Do
	CallID      string
	OperationID string
	Tool        string
	Arguments   json.RawMessage
	Approved    bool
	Retry       bool
	Text        string
	IsError     bool
	Outcome     *Outcome
	Actions     []Action
	Why         string
}

// What the runtime tells the model of a call it did not run as asked.
const (
	TextDenied       = "A person denied this call; it did not run."
	TextDeclined     = "The client declined to run this call; it did not run."
	TextNeverRan     = "This call never ran: its turn ended before it did. Call it again if it is still needed."
	TextHappened     = "A person said this call took effect; its output was lost in an interruption."
	TextDidNotHappen = "A person said this call did not take effect; it was not run again. Call it again if it is still needed."
	TextChecked      = "The call took effect before an interruption (its status check says so); its output was not kept."
)

// Next decides what the runtime does next for the running turn of v
// (docs/SESSIONS.md): first what became of each unfinished operation (an
// answer a person gave, the status check's word, a retry, or a question),
// then each open call in order (an answer given, a denial, a call of an
// earlier turn, a tool not offered, a call the client runs, one that
// needs approval, one that runs now); then, with questions, a pause; a
// model's last answer completes the turn; past MaxSteps it fails; else a
// model step. It does no I/O.
func Next(v View, p Policy) Decision {
	if v.Turn == nil || v.Turn.Status != Running {
		return Decision{Do: DoStop}
	}
	var asks []Action
	// then is d, with the questions found so far to pause with after it.
	then := func(d Decision) Decision {
		if len(asks)+len(v.Waiting) > 0 {
			d.Actions = append(append([]Action(nil), asks...), v.Waiting...)
		}
		return d
	}
	s := v.Session
	for _, in := range s.Unfinished() {
		call := s.Call(in.CallID)
		var args json.RawMessage
		if call != nil {
			args = call.Arguments
		}
		act := s.ReconcileAction(in)
		if ans, ok := s.Answered(act.ID); ok {
			happened := ans.Approve != nil && *ans.Approve
			d := Decision{Do: DoAnswer, CallID: in.CallID, Text: TextDidNotHappen, IsError: true,
				Outcome: &Outcome{OperationID: in.OperationID, Status: "not_committed", By: "person"}}
			if happened {
				d.Text, d.IsError, d.Outcome.Status = TextHappened, false, "committed"
			}
			return then(d)
		}
		tp := p.Tool(in.Tool, args)
		check, checked := v.Checks[in.OperationID]
		if tp.Runs && !checked {
			return Decision{Do: DoCheck, OperationID: in.OperationID, CallID: in.CallID, Tool: in.Tool, Arguments: args}
		}
		switch Reconcile(in, check) {
		case Record:
			return then(Decision{Do: DoAnswer, CallID: in.CallID, Text: TextChecked,
				Outcome: &Outcome{OperationID: in.OperationID, Status: "committed", By: "status check"}})
		case Retry:
			if tp.Runs {
				return then(Decision{Do: DoRun, CallID: in.CallID, OperationID: in.OperationID, Tool: in.Tool, Arguments: args, Retry: true})
			}
			asks = append(asks, act)
		default:
			asks = append(asks, act)
		}
	}
	for _, c := range s.Open() {
		tp := p.Tool(c.Tool, c.Arguments)
		run := Decision{Do: DoRun, CallID: c.CallID, OperationID: OperationID(c.Event), Tool: c.Tool, Arguments: c.Arguments}
		if ans, ok := s.Answered(ActionID(KindToolOutput, c.Event)); ok {
			d := Decision{Do: DoAnswer, CallID: c.CallID, Text: string(ans.Output)}
			if ans.Approve != nil && !*ans.Approve {
				d.Text, d.IsError = TextDeclined, true
			}
			return then(d)
		}
		ans, answered := s.Answered(ActionID(KindApproval, c.Event))
		switch {
		case answered && (ans.Approve == nil || !*ans.Approve):
			return then(Decision{Do: DoAnswer, CallID: c.CallID, Text: TextDenied, IsError: true})
		case answered:
			run.Approved = true
			return then(run)
		case c.Turn != v.Turn.ID:
			return then(Decision{Do: DoAnswer, CallID: c.CallID, Text: TextNeverRan, IsError: true})
		case !tp.Offered:
			return then(Decision{Do: DoAnswer, CallID: c.CallID, Text: tp.Missing, IsError: true})
		case !tp.Runs:
			asks = append(asks, callAction(KindToolOutput, c))
		case tp.Approval:
			asks = append(asks, callAction(KindApproval, c))
		default:
			return then(run)
		}
	}
	if len(asks)+len(v.Waiting) > 0 {
		return then(Decision{Do: DoPause})
	}
	if ModelAnswered(v.Events) {
		return Decision{Do: DoComplete}
	}
	if p.MaxSteps > 0 && v.Steps >= p.MaxSteps {
		return Decision{Do: DoFail, Why: fmt.Sprintf("the model took %d steps without finishing the turn", p.MaxSteps)}
	}
	return Decision{Do: DoStep}
}

// OperationID is the operation id of the call in event callEvent: the same
// on every node and every retry, so it works as an idempotency key.
func OperationID(callEvent string) string { return "op_" + callEvent }

// callAction is the required action of kind for the call c.
func callAction(kind Kind, c Call) Action {
	return Action{ID: ActionID(kind, c.Event), Kind: kind, Tool: c.Tool, CallID: c.CallID, Arguments: c.Arguments, Message: c.Event}
}

// ModelAnswered reports whether the last conversation event among events
// is the model's message: the model answered without calling a tool.
func ModelAnswered(events []*journal.Event) bool {
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		switch e.Type {
		case "message":
			var b struct {
				Role string `json:"role"`
			}
			json.Unmarshal(e.Body, &b)
			return b.Role == "assistant"
		case "tool_call", "tool_result":
			return false
		}
	}
	return false
}
