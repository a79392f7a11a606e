// Package tool holds tern's built-in tools: read_file, list_files,
// write_file, shell, http_request, memory_search and memory_note
// (docs/TOOLS.md).
//
// A tool runs one call at a time against the agent's workspace, a folder on
// disk, and answers with text for the model. Two kinds of failure stay
// apart: a Result with IsError set is an answer the model reads (a bad
// argument, a path that leaves the workspace, a command that failed); a Go
// error means the tool could not run at all (the workspace cannot be
// opened, the call lacks the operation id it needs), and the runtime deals
// with it.
//
// The file tools reach the workspace only through an os.Root opened on it:
// every path is resolved by the kernel one component at a time under the
// root's file descriptor, so no "..", absolute path or symbolic link, even
// one swapped in while the call runs, takes them outside the workspace.
//
// shell's command, and a stdio MCP server, get an environment built from
// an allow-list, never the node's own; where the kernel has Landlock,
// shell's command is confined: it reads nothing of the node's home but
// its workspace and writes only there and in the temporary folder
// (Confinement says how this machine does).
//
// The package runs tools; it does not journal them. Writing the
// operation.intent before a non-pure call, its outcome after, and asking
// for approval are the runtime's (docs/SESSIONS.md).
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/procgroup"
	"github.com/tern-dev/tern/session"
)

// The effect classes of agent.json (capsule.Tool.Effect).
const (
	Pure       = "pure"         // no effect outside reading: run it again at will
	Idempotent = "idempotent"   // an effect that a second run with the same arguments repeats harmlessly
	AtMostOnce = "at-most-once" // an effect never to repeat blind
)

// OutputCap is the most output a built-in tool gives the model in one
// result, in bytes; beyond it the output is cut, with a note that says so.
const OutputCap = 64 << 10

// Call is one call of a tool.
type Call struct {
	// Workspace is the folder the agent's files live in (its materialized
	// workspace); file tools never reach outside it, and shell runs in it.
	Workspace string
	// Arguments are the model's arguments: a JSON object matching the
	// tool's Parameters.
	Arguments json.RawMessage
	// OperationID is the id of the call's operation.intent, for a non-pure
	// call: shell passes it as TERN_OPERATION_ID, http_request as its
	// Idempotency-Key. Empty for a pure call.
	OperationID string
	// Approved says a person approved this call: http_request may then
	// reach the host and port its URL names even when that is this
	// machine or its network, which it otherwise refuses. The approval
	// is this call's only: no later call, and no redirect to another
	// host, is let through by it.
	Approved bool
	// Env are the variables the agent's environment declares for shell's
	// command ("NAME=value", DeclaredEnv). The command gets them over a
	// few of this process's (PATH, LANG, TERM, TZ), with HOME the
	// workspace and TMPDIR the system's temporary folder, and never the
	// rest of this process's environment (commandEnv).
	// TERN_OPERATION_ID is always added.
	Env []string
	// Memory is the agent's memory, for memory_search and memory_note.
	Memory Memory
	// Home is the node's home ($TERN_HOME): where the system allows it
	// (Landlock), shell's command reads and writes nothing under it but
	// the workspace, and writes nothing outside the workspace and the
	// system's temporary folder (docs/TOOLS.md). Empty: the command is
	// confined all the same, but no home is hidden from its reading.
	Home string
	// Processes is where shell records the process group of its command
	// while it runs, under the operation id, so that the node's next start
	// ends it after a crash (the node's $TERN_HOME/processes); empty: no
	// record.
	Processes procgroup.Dir
}

// ErrUncertain wraps the error of a call that may or may not have taken
// effect (a server that went away during it): the runtime leaves its
// intent without an outcome, to be reconciled rather than run again.
var ErrUncertain = errors.New("the call may or may not have taken effect")

// Result is a tool's answer to the model: a tool_result's text, and the
// images and files it came with.
type Result struct {
	Output  string // the text the model reads
	IsError bool   // the call failed, and Output says why (tool_result's is_error)
	Cut     bool   // part of the output was left out at OutputCap; Output ends with a note saying so
	// Parts, when the tool answered with images or files, are its text and
	// media in the order it gave them (Output is then their text, joined).
	Parts []Part
}

