package journal

import (
	"cmp"
	"slices"
)

// Compare orders events totally: by clock, then machine, then seq, then id
// (the id only separates the two sides of a fork). It returns -1, 0 or +1;
// 0 means the same event.
func Compare(a, b *Event) int {
	if c := cmp.Compare(a.Clock, b.Clock); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Machine, b.Machine); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// Sort puts events in the total order, in place.
func Sort(events []*Event) { slices.SortFunc(events, Compare) }
