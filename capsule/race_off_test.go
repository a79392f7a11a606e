//go:build !race

package capsule

const raceEnabled = false
