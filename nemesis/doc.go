// Package nemesis runs real tern nodes on a real network stack under
// faults, and checks tern's promises against what they do: at most one
// node runs an agent, epochs never go down, no acknowledged append is
// lost or set aside, and the copies converge once the faults end.
//
// Each node is a `tern node` process in a network namespace of its own,
// with a TUN device as its only link. The nemesis holds the other end of
// every TUN device and carries IPv4 packets between them in user space
// (the Wire), delaying, dropping, duplicating, reordering and cutting
// them per direction as a seeded Plan decides: this kernel has no netem,
// iptables or nft, and a wire in Go needs none of them.
//
// It needs root, the ip command and /dev/net/tun (Available says what is
// missing); it must never touch a namespace, device or process it did not
// make, and removes what it made even when a trial fails.
//
// Files:
//
//   - faults.go: Faults and Plan, the pure decisions: what happens to
//     each packet of a direction, from the seed (table-tested)
//   - wire.go: Wire, which carries packets between Ports as the Plan
//     decides
//   - netns_linux.go: namespaces and TUN devices (the thin adapter), and
//     dialing into a namespace; netns_other.go says why elsewhere it
//     cannot run
//   - cluster.go: Cluster and Node, the tern node processes, paired, with
//     one agent, and their API; a node's log is an internal/linelog.Log,
//     awaited line by line
//   - check.go: the checks: Runners (the pure rule for two nodes running
//     the agent at once, table-tested), the sampler of every node's API,
//     epochs that never go down, acknowledged appends, convergence
//   - scenario.go: the scenarios, each aimed at a phase of a migration or
//     a fault of a machine
//   - run.go: Run, trials on a cluster per transport, and their report
package nemesis
