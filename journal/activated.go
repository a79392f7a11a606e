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
}

// Bound names a machine, an epoch and, for the old holder, the seq of the
// last event of its chain it wrote under that epoch.
type Bound struct {
	Peer  string `json:"peer"`
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq,omitempty"`
}

// epochBounds is, per machine and epoch, the highest seq of the machine's
// chain that an activation lets stand under that epoch.
type epochBounds map[string]map[uint64]uint64

// boundOf reads a holder.activated event: the old holder's machine, epoch
// and last seq. ok is false for an event of another type, a body of
// another shape, or one that does not describe its own writer as the new
// holder at its own epoch (only the node that activated says where the
// old epoch ends).
func boundOf(e *Event) (machine string, epoch, seq uint64, ok bool) {
	if e.Type != ActivatedType {
		return "", 0, 0, false
	}
	b, ok := readActivated(e.Body)
	if !ok {
		return "", 0, 0, false
	}
	if b.Holder.Peer != e.Machine || b.Holder.Epoch != e.Epoch || b.From.Peer == "" || b.From.Peer == e.Machine ||
		b.From.Epoch == 0 || b.From.Epoch >= e.Epoch {
		return "", 0, 0, false
	}
	return b.From.Peer, b.From.Epoch, b.From.Seq, true
}

// add records a bound, keeping the lowest seq for one machine and epoch.
func (eb epochBounds) add(machine string, epoch, seq uint64) {
	m := eb[machine]
	if m == nil {
		m = map[uint64]uint64{}
		eb[machine] = m
	}
	if cur, ok := m[epoch]; !ok || seq < cur {
		m[epoch] = seq
	}
}

// boundsOf collects the bounds the activations among events set.
func boundsOf(events []*Event) epochBounds {
	var eb epochBounds
	for _, e := range events {
		if machine, epoch, seq, ok := boundOf(e); ok {
			if eb == nil {
				eb = epochBounds{}
			}
			eb.add(machine, epoch, seq)
		}
	}
	return eb
}

// stale reports whether an activation bounds e's epoch below e's seq.
func (eb epochBounds) stale(e *Event) bool {
	if e.Epoch == 0 || eb == nil {
		return false
	}
	seq, ok := eb[e.Machine][e.Epoch]
	return ok && e.Seq > seq
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
		return bd, true
	}
	var okH, okF bool
	b.Holder, okH = bound(top["holder"], false)
	b.From, okF = bound(top["from"], true)
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
