package simnet

import "github.com/tern-dev/tern/fencing"

// Coverage counts every event the machines reported, by kind.
type Coverage [fencing.NumEventKinds]int

// Outcomes are the event kinds that must occur in every batch: if one of
// them never happens, the simulation did not test it and the batch fails.
var Outcomes = []fencing.EventKind{
	fencing.EvCommit,
	fencing.EvAbort,
	fencing.EvRetireByQuery,
	fencing.EvResumeByQuery,
	fencing.EvStaleRefused,
	fencing.EvRelearned,
	fencing.EvOverride,
}

// Add adds o's counts to c.
func (c *Coverage) Add(o *Coverage) {
	for i := range c {
		c[i] += o[i]
	}
}
