package simnet

import "testing"

// BenchmarkRun measures one seed of the default workload (3 nodes, 20
// migrations, every fault) on one goroutine; run it with -cpu 1. It reports
// seeds/s and steps/s.
func BenchmarkRun(b *testing.B) {
	r := NewRunner(DefaultOptions())
	steps := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		res := r.Run(uint64(i) + 1)
		steps += res.Steps
		if res.Failed() {
			b.Fatalf("seed %d: %s", res.Seed, res.Violation)
		}
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "seeds/s")
	b.ReportMetric(float64(steps)/sec, "steps/s")
	b.ReportMetric(float64(steps)/float64(b.N), "steps/seed")
}
