//go:build race

package capsule

// raceEnabled: the race detector slows a pass over gigabytes to minutes.
const raceEnabled = true
