// Package flaws selects deliberately broken variants of tern's protocols,
// so that tests and tern simnet --flaw can prove their checkers catch each
// historical bug (a checker that cannot fail proves nothing). It is
// internal: nothing outside this module can name a flaw, so no program
// built on tern's packages can switch one on.
package flaws

// Flaw selects a deliberately broken variant of a protocol: the fencing
// protocol or the sync policy. Each one is a bug a naive version has. The
// zero value, Sound, is the protocol as written.
type Flaw uint8

// The historical bugs.
const (
	Sound Flaw = iota
	// FlawQueryWithoutFence: a target asked about an epoch it has no
	// decision for answers refused without recording it, so a late
	// activate can still win after the source resumed.
	FlawQueryWithoutFence
	// FlawQueryHeldEpoch: the query asks "which epoch do you hold?"
	// instead of "what did you decide?", which is wrong as soon as the
	// agent moved on from the target.
	FlawQueryHeldEpoch
	// FlawRetireWithoutCompare: the source retires on any activated
	// answer, without checking it is still frozen on that epoch.
	FlawRetireWithoutCompare
	// FlawFollowerSkips (the sync policy): a timer round of the peer
	// that does not lead leaves each capsule to the one that does, as the
	// rounds on connect do. The leader skips it too when the follower
	// wrote since: its own vector did not move, so its record says the
	// follower holds everything. Neither side sends the events.
	FlawFollowerSkips
	// FlawResumeOnSilence: a source past its point of no return that has
	// no answer to its activate by its next retry takes the silence for
	// a refusal and runs the agent again, instead of asking the target
	// what it decided; the target may have activated. It is the naive
	// timeout every two-phase commit is tempted by, and the one tern
	// nemesis shows its checker catches on real processes (a cut while
	// the target's reply to the activate is on the wire).
	FlawResumeOnSilence
)

// Last is the highest Flaw.
const Last = FlawResumeOnSilence

var flawNames = [...]string{"sound", "query-without-fence", "query-held-epoch", "retire-without-compare", "follower-skips", "resume-on-silence"}

// InSyncPolicy reports whether f breaks the sync policy (package
// syncpolicy) rather than the fencing protocol.
func (f Flaw) InSyncPolicy() bool { return f == FlawFollowerSkips }

func (f Flaw) String() string {
	if int(f) < len(flawNames) {
		return flawNames[f]
	}
	return "flaw(?)"
}

// Parse returns the Flaw named s (as String spells it).
func Parse(s string) (Flaw, bool) {
	for i, n := range flawNames {
		if n == s {
			return Flaw(i), true
		}
	}
	return Sound, false
}
