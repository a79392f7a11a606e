package fencing

import (
	"fmt"
	"slices"
)

// State is where an agent stands on one node.
type State uint8

// The states of an agent on a node. The zero value, None, is a node that
// does not hold the agent.
const (
	None    State = iota // does not hold the agent
	Active               // holds Record.Epoch and may run the agent
	Frozen               // holds Record.Epoch, stopped, migrating it to Record.Peer at Record.Next
	Staging              // receiving epoch Record.Epoch from Record.Peer
	Retired              // held Record.Epoch and handed the agent to Record.Peer
)

var stateNames = [...]string{"none", "active", "frozen", "staging", "retired"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// Decision is what a node decided for one epoch it was asked to take.
// Activated and Refused are the only values a decision record holds; once
// written they never change. Unknown appears only in answers: the node lost
// the record that would say.
type Decision uint8

// Decisions. The zero value, Undecided, means there is no record.
const (
	Undecided Decision = iota
	Activated
	Refused
	Unknown
)

var decisionNames = [...]string{"undecided", "activated", "refused", "unknown"}

func (d Decision) String() string {
	if int(d) < len(decisionNames) {
		return decisionNames[d]
	}
	return fmt.Sprintf("decision(%d)", d)
}

// Holder names a node and the epoch it activated: the latest activation a
// node knows of. Facts like this come only from the node that activated or
// from a source that heard it decide, so they are never wrong, only old.
type Holder struct {
	Peer  string `json:"peer"`
	Epoch uint64 `json:"epoch"`
}

// Decided is one decision record: what this node decided for Epoch.
type Decided struct {
	Epoch    uint64
	Decision Decision
}

// Record is the durable state of one agent on one node: the part of the
// holder registry a Machine reads at start and hands back in every Ready
// that changes it. Decision records are append-only: a machine never
// changes or removes one.
type Record struct {
	// Highest is the highest epoch this node has seen in a proposal, a
	// fence, a query, its own proposals or a relearn. Proposals and
	// fences not newer than it are refused.
	Highest uint64
	// State, Epoch and Peer say where the agent stands here (see State).
	State State
	Epoch uint64
	Peer  string
	// Next is the epoch a frozen source proposed to Peer.
	Next uint64
	// Committing: the frozen source passed the point of no return (it may
	// have sent activate(Next)); only the target's decision resolves it.
	Committing bool
	// Prepared: the staging target prepared Epoch and will activate it.
	Prepared bool
	// Floor is set when the registry was lost and relearnt: for an epoch
	// up to Floor without a decision record the answer is Unknown, forever,
	// because the lost registry may have held a decision for it.
	Floor uint64
	// Holder is the latest activation this node knows of.
	Holder Holder
	// Decisions are this node's decision records, in the order written.
	Decisions []Decided
}

// Decision returns the decision recorded for epoch, or Undecided.
func (r *Record) Decision(epoch uint64) Decision {
	for i := len(r.Decisions) - 1; i >= 0; i-- {
		if r.Decisions[i].Epoch == epoch {
			return r.Decisions[i].Decision
		}
	}
	return Undecided
}

// decide appends a decision record; callers have checked there is none.
func (r *Record) decide(epoch uint64, d Decision) {
	r.Decisions = append(r.Decisions, Decided{epoch, d})
	if epoch > r.Highest {
		r.Highest = epoch
	}
}

// Clone returns a copy of r that shares no memory with it.
func (r Record) Clone() Record {
	r.Decisions = slices.Clone(r.Decisions)
	return r
}

// Equal reports whether r and o hold the same state and decisions.
func (r *Record) Equal(o *Record) bool {
	return r.Highest == o.Highest && r.State == o.State && r.Epoch == o.Epoch && r.Peer == o.Peer &&
		r.Next == o.Next && r.Committing == o.Committing && r.Prepared == o.Prepared &&
		r.Floor == o.Floor && r.Holder == o.Holder && slices.Equal(r.Decisions, o.Decisions)
}

// Validate checks that r is a state a Machine can be in. It is what
// DecodeRegistry and New check; an error names the field that is wrong.
func (r *Record) Validate() error {
	if r.State > Retired {
		return fmt.Errorf("record: unknown state %d", r.State)
	}
	// Decisions are almost always written in increasing epoch order, which
	// proves there are no two for one epoch; otherwise look for one.
	sorted := slices.IsSortedFunc(r.Decisions, func(a, b Decided) int { return cmpU64(a.Epoch, b.Epoch) })
	var seen map[uint64]bool
	for i, d := range r.Decisions {
		if d.Decision != Activated && d.Decision != Refused {
			return fmt.Errorf("record: decision for epoch %d is %v, want activated or refused", d.Epoch, d.Decision)
		}
		dup := i > 0 && r.Decisions[i-1].Epoch == d.Epoch
		if !sorted {
			if seen == nil {
				seen = make(map[uint64]bool, len(r.Decisions))
			}
			dup = seen[d.Epoch]
			seen[d.Epoch] = true
		}
		if dup {
			return fmt.Errorf("record: two decisions for epoch %d", d.Epoch)
		}
		if d.Epoch > r.Highest {
			return fmt.Errorf("record: decision for epoch %d above highest %d", d.Epoch, r.Highest)
		}
	}
	switch {
	case r.Epoch > r.Highest:
		return fmt.Errorf("record: epoch %d above highest %d", r.Epoch, r.Highest)
	case r.Floor > r.Highest:
		return fmt.Errorf("record: floor %d above highest %d", r.Floor, r.Highest)
	case r.Holder.Epoch > r.Highest:
		return fmt.Errorf("record: holder epoch %d above highest %d", r.Holder.Epoch, r.Highest)
	}
	switch r.State {
	case Active, Frozen:
		if r.Decision(r.Epoch) != Activated {
			return fmt.Errorf("record: %v at epoch %d without activated(%d)", r.State, r.Epoch, r.Epoch)
		}
	}
	switch r.State {
	case Frozen:
		if r.Peer == "" || r.Next <= r.Epoch || r.Next > r.Highest {
			return fmt.Errorf("record: frozen at %d needs a target and a proposed epoch in (%d, %d], have %q and %d",
				r.Epoch, r.Epoch, r.Highest, r.Peer, r.Next)
		}
	case Staging:
		if r.Peer == "" || r.Epoch == 0 || r.Decision(r.Epoch) != Undecided {
			return fmt.Errorf("record: staging epoch %d needs a source and no decision", r.Epoch)
		}
	default:
		if r.Committing || r.Next != 0 {
			return fmt.Errorf("record: %v with a migration in progress", r.State)
		}
	}
	if r.Prepared && r.State != Staging {
		return fmt.Errorf("record: prepared while %v", r.State)
	}
	return nil
}

// Created is the record of a node that has just created an agent: it holds
// epoch 1, activated here.
func Created(self string) Record {
	return Record{Highest: 1, State: Active, Epoch: 1, Holder: Holder{self, 1},
		Decisions: []Decided{{1, Activated}}}
}

// Joined is the record of a node that knows of an agent held by holder but
// has never held it (it learnt of it from the capsule's manifest).
func Joined(holder Holder) Record {
	return Record{Highest: holder.Epoch, Holder: holder}
}
