package journal

import (
	"errors"
	"fmt"
)

// Sentinel errors. Functions wrap them with the place and the details;
// match them with errors.Is.
var (
	// ErrFork: two different events claim the same (machine, seq).
	ErrFork = errors.New("fork")
	// ErrBadSignature: the signature is malformed or does not verify
	// with the key embedded in the machine's peer ID.
	ErrBadSignature = errors.New("bad signature")
	// ErrBadID: the id is not the CID of the event's content.
	ErrBadID = errors.New("id does not match content")
	// ErrNotCanonical: the line is JSON but not in its RFC 8785 form.
	ErrNotCanonical = errors.New("not RFC 8785 canonical JSON")
	// ErrFutureFormat: the line was written by a newer tern.
	ErrFutureFormat = errors.New("event format newer than this tern understands")
	// ErrBrokenChain: a machine's chain has a gap, a wrong prev or a clock
	// that does not grow.
	ErrBrokenChain = errors.New("broken chain")
	// ErrInvalidEvent: the line is not JSON, not an object, or a field is
	// missing or has the wrong type or range.
	ErrInvalidEvent = errors.New("invalid event")
	// ErrInvalidDraft: a draft cannot become an event.
	ErrInvalidDraft = errors.New("invalid draft")
	// ErrNotMember: the writer of an event is not a member of the agent
	// (see MembersOf).
	ErrNotMember = errors.New("not a member of the agent")
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("journal closed")
)

// LineError is a problem with one line of a journal file.
type LineError struct {
	Line int // 1-based
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the underlying error.
func (e *LineError) Unwrap() error { return e.Err }

// futureFormatError reports a line of a newer format version.
type futureFormatError struct{ v uint64 }

func (e futureFormatError) Error() string {
	return fmt.Sprintf("event format %d is newer than this tern understands (%d): upgrade tern to read this journal", e.v, FormatVersion)
}

func (e futureFormatError) Is(target error) bool { return target == ErrFutureFormat }

// NotMemberError says that a machine may not write an agent's history: it
// is not one of the agent's members, or was removed. It wraps
// ErrNotMember.
type NotMemberError struct {
	Agent   string
	Machine string
	Removed bool
}

func (e *NotMemberError) Error() string {
	if e.Removed {
		return fmt.Sprintf("machine %s was removed from the members of agent %s: it writes the agent's history no more", e.Machine, e.Agent)
	}
	return fmt.Sprintf("machine %s is not a member of agent %s: only the agent's members write its history; on a machine that is one, tern member add %s %s makes it one", e.Machine, e.Agent, e.Agent, e.Machine)
}

// Unwrap returns ErrNotMember.
func (e *NotMemberError) Unwrap() error { return ErrNotMember }
