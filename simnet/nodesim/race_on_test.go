//go:build race

package nodesim

// raceEnabled: the race detector slows the long simulations tenfold; they
// run without it in CI.
const raceEnabled = true
