// Package fencing is the migration protocol of tern as pure state machines:
// holder epochs, the two-phase commit that moves a running agent from one
// node to another, and the durable holder registry that makes it safe.
//
// The invariant it exists for: at most one node runs an agent, ever, and each
// epoch is activated on at most one node, ever. Epochs are compared, never
// waited for, so no clock and no timeout is needed for safety; timeouts only
// decide when to give up (availability).
//
// # Shape
//
// A [Machine] is one agent on one node. It works like etcd's raft: inputs
// are calls ([Machine.Step] for a message from a peer, [Machine.Tick] for one
// unit of time, [Machine.Connected] when a peer is reachable again,
// [Machine.Freeze], [Machine.Unfreeze] and [Machine.Migrate] for a move,
// [Machine.PrepareDone] and [Machine.PromoteDone] when the caller's work is
// done, [Machine.Override]); outputs accumulate in a [Ready] that the caller
// applies in a fixed order (stop the runtime, write or clear the staging
// area, persist the [Record], promote staging, send the messages, start the
// runtime) and then acknowledges with [Machine.Advance]. The record is
// persisted before any message that depends on it is sent: persist before
// reply.
//
// The protocol (docs/MIGRATION.md records the choices docs/DESIGN.md
// leaves open, and why):
//
//	source: freeze (stop; the tail moves what was written meanwhile)
//	source: persist frozen(e, next n)              -> propose(n)
//	target: n newer than anything seen? persist staging(n) -> accept(missing files)
//	source: send the missing files                 -> transfer (each hash-checked)
//	source:                                        -> prepare(n)
//	target: all files verified, caller prepared    -> prepared(n)
//	--- point of no return: source persists committing ---
//	source:                                        -> activate(n)
//	target: persist activated(n), promote, run     -> decision(n)
//	source: retire, compare-and-clear: only if still frozen on n
//
// Any failure before the point of no return aborts and the source resumes
// at e. After it, the source asks the target "what did you decide for n?";
// a target without a decision durably records refused(n) before it answers,
// so a late activate can never win. A node that lost its registry runs
// nothing and answers unknown until it has relearnt the epochs from every
// peer; unknown never lets a source resume. [Machine.Override] is the
// explicit, logged way out when a target is gone for good.
//
// Whether the agent may run or be written to here is the machine's to say,
// and only its: [Machine.Running], and [Machine.Appends] (the held epoch,
// an offline edit, or ErrFrozen during the tail and while frozen). A node
// that holds the agent active asks every peer that connects what it knows
// and steps down at once if it learns of a newer activation, so a home
// restored from an old backup stops within one exchange of meeting the
// machine the agent moved to.
//
// # What it must never do
//
// The package never does I/O, never starts a goroutine, never reads a clock
// and never draws a random number: time arrives as ticks, randomness (the
// incarnation nonce) as configuration. It never sends a message whose
// meaning depends on a record before that record is in a Ready to persist,
// never changes a decision record once written, never accepts an epoch that
// is not newer than the highest it has seen, and never lets an answer of
// "unknown" resume a source. A Machine is not safe for concurrent use.
package fencing
