package simnet

import "github.com/tern-dev/tern/fencing"

// operate is the operator: called when the nodes have not settled long
// after healing, or settled with nobody running the agent. It acts only
// where the ground truth says a person would: a node lost its registry and
// with it the decision record that would have resolved things, so that
// node is, for this agent, gone for good. Then it runs the override on the
// node a person would use. Nodes that lost their registries and wait for
// each other are resolved on the one whose journal is newest. It returns
// false if it may do nothing.
func (r *Runner) operate() bool {
	if r.res.Operator >= maxOperator {
		return false
	}
	if r.runners != 0 {
		return false // a person would see it running
	}
	// Two nodes lost their registries and each waits for the other's
	// answer: override on the lost one whose journal is newest.
	var newest *host
	lost := 0
	for _, h := range r.hosts {
		if !h.up || !h.lost {
			continue
		}
		lost++
		if newest == nil || r.chk.NewestActivatedOn(h.idx) > r.chk.NewestActivatedOn(newest.idx) {
			newest = h
		}
	}
	if lost >= 2 {
		return r.overrideLost(newest)
	}
	// A source frozen past the point of no return, asking a target that
	// lost its decision: override on the source.
	for _, h := range r.hosts {
		s := &h.saved
		if !h.up || s.State != fencing.Frozen || !s.Committing {
			continue
		}
		t := r.hosts[hostIndex(s.Peer)]
		if t.lostAt >= 0 && !t.lost && t.saved.Decision(s.Next) == fencing.Undecided && s.Next <= t.saved.Floor {
			return r.override(h, t)
		}
	}
	// Nobody runs and nobody is frozen, and the node that last activated
	// lost its registry since: override on another node.
	for _, h := range r.hosts {
		if h.saved.State == fencing.Frozen {
			return false
		}
	}
	on, at, ok := r.chk.Activated(r.chk.MaxActivated())
	if !ok {
		return false
	}
	l := r.hosts[on]
	if l.lostAt < at || l.lost {
		return false
	}
	for _, h := range r.hosts {
		if h != l && !h.lost && h.up && h.saved.State != fencing.Active && h.saved.State != fencing.Staging {
			return r.override(h, l)
		}
	}
	return false
}

func (r *Runner) override(h, gone *host) bool {
	r.res.Operator++
	if r.trace != nil {
		r.tracef("operator: override on %s, %s is gone for good", h.id, gone.id)
	}
	r.mix(uint64(r.now), 300, uint64(h.idx), uint64(gone.idx))
	r.input(h)
	if err := h.m.Override(gone.id); err != nil {
		r.violation("operator override on %s: %v", h.id, err)
		return false
	}
	r.apply(h)
	return true
}

func (r *Runner) overrideLost(h *host) bool {
	r.res.Operator++
	seen := r.chk.NewestActivatedOn(h.idx)
	if r.trace != nil {
		r.tracef("operator: override on %s, which lost its registry as others did (its journal knows epoch %d)", h.id, seen)
	}
	r.mix(uint64(r.now), 301, uint64(h.idx), seen)
	r.chk.Forget(h.idx)
	r.input(h)
	if err := h.m.OverrideLost(seen); err != nil {
		r.violation("operator override on %s: %v", h.id, err)
		return false
	}
	h.lost = false
	r.apply(h)
	return true
}
