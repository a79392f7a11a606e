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
