package simnet

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Faults is a set of fault kinds a run may inject.
type Faults uint32

// The fault kinds.
const (
	FaultDrop         Faults = 1 << iota // lose a message
	FaultDuplicate                       // deliver a message twice
	FaultReorder                         // random latency, so messages overtake each other
	FaultDelay                           // hold a message back for a long time
	FaultPartition                       // cut every link between two groups for a while
	FaultOneWay                          // cut one direction of one link for a while
	FaultCrash                           // crash a node: volatile state lost, restart later
	FaultLoseRegistry                    // crash a node that comes back without its registry
	FaultPause                           // pause a node for long, then wake it stale
	FaultReplay                          // deliver an old message again, much later
	FaultCorrupt                         // flip a byte of a transferred file
	FaultTail                            // the tail of a migration fails: the target cannot take the last events
	FaultRestore                         // a node comes back from a crash, when the faults end, with an old backup of its registry
	numFaults         = iota
)

// AllFaults is every fault kind; the default.
const AllFaults Faults = 1<<numFaults - 1

var faultNames = [numFaults]string{"drop", "dup", "reorder", "delay", "partition", "oneway",
	"crash", "lose", "pause", "replay", "corrupt", "tail", "restore"}

// FaultNames lists the names ParseFaults accepts, in order.
func FaultNames() []string { return faultNames[:] }

// ParseFaults parses a comma-separated list of fault names, "all" or
// "none".
func ParseFaults(s string) (Faults, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "all", "":
		return AllFaults, nil
	case "none":
		return 0, nil
	}
	var f Faults
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		i := indexOf(faultNames[:], name)
		if i < 0 {
			return 0, fmt.Errorf("unknown fault %q; known: %s, all, none", name, strings.Join(faultNames[:], ","))
		}
		f |= 1 << i
	}
	return f, nil
}

func indexOf(names []string, s string) int {
	for i, n := range names {
		if n == s {
			return i
		}
	}
	return -1
}

// String lists the faults in f as ParseFaults reads them.
func (f Faults) String() string {
	if f == AllFaults {
		return "all"
	}
	if f == 0 {
		return "none"
	}
	var names []string
	for i, n := range faultNames {
		if f&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// Settings are the fault intensities of one run, derived from its seed.
// Message probabilities apply to each message sent before healing; counts
// are events spread over the workload.
type Settings struct {
	Drop, Duplicate, Delay, Replay, Corrupt float64
	Jitter                                  int // extra latency, 0..Jitter ticks
	Partitions, OneWay                      int
	Crashes, LostRegistries, Pauses         int
	TailFail                                float64 // a migration's tail fails
	Restores                                int     // nodes restored from an old backup of their registry
}

func (s Settings) String() string {
	return fmt.Sprintf("drop=%.3f dup=%.3f jitter=%d delay=%.3f partitions=%d oneway=%d crashes=%d lost_registries=%d pauses=%d replay=%.3f corrupt=%.3f tail=%.3f restores=%d",
		s.Drop, s.Duplicate, s.Jitter, s.Delay, s.Partitions, s.OneWay, s.Crashes, s.LostRegistries, s.Pauses, s.Replay, s.Corrupt, s.TailFail, s.Restores)
}

// DeriveSettings draws the fault settings of a run from rng. Each enabled fault is
// on in about two runs out of three, at a random intensity, so that a
// batch covers many mixes. It always draws the same numbers, whatever f
// is, so that a fault list changes only what it disables.
func DeriveSettings(rng *rand.Rand, f Faults) Settings {
	var s Settings
	on := func(k Faults) bool { return rng.IntN(3) > 0 && f&k != 0 }
	p := func(k Faults, hi float64) float64 {
		x := rng.Float64() * hi
		if !on(k) {
			return 0
		}
		return x
	}
	n := func(k Faults, hi int) int {
		x := rng.IntN(hi + 1)
		if !on(k) {
			return 0
		}
		return x
	}
	s.Drop = p(FaultDrop, 0.15)
	s.Duplicate = p(FaultDuplicate, 0.15)
	s.Jitter = n(FaultReorder, 5)
	s.Delay = p(FaultDelay, 0.05)
	s.Partitions = n(FaultPartition, 3)
	s.OneWay = n(FaultOneWay, 3)
	s.Crashes = n(FaultCrash, 4)
	s.LostRegistries = n(FaultLoseRegistry, 2)
	s.Pauses = n(FaultPause, 3)
	s.Replay = p(FaultReplay, 0.08)
	s.Corrupt = p(FaultCorrupt, 0.1)
	s.TailFail = p(FaultTail, 0.3)
	s.Restores = n(FaultRestore, 1)
	return s
}
