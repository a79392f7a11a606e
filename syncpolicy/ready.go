package syncpolicy

import "fmt"

// Scope is what a round with a peer covers. A wider scope covers what a
// narrower one does, so rounds asked for while one runs merge into one of
// the widest scope asked.
type Scope uint8

// The scopes of a round, narrowest first. The zero Scope is no round.
const (
	// WantsOnly fetches from the peer the blobs this node's capsules want;
	// it exchanges no events.
	WantsOnly Scope = iota + 1
	// ChangedOnly also takes a copy of each capsule the peer shares that
	// this node lacks, and exchanges each capsule the peer does not hold
	// alike, except those Decide skips.
	ChangedOnly
	// Everything exchanges every capsule the peer does not hold alike.
	Everything
)

var scopeNames = [...]string{"none", "wants-only", "changed-only", "everything"}

func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return fmt.Sprintf("scope(%d)", s)
}

// Round is a round the caller must start with Peer, in the background, and
// report with RoundDone when it ends, whatever happened in it.
type Round struct {
	Peer  string
	Scope Scope
}

// Ready is what a Machine asks its caller to do now. Take it, call
// Advance, then carry it out (outside any lock the machine is kept
// under): none of its parts depends on another. The slices stay valid
// until Advance; copy what is needed beyond it.
type Ready struct {
	// Rounds to start, each in the background. A round with a peer that
	// is not connected fails at once: a round never dials.
	Rounds []Round
	// Dials: dial each of these peers, in the background, and report how
	// it went with Dialed.
	Dials []string
	// CloseIdle: close the capsules that have gone unused for long.
	CloseIdle bool
}

// Action is what a round does with one capsule the peer does not hold
// alike (see Decide). Whatever it is, the round then fetches the blobs the
// capsule wants that the peer holds.
type Action uint8

// The actions.
const (
	// Exchange runs one sync exchange of the capsule with the peer.
	Exchange Action = iota + 1
	// SkipWantsOnly: the round only fetches wanted blobs.
	SkipWantsOnly
	// SkipHeld: the peer holds every event this node holds of the
	// capsule (what both held when their last exchange ended is still
	// this node's vector). What the peer wrote since, it brings.
	SkipHeld
	// SkipResponding: an exchange of the capsule that the peer started is
	// running, and brings both up to date.
	SkipResponding
)

var actionNames = [...]string{"?", "exchange", "skip-wants-only", "skip-held", "skip-responding"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", a)
}
