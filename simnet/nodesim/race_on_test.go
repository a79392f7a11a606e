//go:build race

package nodesim

// raceEnabled: the race detector slows the long simulations (the hunts for
// the historical bugs) tenfold; they run without it in CI.
const raceEnabled = true
