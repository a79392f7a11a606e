package journal

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Fork is a place where one machine's chain splits: two or more different
// events with the same machine and seq.
type Fork struct {
	Machine string   `json:"machine"`
	Seq     uint64   `json:"seq"`
	IDs     []string `json:"ids"` // sorted
}

// ForkError reports a fork; it wraps ErrFork.
type ForkError struct{ Fork }

func (e *ForkError) Error() string {
	return fmt.Sprintf("machine %s: seq %d: fork: %d different events (%s); both are kept and quarantined from seq %d on",
		e.Machine, e.Seq, len(e.IDs), strings.Join(e.IDs, ", "), e.Seq)
}

// Unwrap returns ErrFork.
func (e *ForkError) Unwrap() error { return ErrFork }

// ChainError reports a broken link in one machine's chain; it wraps
// ErrBrokenChain.
type ChainError struct {
	Machine string
	Seq     uint64 // the first seq the problem makes unreadable
	Problem string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("machine %s: seq %d: broken chain: %s", e.Machine, e.Seq, e.Problem)
}

// Unwrap returns ErrBrokenChain.
func (e *ChainError) Unwrap() error { return ErrBrokenChain }

// Forks returns every fork in a set of events, sorted by machine and seq.
func Forks(events []*Event) []Fork {
	var out []Fork
	for _, err := range Check(events) {
		if fe, ok := err.(*ForkError); ok {
			out = append(out, fe.Fork)
		}
	}
	return out
}

// Check returns every chain problem in a set of events, each naming the
// machine and seq: a *ForkError for two events at one (machine, seq), a
// *ChainError for a missing seq (gap), a prev that is not the id of the
// event before, or a clock that does not grow along the chain. Events a
// machine set aside with a chain.healed event (see Heal) are not part of
// its chain, so a healed fork is no problem. The order is deterministic: by
// machine, then seq. No problem: nil.
func Check(events []*Event) []error {
	var problems []error
	for _, c := range analyse(events) {
		problems = append(problems, c.problems...)
	}
	return problems
}

// Readable splits a set of events into what a reader may use and what is
// kept aside. For each machine, the view holds its readable line: the
// longest prefix of its chain (seq 1, 2, …) without a gap, a fork or a
// broken link, leaving out the events the machine set aside with a
// chain.healed event. The rest of that machine's events are quarantined:
// those from its first problem on (both sides of a fork included), so
// nothing is silently chosen and nothing is lost, and those a heal set
// aside. Both slices are in total order, without repeated ids.
func Readable(events []*Event) (view, quarantined []*Event) {
	chains := analyse(events)
	clean := true
	for _, c := range chains {
		if len(c.aside) > 0 {
			clean = false
		}
	}
	all := Merge(events, nil)
	if clean {
		return all, nil
	}
	aside := map[string]bool{}
	for _, c := range chains {
		for _, e := range c.aside {
			aside[e.ID] = true
		}
	}
	view = make([]*Event, 0, len(all))
	for _, e := range all {
		if aside[e.ID] {
			quarantined = append(quarantined, e)
		} else {
			view = append(view, e)
		}
	}
	return view, quarantined
}

// machineChain is what analyse finds in one machine's events.
type machineChain struct {
	machine  string
	problems []error
	line     []*Event          // the readable line, by seq
	aside    []*Event          // the machine's other events: set aside by a heal, or from the first problem on; by seq, then id
	why      map[string]string // id of each event aside → why it is aside (see Quarantined)
}

// head is the chain's entry in a version vector: the last event of its
// readable line, and a digest of the events aside.
func (c *machineChain) head() Head {
	var h Head
	if n := len(c.line); n > 0 {
		h = Head{Seq: c.line[n-1].Seq, ID: c.line[n-1].ID}
	}
	h.Aside = asideDigest(c.aside)
	return h
}

// analyse walks every machine's chain, in machine order.
func analyse(events []*Event) []*machineChain {
	s := slices.Clone(events)
	slices.SortFunc(s, bySeq)
	s = dedupeSorted(s)
	rules := rulesOf(s)
	var out []*machineChain
	for len(s) > 0 {
		n := 1
		for n < len(s) && s[n].Machine == s[0].Machine {
			n++
		}
		out = append(out, analyseMachine(s[:n], rules))
		s = s[n:]
	}
	return out
}

