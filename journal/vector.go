package journal

// Head is where one machine's chain stands in a journal: the last event
// of its readable line (see Readable), and a digest of the machine's
// events kept aside from it (forked, after a break, or set aside by a
// heal), "" when there are none.
type Head struct {
	Seq   uint64 `json:"seq"`
	ID    string `json:"id"`
	Aside string `json:"aside,omitempty"`
}

// Vector summarises a journal: for each machine, the head of its chain.
// Peers compare vectors before sending events. The zero value (nil) is an
// empty vector and can be read; build one with VectorOf.
type Vector map[string]Head

// VectorOf returns the vector of a set of events: for each machine, the
// last event of its readable line and the digest of its events aside.
// Every holder of the same set reports the same vector.
func VectorOf(events []*Event) Vector {
	v := make(Vector)
	for _, c := range analyse(events) {
		v[c.machine] = c.head()
	}
	return v
}

// Clone returns a copy of v.
func (v Vector) Clone() Vector {
	c := make(Vector, len(v))
	for k, h := range v {
		c[k] = h
	}
	return c
}

// Since returns, in total order, the events a holder of vector v may lack.
// For a machine whose head in v is ours, none. Otherwise those above v's
// head seq, and those at it with another id; and where the two may have
// taken different branches of the machine's chain, every event of the
// machine from where they could have parted: from our first event aside
// when v's head is one of our events aside or the two hold different
// events aside, from seq 1 when v's head is on neither our line nor aside
// (the holder took a branch we have never seen). So two holders that
// exchange Since both ways end up with the same events, forks included.
func Since(events []*Event, v Vector) []*Event {
	var out []*Event
	for _, c := range analyse(events) {
		h, known := v[c.machine]
		if known && h == c.head() {
			continue
		}
		from := c.divergence(h, known)
		add := func(e *Event) {
			if !known || e.Seq >= from || e.Seq > h.Seq || e.Seq == h.Seq && e.ID != h.ID {
				out = append(out, e)
			}
		}
		for _, e := range c.line {
			add(e)
		}
		for _, e := range c.aside {
			add(e)
		}
	}
	Sort(out)
	return out
}

// divergence returns the lowest seq from which a holder of head h may hold
// other events of the machine than we do (none: the maximum seq).
func (c *machineChain) divergence(h Head, known bool) uint64 {
	const none = ^uint64(0)
	if !known {
		return 1
	}
	firstAside := none
	if len(c.aside) > 0 {
		firstAside = c.aside[0].Seq
	}
	from := none
	if h.Aside != asideDigest(c.aside) && len(c.aside) > 0 {
		from = firstAside
	}
	if h.Seq == 0 {
		return from
	}
	if h.Seq <= uint64(len(c.line)) && c.line[h.Seq-1].ID == h.ID {
		return from // on our line
	}
	for _, e := range c.aside {
		if e.ID == h.ID {
			return min(from, firstAside)
		}
	}
	if h.Seq > uint64(len(c.line)) {
		return from // ahead of us, on a line we may share
	}
	return 1 // a branch we have never seen
}
