package fencing

import (
	"errors"
	"fmt"
)

// Protocol outcomes. Functions and events wrap them with the agent, the
// epoch and the peer; match them with errors.Is. On the wire they travel as
// a Reason.
var (
	// ErrStaleEpoch: the epoch is not newer than the highest the node has
	// seen. A node waking with an old epoch is refused with it.
	ErrStaleEpoch = errors.New("epoch is not newer than the highest seen")
	// ErrBusy: the node cannot take the request now: it holds the agent
	// itself, or a migration or override is already in progress.
	ErrBusy = errors.New("busy")
	// ErrHashMismatch: a transferred file does not match the hash the
	// proposal declared for it.
	ErrHashMismatch = errors.New("hash mismatch")
	// ErrPrepareFailed: the target could not prepare the agent (workspace,
	// secrets, journal).
	ErrPrepareFailed = errors.New("prepare failed")
	// ErrNotStaging: the target has no staging area for that epoch (it
	// refused or forgot it).
	ErrNotStaging = errors.New("not staging that epoch")
	// ErrRegistryLost: the node lost its holder registry and has not yet
	// relearnt it from every peer; it runs nothing and decides nothing.
	ErrRegistryLost = errors.New("holder registry lost")
	// ErrTimeout: the migration made no progress before the point of no
	// return and was aborted.
	ErrTimeout = errors.New("no progress before the point of no return")
	// ErrNotRunning: the agent does not run on this node.
	ErrNotRunning = errors.New("agent does not run here")
	// ErrUnknownPeer: the peer is not one of the configured peers.
	ErrUnknownPeer = errors.New("unknown peer")
	// ErrWrongAgent: the message names another agent than the machine's.
	ErrWrongAgent = errors.New("message for another agent")
	// ErrHeld: an override found a peer that holds the agent.
	ErrHeld = errors.New("a peer holds the agent")
	// ErrFrozen: a migration has stopped the agent here (the tail, or
	// frozen until the target decides); appends wait until it ends.
	ErrFrozen = errors.New("the agent is migrating")
	// ErrActivating: the agent was activated here and its promotion (the
	// staged files made the node's) is not yet complete; nothing runs or
	// appends until it is.
	ErrActivating = errors.New("the agent's activation here is not complete yet")
	// ErrFutureFormat: the registry file was written by a newer tern.
	ErrFutureFormat = errors.New("registry format is newer than this tern understands")
)

// Why a machine did something, in the events it reports (an Event names
// the epoch and the peer). Static, so that the hot paths do not allocate.
var (
	errRestartedFrozen    = fmt.Errorf("restarted before the point of no return: %w", ErrTimeout)
	errRestartedStaging   = errors.New("restarted while staging")
	errSuperseded         = errors.New("superseded by a newer proposal")
	errFenced             = errors.New("fenced by an override")
	errQueried            = errors.New("queried before any activate: refused, so that a late activate cannot win")
	errAborted            = errors.New("aborted by the source")
	errSourceSilent       = fmt.Errorf("the source went silent: %w", ErrTimeout)
	errActivateUnprepared = fmt.Errorf("activate without a prepared staging area: %w", ErrNotStaging)
	errActivateRefused    = errors.New("the target refused to activate")
	errMovedOn            = errors.New("the target lost its decision but knows a newer activation: the agent moved on")
)

// Reason says on the wire why a request was refused. Its zero value means
// no reason.
type Reason uint8

// Reasons, one per sentinel error a peer can be refused with.
const (
	NoReason Reason = iota
	ReasonStale
	ReasonBusy
	ReasonHashMismatch
	ReasonPrepareFailed
	ReasonNotStaging
	ReasonRegistryLost
	// ReasonStarting: the target is still asking its peers what they know
	// (the startup check, or an override), or the decision on a move it
	// committed itself. It will answer soon, so the source proposes again
	// instead of giving up.
	ReasonStarting
)

// Err returns the sentinel error of r, or nil for NoReason.
func (r Reason) Err() error {
	switch r {
	case ReasonStale:
		return ErrStaleEpoch
	case ReasonBusy, ReasonStarting:
		return ErrBusy
	case ReasonHashMismatch:
		return ErrHashMismatch
	case ReasonPrepareFailed:
		return ErrPrepareFailed
	case ReasonNotStaging:
		return ErrNotStaging
	case ReasonRegistryLost:
		return ErrRegistryLost
	}
	return nil
}

func (r Reason) String() string {
	if err := r.Err(); err != nil {
		return err.Error()
	}
	return "none"
}
