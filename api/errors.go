package api

import (
	"errors"
	"fmt"
	"net/http"
	"syscall"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/session"
)

// The conditions a Node reports that the table below answers; package
// node returns these (it declares them under the same names).
var (
	// ErrUnknownAgent means the node holds no capsule of that agent.
	ErrUnknownAgent = errors.New("this node holds no capsule of that agent")
	// ErrStoreClosed means the store was closed (the node is shutting
	// down).
	ErrStoreClosed = errors.New("the capsule store is closed")
	// ErrChainElsewhere means this machine's newest events of the agent
	// are in another copy of its capsule, which the one being written
	// lacks: writing it would fork the machine's chain.
	ErrChainElsewhere = errors.New("this machine's newest events of the agent are in another copy")
	// ErrChainBusy means another writer signs events of the agent as this
	// machine right now (another command, or the running node).
	ErrChainBusy = errors.New("another writer signs this agent's events as this machine")
	// ErrDiskFull is what a write to a full disk fails with.
	ErrDiskFull = atomicfile.ErrDiskFull
	// ErrForeign means the node's copy of an agent belongs to someone
	// else: none of its members is this machine or a paired peer.
	ErrForeign = errors.New("a foreign copy: none of the agent's members is this machine or a paired peer")
	// ErrNotConnected means a paired peer cannot be reached now.
	ErrNotConnected = errors.New("not connected")
	// ErrAuthorizing wraps the failure of an MCP authorization a turn
	// request answered with: the request is refused, nothing written.
	ErrAuthorizing = errors.New("the authorization given does not work")
)

// ForeignError is ErrForeign for a person: what the copy is and the ways
// forward.
func ForeignError(agent string) error {
	return fmt.Errorf("agent %s: %w, so it never runs here: pair this node with one of its machines and migrate it here from the one that runs it (add this machine as a member there first: tern member add), or make a new agent of its state: tern capsule adopt %s", agent, ErrForeign, agent)
}

// errorStatuses is the one table from an error to the HTTP status the API
// answers it with: the first row whose error the chain wraps wins.
var errorStatuses = []struct {
	err  error
	code int
}{
	// Not found: nothing of that name here.
	{ErrUnknownAgent, http.StatusNotFound},
	{session.ErrNoSession, http.StatusNotFound},
	{memory.ErrNoNote, http.StatusNotFound},
	// The request itself is wrong.
	{journal.ErrInvalidDraft, http.StatusBadRequest},
	{capsule.ErrInvalidEdit, http.StatusBadRequest},
	{capsule.ErrBadWorkspace, http.StatusBadRequest},
	{capsule.ErrBadPeer, http.StatusBadRequest},
	{session.ErrEmptyRequest, http.StatusBadRequest},
	{session.ErrDuplicateAnswer, http.StatusBadRequest},
	// Well formed, but its answers do not match what the turn asks.
	{session.ErrUnknownAction, http.StatusUnprocessableEntity},
	{session.ErrPartialAnswers, http.StatusUnprocessableEntity},
	{session.ErrMismatchedAnswer, http.StatusUnprocessableEntity},
	{ErrAuthorizing, http.StatusUnprocessableEntity},
	// The agent's state here refuses it now.
	{journal.ErrFork, http.StatusConflict},
	{journal.ErrBrokenChain, http.StatusConflict},
	{ErrChainElsewhere, http.StatusConflict},
	{ErrChainBusy, http.StatusConflict},
	{capsule.ErrLocked, http.StatusConflict},
	{fencing.ErrFrozen, http.StatusConflict},
	{journal.ErrNotMember, http.StatusConflict},
	{capsule.ErrNotAccepted, http.StatusConflict},
	{ErrForeign, http.StatusConflict},
	{capsule.ErrNotEditable, http.StatusConflict},
	{capsule.ErrLastMember, http.StatusConflict},
	{capsule.ErrMembership, http.StatusConflict},
	{capsule.ErrDiverged, http.StatusConflict},
	{session.ErrTurnRunning, http.StatusConflict},
	{session.ErrTurnExists, http.StatusConflict},
	{session.ErrStaleAnswer, http.StatusConflict},
	// The node cannot now; it may later.
	{ErrStoreClosed, http.StatusServiceUnavailable},
	{journal.ErrClosed, http.StatusServiceUnavailable},
	{ErrDiskFull, http.StatusServiceUnavailable},
	{ErrNotConnected, http.StatusServiceUnavailable},
}

// StatusOf is the HTTP status of err: its row in errorStatuses; 502 for a
// model or embedding API that failed; 500 for the node's own failure (an
// error of the system, or any other).
func StatusOf(err error) int { return statusOr(err, http.StatusInternalServerError) }

// statusOr is StatusOf with another answer than 500 for an error of no
// row that is not the system's: what the handler's request most likely
// did wrong (an upload that is no capsule: 400).
func statusOr(err error, otherwise int) int {
	for _, row := range errorStatuses {
		if errors.Is(err, row.err) {
			return row.code
		}
	}
	var perr *provider.Error
	var errno syscall.Errno
	switch {
	case errors.As(err, &perr):
		return http.StatusBadGateway
	case errors.As(err, &errno):
		return http.StatusInternalServerError
	}
	return otherwise
}
