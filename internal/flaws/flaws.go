// Package flaws selects deliberately broken variants of tern's protocols,
// so that tests and tern simnet --flaw can prove their checkers catch each
// historical bug (a checker that cannot fail proves nothing). It is
// internal: nothing outside this module can name a flaw, so no program
// built on tern's packages can switch one on.
package flaws

// Flaw selects a deliberately broken variant of the fencing protocol. Each
// one is a bug the naive protocol had. The zero value, Sound, is the
// protocol.
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
)

var flawNames = [...]string{"sound", "query-without-fence", "query-held-epoch", "retire-without-compare"}

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
