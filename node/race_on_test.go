//go:build race

package node

// raceEnabled: the race detector slows the long simulations tenfold; they
// run without it in CI.
const raceEnabled = true
