// Package simnet is the model layer of tern's deterministic simulation: many
// nodes running the real fencing and sync policy machines over a simulated
// network that drops, duplicates, reorders, delays, partitions (also one way),
// replays old messages and corrupts transfers, while nodes crash (losing
// their volatile state, sometimes their registry) and pause for a long time
// and wake up stale. A random workload migrates the agent between random
// nodes, back and forth and in chains.
//
// Everything is derived from one seed (math/rand/v2's PCG): the fault
// settings, the workload, every fault and every latency. The simulator is a
// single-threaded event heap, so the same seed always gives the same trace;
// Result.TraceHash proves it. A checker runs after every step (at most one
// runner; each epoch activated on at most one node, ever, and runs only in
// epoch order; registries and decision records only move forward and never
// change, across crashes and lost registries; every frozen node has an
// unresolved migration) and at quiescence after healing (exactly one
// runner, nothing frozen, no staging left, the runner's capsule verifies).
// Coverage counters make sure every outcome happened in a batch.
//
// Beside its fencing machine every node runs the sync policy
// (syncpolicy.Machine) and holds a copy of the agent's events; its rounds
// run as streams over the same faulty network, and once the faults end and
// the rounds go quiet every node must be connected to every other and hold
// the same events (docs/SIMULATION.md). The sync layer draws from a random
// stream of its own, so a seed's fencing side runs as it would without it.
//
// Faulty wraps a peer and fails one named call before or after it runs,
// for table tests of every call of the protocol.
//
// The package never does real I/O, never reads the wall clock inside a run
// and never shares state between runs; runs of different seeds may go in
// parallel.
package simnet
