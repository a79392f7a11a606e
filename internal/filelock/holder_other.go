//go:build unix && !linux

package filelock

// holderPID is not known here: only Linux lists flock holders.
func holderPID(string) int { return 0 }
