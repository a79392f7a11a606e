// Package node is the tern daemon: a libp2p host that holds capsules and
// keeps them in sync with the machine's paired peers.
//
// Where things are:
//
//   - node.go: Start and Close, the libp2p host (transports, NAT traversal,
//     relay), mDNS, and the Node's accessors; config.go: $TERN_HOME/config.json.
//   - rounds.go: the sync policy (package syncpolicy, a pure machine)
//     executed: what it is told (connections, dials, imports, gossip
//     gaps, the exchanges peers start, the anti-entropy ticks) and the
//     rounds and dials it asks for; a round with a peer (copies of what it
//     shares, exchanges, wanted blobs).
//   - fetch.go: fetching the blobs a capsule wants, one fetch per blob at
//     a time, resuming from $TERN_HOME/partial (the transfers in flight,
//     that tern status lists, are protocol.Transfers); offer.go: naming
//     a snapshot's blobs to the peers as they land, and taking what peers
//     offer aside until an event names it; push.go: a snapshot's large
//     files sent to the peers while they are stored, and taking pushes.
//   - gossip.go: one GossipSub topic per agent and its validator.
//   - custody.go: what the fencing of held agents (package custody)
//     needs of the node: its capsules, its paired peers, the sync before
//     a move; ownchain.go: taking this machine's own chain from the peers
//     before signing, and healing a fork of it on contact.
//   - peers.go, gater.go: the allowlist (package internal/allowlist) and
//     the connection gater that enforces it. The capsules themselves are package store's.
//   - identity.go: the machine's key, which offline commands use too, so
//     that the key that signs journal events is the key the node serves
//     under.
//   - report.go: the node's status, a peer's sync state, reloading
//     peers.json and shares.json; moves.go: reaching a peer, moves, the
//     holder report, where an agent runs; metrics.go: /metrics. The HTTP
//     API that serves them is package api; node.go starts it.
//   - runtime.go: what the runtime (package turns) needs of the node:
//     its capsules, the hold on an agent's appends a freeze waits for,
//     appends and snapshots signed at the agent's epoch; relay.go: the
//     libp2p side of following a turn that runs on another node.
//   - members.go: who writes an agent's history (adding a paired peer as
//     it is given the agent, foreign copies).
//   - home.go: what a home holds, and what killed runs left in it (the
//     node's lock on its home is internal/homelock).
//   - peeraddrs.go: a paired peer's stored address follows the port it
//     says it listens on; jobs.go: background work, one run per key.
//   - harness.go: the seams a harness (simnet/nodesim, the simulator's
//     node and libp2p layers) runs a node through: its transport, its
//     spawner, its clock, and what its checker watches.
//
// The wire protocols themselves are in package protocol; docs/PROTOCOLS.md
// describes them.
package node
