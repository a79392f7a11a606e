package journal

import "slices"

// Merge returns the union of two sets of events, keyed by id, in total
// order. It is commutative and idempotent (Merge(a, b) and Merge(b, a) hold
// the same events in the same order; Merge(a, a) is a sorted, deduplicated
// a), and keeps every event, forks included: deciding what is readable is
// Readable's job. Inputs need not be sorted and are not modified. Inputs
// already in total order are merged in linear time.
func Merge(a, b []*Event) []*Event {
	if slices.IsSortedFunc(a, Compare) && slices.IsSortedFunc(b, Compare) {
		return mergeSorted(a, b)
	}
	all := make([]*Event, 0, len(a)+len(b))
	all = append(all, a...)
	all = append(all, b...)
	Sort(all)
	return dedupeSorted(all)
}

// mergeSorted merges two sorted slices into a new sorted slice without
// repeated ids.
func mergeSorted(a, b []*Event) []*Event {
	out := make([]*Event, 0, len(a)+len(b))
	push := func(e *Event) {
		if n := len(out); n > 0 && out[n-1].ID == e.ID {
			return
		}
		out = append(out, e)
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if Compare(a[i], b[j]) <= 0 {
			push(a[i])
			i++
		} else {
			push(b[j])
			j++
		}
	}
	for ; i < len(a); i++ {
		push(a[i])
	}
	for ; j < len(b); j++ {
		push(b[j])
	}
	return slices.Clip(out)
}

// dedupeSorted drops repeated ids from a sorted slice, in place. Events with
// the same id have the same content, hence the same place in the order, so
// repeats are adjacent.
func dedupeSorted(s []*Event) []*Event {
	return slices.CompactFunc(s, func(x, y *Event) bool { return x.ID == y.ID })
}
