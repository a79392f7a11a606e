// Package turns is the runtime of a tern node: it runs the turns of the
// agents the node runs (holds active), and only those (docs/SESSIONS.md,
// "The runtime"). Each running turn has one goroutine, its runner, which
// loops:
//
//  1. reload the session from the journal (the journal is the state: a
//     runner that stops anywhere, by a crash, a freeze or a cancel, is
//     resumed by reloading, here or on another node);
//  2. reconcile every operation intent without an outcome;
//  3. settle every tool call without a result: run it (non-pure calls
//     between an operation.intent and an operation.outcome), answer it
//     from the continuing turn's answers, give a dangling call its error
//     result, or ask for an action;
//  4. pause the turn if actions are asked; complete it if the model
//     answered without calls; else take one model step, appended whole.
//
// A safe point is the top of the loop and the moment before each tool
// call: there the runner stops if the agent no longer runs here. Appends
// hold the holder's gate for reading, so a freeze waits for an operation
// between its intent and its outcome to finish, never splits it.
//
// What to do next at each point of the loop is session.Next's decision;
// the runtime executes it. The node it runs on is reached through Node
// (node.go): its capsules and the custody of each agent's epoch. The API
// (package api) drives it through its exported methods.
//
// Where things are:
//
//   - runtime.go: the runners, their loop, tools with intents and
//     outcomes, model steps, snapshots, and the methods the API calls;
//     live.go: the turns in flight that the API's streams follow,
//     encoded once as server-sent events for every stream.
//   - mcp.go: the agents' MCP servers and their authorizations; memory.go:
//     memory and search; model.go: an agent's model settings.
package turns
