package fencing

import "fmt"

// Chunk is one verified file for the staging area of epoch Epoch.
type Chunk struct {
	Epoch uint64
	Index int // into the proposal's files
	File  File
	Data  []byte
}

// Ready is what a Machine asks its caller to do. Apply it in this order,
// then call Advance:
//
//  1. Stop: stop the agent's runtime and flush its journal (a freeze).
//  2. ClearStaging, then Stage: empty the staging area, then write each
//     chunk into it.
//  3. Persist: save Record durably and atomically (Registry.Save). Nothing
//     below may happen before it is on disk.
//  4. Promote: the staging area, completed by the files Config.Have
//     reported, becomes the agent's capsule on this node; Files lists all
//     of its files. After Advance, report how it went with PromoteDone:
//     the agent runs only once it succeeded, and a failed one is asked for
//     again.
//  5. Prepare: if nonzero, prepare that epoch (materialize the workspace,
//     check secrets, render the journal) and report with PrepareDone.
//  6. Messages: send them, in order.
//  7. Run: start the agent's runtime under Record.Epoch.
//
// Stop also comes alone, from Freeze: the tail of a migration, when
// nothing is durable yet.
//
// Events are for logs and counters. The slices stay valid until Advance.
type Ready struct {
	Stop         bool
	ClearStaging bool
	Stage        []Chunk
	Persist      bool
	Record       Record
	Promote      bool
	Files        []File
	Prepare      uint64
	Messages     []Message
	Run          bool
	Events       []Event
}

// EventKind names something that happened, for logs and coverage counters.
type EventKind uint8

// Event kinds. The first seven are the outcomes simnet requires in every
// batch.
const (
	_                 EventKind = iota
	EvCommit                    // source: the target activated; retired on the activate reply
	EvAbort                     // source: aborted before the point of no return (or activate refused); resumed
	EvRetireByQuery             // source: a query answered activated; retired
	EvResumeByQuery             // source: a query answered refused; resumed
	EvStaleRefused              // target: refused an epoch not newer than the highest seen
	EvRelearned                 // a node that lost its registry relearnt it from every peer
	EvOverride                  // an operator override completed
	EvActivated                 // target: activated an epoch and runs it
	EvRefused                   // target: recorded refused for an epoch
	EvRegistryLost              // the node started without its registry
	EvSteppedDown               // a node that started holding active learnt of a newer holder
	EvRestored                  // a relearning node found it still held the agent
	EvOverrideRefused           // an override found a peer holding the agent and changed nothing
	EvFrozen                    // source: froze and proposed
	numEventKinds
)

var eventNames = [...]string{"?", "commit", "abort", "retire_by_query", "resume_by_query",
	"stale_refused", "registry_relearned", "override", "activated", "refused", "registry_lost",
	"stepped_down", "restored", "override_refused", "frozen"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", k)
}

// NumEventKinds is one more than the largest EventKind, for counter arrays.
const NumEventKinds = int(numEventKinds)

// Event is one thing that happened to the agent on this node.
type Event struct {
	Kind  EventKind
	Epoch uint64
	Peer  string
	Err   error // why, for aborts, refusals and overrides
}

func (e Event) String() string {
	s := fmt.Sprintf("%v epoch %d", e.Kind, e.Epoch)
	if e.Peer != "" {
		s += " peer " + e.Peer
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}
