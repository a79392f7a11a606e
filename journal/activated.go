package journal

import "encoding/json"

// ActivatedType is the type of the event with which a node that activated
// an agent at a new holder epoch (a migration committed) marks where the
// old holder's epoch ends: its body is an ActivatedBody, its epoch the new
// one, its machine the new holder. Readers set aside the old holder's
// events of the old epoch written after that point: they are stale (the
// old holder ran on after it handed the agent over, a restored backup, say).
const ActivatedType = "holder.activated"

// ActivatedBody is the body of a holder.activated event.
type ActivatedBody struct {
	Holder Bound `json:"holder"` // the node that activated, and the epoch (its machine and the event's epoch)
	From   Bound `json:"from"`   // the old holder, its epoch, and its chain's head when it froze
	// Handover is the old holder's signed word that it handed the agent
	// to Holder (see Custody); events written before custody lack it.
	Handover *Handover `json:"handover,omitempty"`
}

// Bound names a machine, an epoch and, for the old holder, the head of its
// chain when its epoch ended: the seq and id of the last event it wrote
// under that epoch.
type Bound struct {
	Peer  string `json:"peer"`
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq,omitempty"`
	ID    string `json:"id,omitempty"`
}

// endOf is where an activation says one machine's epoch ended: the head
// of its chain, by seq and (from writers that say it) id.
type endOf struct {
	seq uint64
	id  string
}

// epochBounds is, per machine and epoch, where an activation says the
// machine's chain ended under that epoch.
type epochBounds map[string]map[uint64]endOf

// boundOf reads a holder.activated event: the old holder's machine, epoch
// and where its chain ended. ok is false for an event of another type, a
// body of another shape, or one that does not describe its own writer as
// the new holder at its own epoch (only the node that activated says where
// the old epoch ends).
func boundOf(e *Event) (machine string, epoch uint64, end endOf, ok bool) {
	if e.Type != ActivatedType {
		return "", 0, endOf{}, false
	}
	b, ok := readActivated(e.Body)
	if !ok {
		return "", 0, endOf{}, false
	}
	if b.Holder.Peer != e.Machine || b.Holder.Epoch != e.Epoch || b.From.Peer == "" || b.From.Peer == e.Machine ||
		b.From.Epoch == 0 || b.From.Epoch >= e.Epoch {
		return "", 0, endOf{}, false
	}
	return b.From.Peer, b.From.Epoch, endOf{b.From.Seq, b.From.ID}, true
}

// add records a bound, keeping for one machine and epoch the lowest seq,
// and at that seq an id over none, and the smallest id over another.
func (eb epochBounds) add(machine string, epoch uint64, end endOf) {
	m := eb[machine]
	if m == nil {
		m = map[uint64]endOf{}
		eb[machine] = m
	}
	cur, ok := m[epoch]
	switch {
	case !ok, end.seq < cur.seq:
		m[epoch] = end
	case end.seq == cur.seq && end.id != "" && (cur.id == "" || end.id < cur.id):
		m[epoch] = end
	}
}

// boundsOf collects the bounds the activations among events set.
func boundsOf(events []*Event) epochBounds {
	var eb epochBounds
	for _, e := range events {
		if machine, epoch, end, ok := boundOf(e); ok {
			if eb == nil {
				eb = epochBounds{}
			}
			eb.add(machine, epoch, end)
		}
	}
	return eb
}

// touches reports whether an activation ends e's epoch for e's machine:
// whether e may be stale, which only its chain can tell (see staleIn).
func (eb epochBounds) touches(e *Event) bool {
	if e.Epoch == 0 || eb == nil {
		return false
	}
	_, ok := eb[e.Machine][e.Epoch]
	return ok
}

