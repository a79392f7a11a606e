package journal

// Head is the newest event of one machine's chain that a journal holds.
type Head struct {
	Seq uint64 `json:"seq"`
	ID  string `json:"id"`
}

// Vector summarises a journal: for each machine, the head of its chain.
// Peers compare vectors before sending events. The zero value (nil) is an
// empty vector and can be read; build one with VectorOf.
type Vector map[string]Head

// VectorOf returns the vector of a set of events: for each machine the
// event with the highest seq (on a fork at that seq, the smallest id, so
// every holder of the same set reports the same vector).
func VectorOf(events []*Event) Vector {
	v := make(Vector)
	for _, e := range events {
		v.observe(e)
	}
	return v
}

func (v Vector) observe(e *Event) {
	h, ok := v[e.Machine]
	if !ok || e.Seq > h.Seq || (e.Seq == h.Seq && e.ID < h.ID) {
		v[e.Machine] = Head{Seq: e.Seq, ID: e.ID}
	}
}

// Clone returns a copy of v.
func (v Vector) Clone() Vector {
	c := make(Vector, len(v))
	for k, h := range v {
		c[k] = h
	}
	return c
}

// Since returns, in total order, the events a holder of vector v may lack:
// those above v's head seq for their machine, and those at v's head seq
// whose id differs from v's head (the two sides have forked there, and the
// other side must see it).
func Since(events []*Event, v Vector) []*Event {
	var out []*Event
	for _, e := range events {
		h, ok := v[e.Machine]
		if !ok || e.Seq > h.Seq || (e.Seq == h.Seq && e.ID != h.ID) {
			out = append(out, e)
		}
	}
	Sort(out)
	return out
}
