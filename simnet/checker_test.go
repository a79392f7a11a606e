package simnet

import (
	"strings"
	"testing"

	"github.com/tern-dev/tern/fencing"
)

// A node that refused an epoch and then lost its registry may activate
// that epoch after the operator's override on it (OverrideLost's contract
// lets those decisions go), but never one activated elsewhere; without the
// override the change of mind is a violation.
func TestTheLedgerForgetsOnlyWhatTheOverrideOfALostRegistryLetsGo(t *testing.T) {
	var l Ledger
	l.Reset([]string{"n0", "n1"})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Decide(1, fencing.Decided{Epoch: 2, Decision: fencing.Activated}, 1))
	must(l.Decide(0, fencing.Decided{Epoch: 3, Decision: fencing.Refused}, 2))
	if err := l.Decide(0, fencing.Decided{Epoch: 3, Decision: fencing.Activated}, 3); err == nil || !strings.Contains(err.Error(), "after deciding") {
		t.Fatalf("a change of mind without an override: %v, want a violation", err)
	}

	l.Reset([]string{"n0", "n1"})
	must(l.Decide(1, fencing.Decided{Epoch: 2, Decision: fencing.Activated}, 1))
	must(l.Decide(0, fencing.Decided{Epoch: 3, Decision: fencing.Refused}, 2))
	must(l.Decide(0, fencing.Decided{Epoch: 2, Decision: fencing.Refused}, 2))
	l.Forget(0)
	must(l.Decide(0, fencing.Decided{Epoch: 3, Decision: fencing.Activated}, 3))
	if err := l.Decide(0, fencing.Decided{Epoch: 2, Decision: fencing.Activated}, 4); err == nil || !strings.Contains(err.Error(), "activated on n1 and on n0") {
		t.Fatalf("an epoch activated elsewhere, after Forget: %v, want a violation", err)
	}
	if got := l.MaxActivated(); got != 3 {
		t.Fatalf("MaxActivated = %d, want 3", got)
	}
}
