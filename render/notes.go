package render

import (
	"fmt"

	"github.com/tern-dev/tern/journal"
)

// notes collects what a render left out or changed, for the caller to log
// or show. Order follows the journal, so the same input gives the same
// notes.
type notes struct {
	list    []string
	unknown map[string]*unknownCount
	order   []string
}

type unknownCount struct {
	n     int
	first string
}

func (n *notes) addf(format string, args ...any) {
	n.list = append(n.list, fmt.Sprintf(format, args...))
}

// unknownType counts an event of a type render does not know; one note per
// type, however many events have it.
func (n *notes) unknownType(ev *journal.Event) {
	if n.unknown == nil {
		n.unknown = make(map[string]*unknownCount)
	}
	c := n.unknown[ev.Type]
	if c == nil {
		c = &unknownCount{first: ev.ID}
		n.unknown[ev.Type] = c
		n.order = append(n.order, ev.Type)
	}
	c.n++
}

// all returns every note: unknown types first, in the order first seen,
// then the rest in journal order.
func (n *notes) all() []string {
	out := make([]string, 0, len(n.order)+len(n.list))
	for _, typ := range n.order {
		c := n.unknown[typ]
		if c.n == 1 {
			out = append(out, fmt.Sprintf("event %s has unknown type %q; skipped", c.first, typ))
		} else {
			out = append(out, fmt.Sprintf("%d events of unknown type %q skipped (first: %s)", c.n, typ, c.first))
		}
	}
	return append(out, n.list...)
}
