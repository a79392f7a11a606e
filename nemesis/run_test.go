package nemesis

import (
	"context"
	"testing"
)

// Every scenario once, half of them on each transport, against tern as
// it is: no violation, and the copies converge after every heal.
func TestEveryScenarioFindsNothingInTern(t *testing.T) {
	tern := ternBinary(t)
	half := len(Scenarios) / 2
	for i, transport := range []string{"tcp", "quic"} {
		t.Run(transport, func(t *testing.T) {
			dir := t.TempDir()
			sum, err := Run(context.Background(), Options{Tern: tern, Transports: []string{transport}, Trials: half + i*(len(Scenarios)-2*half),
				Seed: uint64(i * half), Dir: dir, Report: func(tr Trial) { t.Log(tr) }, Log: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(sum)
			if sum.Found() {
				t.Errorf("%v; the nodes' logs are in %s", sum, dir)
			}
		})
	}
}

// The checker can fail: nodes that run resume-on-silence (a committing
// source that takes a silent target for a refusal) are caught running the
// agent twice, within the few trials CI gives it.
func TestTheCheckerCatchesAFlawedNode(t *testing.T) {
	tern := ternBinary(t)
	sum, err := Run(context.Background(), Options{Tern: tern, Transports: []string{"tcp"}, Trials: 3, Seed: 1, Dir: t.TempDir(),
		Env: []string{"TERN_FLAW=resume-on-silence"}, Scenarios: []string{"cut-activate"}, Report: func(tr Trial) { t.Log(tr) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(sum)
	if sum.Doubles == 0 {
		t.Fatalf("the checker saw no two nodes running the agent with resume-on-silence: %v", sum)
	}
}