// bySeq orders events by machine, seq, then id.
func bySeq(a, b *Event) int {
	if c := cmp.Compare(a.Machine, b.Machine); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// asideRules is what other machines' events say about a machine's chain:
// where activations end its epochs, and where its removal from the
// members cut it.
type asideRules struct {
	bounds  epochBounds       // what holder.activated events make stale
	removed map[string]uint64 // removed member → the last seq of its that counts
}

// rulesOf collects the aside rules of a set of events.
func rulesOf(events []*Event) asideRules {
	return asideRules{bounds: boundsOf(events), removed: membersClaimed(events).cutOf()}
}

// analyseMachine checks one machine's events, sorted by seq then id,
// without repeats: it leaves out the events written after its removal from
// the members, those an activation makes stale and those the machine's
// heals set aside, then finds the readable line of the rest.
func analyseMachine(chain []*Event, rules asideRules) *machineChain {
	c := &machineChain{machine: chain[0].Machine}
	stale := rules.bounds.staleIn(chain)
	replaced := setAside(chain, stale)
	last, removed := rules.removed[c.machine]
	kept := chain
	if len(replaced) > 0 || len(stale) > 0 || removed {
		kept = make([]*Event, 0, len(chain))
		for _, e := range chain {
			switch {
			case removed && e.Seq > last:
				c.setAside(e, AsideRemoved)
			case stale[e.ID]:
				c.setAside(e, AsideStaleEpoch)
			case replaced[e.ID]:
				c.setAside(e, AsideHealed)
			default:
				kept = append(kept, e)
			}
		}
	}
	if len(kept) == 0 {
		return c
	}
	var aside map[uint64]bool // seqs of events set aside, for the messages
	for _, e := range c.aside {
		if aside == nil {
			aside = map[uint64]bool{}
		}
		aside[e.Seq] = true
	}
	var cut uint64
	c.problems, cut = analyseChain(kept, aside)
	if cut == 0 {
		c.line = kept
		return c
	}
	i, _ := slices.BinarySearchFunc(kept, cut, func(e *Event, seq uint64) int { return cmp.Compare(e.Seq, seq) })
	c.line = kept[:i]
	why := AsideBrokenChain
	for _, p := range c.problems {
		if fe, ok := p.(*ForkError); ok && fe.Seq == cut {
			why = AsideFork
		}
	}
	sorted := len(c.aside) == 0
	for _, e := range kept[i:] {
		c.setAside(e, why)
	}
	if !sorted {
		slices.SortFunc(c.aside, bySeq)
	}
	return c
}

func (c *machineChain) setAside(e *Event, why string) {
	if c.why == nil {
		c.why = map[string]string{}
	}
	c.aside = append(c.aside, e)
	c.why[e.ID] = why
}

// Why an event is kept aside, as [Quarantined] says it.
const (
	AsideRemoved     = "removed"      // written after its machine was removed from the agent's members
	AsideHealed      = "healed"       // its machine set it aside with a chain.healed event
	AsideStaleEpoch  = "stale_epoch"  // written under an epoch that had ended when it was written
	AsideFork        = "fork"         // at or after a seq where its machine's chain splits
	AsideBrokenChain = "broken_chain" // at or after a gap or a bad prev or clock in its machine's chain
)

// Quarantined says, for each event [Readable] keeps aside, why: one of
// AsideHealed, AsideStaleEpoch, AsideFork or AsideBrokenChain, keyed by
// event id. Events in the readable view are not in the map; a clean journal
// gives an empty map.
func Quarantined(events []*Event) map[string]string {
	out := map[string]string{}
	for _, c := range analyse(events) {
		for id, why := range c.why {
			out[id] = why
		}
	}
	return out
}

// analyseChain checks one machine's events, sorted by seq then id, without
// repeats. cut is the first unreadable seq, 0 if all are readable. aside
// are the seqs of the machine's events set aside (by a heal or an ended
// epoch), which a gap names as such.
func analyseChain(chain []*Event, aside map[uint64]bool) (problems []error, cut uint64) {
	machine := chain[0].Machine
	mark := func(seq uint64) {
		if cut == 0 || seq < cut {
			cut = seq
		}
	}
	broken := func(seq uint64, format string, args ...any) {
		problems = append(problems, &ChainError{Machine: machine, Seq: seq, Problem: fmt.Sprintf(format, args...)})
		mark(seq)
	}
	var before []*Event // the events at seq-1, when present
	next := uint64(1)   // the seq that should come next
	for len(chain) > 0 {
		seq := chain[0].Seq
		n := 1
		for n < len(chain) && chain[n].Seq == seq {
			n++
		}
		group := chain[:n]
		chain = chain[n:]
		if seq > next {
			switch {
			case aside[next]:
				broken(seq, "seq %d is set aside (by a heal, or written under an epoch that had ended)", next)
			case seq == next+1:
				broken(seq, "seq %d is missing", next)
			default:
				broken(seq, "seqs %d to %d are missing", next, seq-1)
			}
			before = nil
		}
		if len(group) > 1 {
			ids := make([]string, len(group))
			for i, e := range group {
				ids[i] = e.ID
			}
			problems = append(problems, &ForkError{Fork{Machine: machine, Seq: seq, IDs: ids}})
			mark(seq)
		}
		for _, e := range group {
			switch {
			case seq == 1:
				if e.Prev != "" {
					broken(seq, "event %s is the first of the chain but has prev %s", e.ID, e.Prev)
				}
			case before != nil:
				i := slices.IndexFunc(before, func(p *Event) bool { return p.ID == e.Prev })
				if i < 0 {
					broken(seq, "event %s has prev %s, which is not the id of seq %d (%s)", e.ID, e.Prev, seq-1, before[0].ID)
				} else if p := before[i]; e.Clock <= p.Clock {
					broken(seq, "event %s has clock %d, not above clock %d of seq %d", e.ID, e.Clock, p.Clock, seq-1)
				}
			}
		}
		before = group
		next = seq + 1
	}
	return problems, cut
}