// staleIn returns the ids of the events of one machine's chain that it
// wrote under an epoch that had ended (docs/FORMAT.md, holder.activated):
// for each epoch an activation ends, the events at that epoch above the
// seq where it ended, and, when the activation names the head by id and
// the chain holds it, the events at that epoch that are not the head or
// its ancestors (a branch the machine wrote from an older state: a home
// restored from a backup). Then what the machine's heals signed again of a
// stale event is stale too, as the event was. chain is one machine's
// events, sorted by seq; nil when none is stale.
func (eb epochBounds) staleIn(chain []*Event) map[string]bool {
	if len(chain) == 0 || eb[chain[0].Machine] == nil {
		return nil
	}
	ends := eb[chain[0].Machine]
	// Another branch exists only where two events share a seq (chain is
	// sorted by seq): without one, every event at or below a head is its
	// ancestor, and the seq alone says (the common case, in one pass).
	forked := false
	for i := 1; i < len(chain) && !forked; i++ {
		forked = chain[i].Seq == chain[i-1].Seq
	}
	var byID map[string]*Event
	standing := map[uint64]map[string]bool{} // by epoch: the head an activation names and its ancestors
	reached := map[uint64]uint64{}           // by epoch: the lowest seq of that line held here
	for epoch, end := range ends {
		if end.id == "" || !forked {
			continue
		}
		if byID == nil {
			byID = make(map[string]*Event, len(chain))
			for _, e := range chain {
				byID[e.ID] = e
			}
		}
		head, ok := byID[end.id]
		if !ok || head.Seq != end.seq {
			continue // not held here (yet), or not that seq: the seq alone says
		}
		line := map[string]bool{}
		for e := head; e != nil && !line[e.ID]; e = byID[e.Prev] {
			line[e.ID] = true
			reached[epoch] = e.Seq
		}
		standing[epoch] = line
	}
	var out map[string]bool
	for _, e := range chain {
		end, ok := ends[e.Epoch]
		if e.Epoch == 0 || !ok {
			continue
		}
		// Below the lowest ancestor held here, a missing event keeps the
		// line from being followed: those events are not judged by it.
		if line := standing[e.Epoch]; e.Seq > end.seq || line != nil && !line[e.ID] && e.Seq >= reached[e.Epoch] {
			if out == nil {
				out = map[string]bool{}
			}
			out[e.ID] = true
		}
	}
	if out == nil {
		return nil
	}
	// Content a heal signed again stays as stale as it was, however many
	// heals passed it on.
	for changed := true; changed; {
		changed = false
		for _, e := range chain {
			if e.Type != HealType {
				continue
			}
			b, ok := readHeal(e.Body)
			if !ok {
				continue
			}
			for _, r := range b.Replaced {
				if out[r.ID] && r.By != "" && !out[r.By] {
					out[r.By] = true
					changed = true
				}
			}
		}
	}
	return out
}

// readActivated reads a holder.activated body strictly: an object whose
// "holder" and "from" members (those exact names) are objects with a
// string "peer" and an integer "epoch", and for "from" an optional integer
// "seq" (absent means 0); other members are ignored. A body of another
// shape (a null, a string or a fraction where a number belongs, a member
// spelt otherwise) counts for nothing.
func readActivated(body []byte) (b ActivatedBody, ok bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return b, false
	}
	bound := func(raw json.RawMessage, withSeq bool) (Bound, bool) {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil || !isString(m["peer"]) {
			return Bound{}, false
		}
		var bd Bound
		if json.Unmarshal(m["peer"], &bd.Peer) != nil {
			return Bound{}, false
		}
		var okE bool
		if bd.Epoch, okE = wholeNumber(m["epoch"]); !okE {
			return Bound{}, false
		}
		if raw, has := m["seq"]; has && withSeq {
			if bd.Seq, okE = wholeNumber(raw); !okE {
				return Bound{}, false
			}
		}
		if raw, has := m["id"]; has && withSeq {
			if !isString(raw) || json.Unmarshal(raw, &bd.ID) != nil {
				return Bound{}, false
			}
		}
		return bd, true
	}
	var okH, okF bool
	b.Holder, okH = bound(top["holder"], false)
	b.From, okF = bound(top["from"], true)
	if raw, has := top["handover"]; has && okH && okF {
		// Custody reads it; a handover of another shape proves nothing.
		var h map[string]json.RawMessage
		if json.Unmarshal(raw, &h) == nil && h != nil && isString(h["sig"]) {
			from, okA := bound(h["from"], false)
			to, okB := bound(h["to"], false)
			var sig string
			if okA && okB && json.Unmarshal(h["sig"], &sig) == nil {
				b.Handover = &Handover{From: from, To: to, Sig: sig}
			}
		}
	}
	return b, okH && okF
}

// wholeNumber reads a JSON number that is a whole number from 0 to
// 2^53-1.
func wholeNumber(raw json.RawMessage) (uint64, bool) {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return 0, false
	}
	return parseSafeInt(raw)
}