// Part is one part of a result: a text, or an image or file.
type Part struct {
	Text  string
	Media *Media
}

// Media is an image or a file a tool answered with: the runtime keeps its
// bytes as a blob of the capsule, and the tool_result names it by CID (a
// part {"type": "image"|"file", "cid", "media_type", "name"?}), which
// each renderer sends as the provider takes it or describes in text.
type Media struct {
	Kind      string // "image" or "file"
	MediaType string
	Name      string // a file's name, if it has one
	Data      []byte
}

// MediaCap is the largest image or file a result keeps; a larger one is
// described in the text instead.
const MediaCap = 20 << 20

// Tool is one tool: its definition for agent.json, its default effect and
// approval, and how to run it.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // the JSON Schema of the arguments
	Effect      string          // Pure, Idempotent or AtMostOnce: the class when Classify is nil
	Approval    bool            // whether a call needs a person's approval by default
	// Classify, if set, gives the effect and approval of one call from its
	// arguments (http_request: by method); nil means Effect and Approval.
	Classify func(args json.RawMessage) (effect string, approval bool)
	// NoWorkspace says the tool never changes the workspace, so the
	// runtime takes no snapshot after it (the memory tools).
	NoWorkspace bool
	// Run runs one call.
	Run func(ctx context.Context, call Call) (Result, error)
	// Status, if set, says whether the operation of call (its arguments
	// and operation id, from the journal) committed; nil means the tool
	// has no status check (session.CheckUnknown).
	Status func(ctx context.Context, call Call) (session.Check, error)
}

// Definition returns the tool as agent.json lists it: with its approval
// default written out, so a person sees it and can change it, unless it
// depends on the call (http_request: by method), where absent means that.
func (t Tool) Definition() capsule.Tool {
	d := capsule.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Effect: t.Effect}
	if t.Classify == nil {
		approval := t.Approval
		d.Approval = &approval
	}
	return d
}

// EffectOf returns the effect class of a call with these arguments and
// whether it needs approval by default.
func (t Tool) EffectOf(args json.RawMessage) (effect string, approval bool) {
	if t.Classify != nil {
		return t.Classify(args)
	}
	return t.Effect, t.Approval
}

// Check runs the tool's status check for call's operation: CheckUnknown
// when the tool has none.
func (t Tool) Check(ctx context.Context, call Call) (session.Check, error) {
	if t.Status == nil {
		return session.CheckUnknown, nil
	}
	return t.Status(ctx, call)
}

// Builtins returns the built-in tools, in the order Defaults lists them.
func Builtins() []Tool {
	return []Tool{readFile(), listFiles(), writeFile(), shell(), httpRequest(), memorySearch(), memoryNote()}
}

// init tells capsule which approvals agent.json turns off (capsule.Reach):
// those a built-in tool asks for by default.
func init() {
	capsule.DefaultApproval = func(t capsule.Tool) bool {
		b, ok := Builtin(t.Name)
		switch {
		case !ok:
			return t.Effect != Pure
		case b.Classify != nil:
			return true // some of its calls ask (http_request's that change something)
		}
		return b.Approval
	}
}

// Builtin returns the built-in tool called name.
func Builtin(name string) (Tool, bool) {
	all := Builtins()
	i := slices.IndexFunc(all, func(t Tool) bool { return t.Name == name })
	if i < 0 {
		return Tool{}, false
	}
	return all[i], true
}

// Defaults returns the built-in tools' agent.json definitions, for a new
// capsule's agent.json.
func Defaults() []capsule.Tool {
	var out []capsule.Tool
	for _, t := range Builtins() {
		out = append(out, t.Definition())
	}
	return out
}

// EffectOf returns the effect class of a call of the built-in tool name
// with args, and whether it needs approval by default: http_request's
// depends on its method. A name that is no built-in tool gets the safest
// answer, at-most-once with approval; its agent.json entry says better.
func EffectOf(name string, args json.RawMessage) (effect string, approval bool) {
	t, ok := Builtin(name)
	if !ok {
		return AtMostOnce, true
	}
	return t.EffectOf(args)
}

// failf is an error result for the model.
func failf(format string, a ...any) (Result, error) {
	return Result{Output: fmt.Sprintf(format, a...), IsError: true}, nil
}
