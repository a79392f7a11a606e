// Package node is the tern daemon: a libp2p host that holds capsules and
// keeps them in sync with the machine's paired peers.
//
// Where things are:
//
//   - node.go: Start and Close, the libp2p host (transports, NAT traversal,
//     relay), mDNS, and the Node's accessors; config.go: $TERN_HOME/config.json.
//   - rounds.go: sync rounds with a peer: on connect (the lower peer ID
//     leads), on the anti-entropy timer, after an import; the record of
//     what each peer holds, so unchanged pairs are skipped.
//   - fetch.go: fetching the blobs a capsule wants, one fetch per blob at
//     a time, resuming from $TERN_HOME/partial; transfers.go: the
//     transfers in flight, both ways, that tern status lists.
//   - gossip.go: one GossipSub topic per agent and its validator.
//   - holders.go: the fencing machine of every agent the node holds, and
//     what the node does for it (the registry, moves, the tail, the
//     promotion, stepping down when a peer knows a newer activation);
//     ownchain.go: taking this machine's own chain from the peers before
//     signing, and healing a fork of it on contact.
//   - store.go: the capsules under $TERN_HOME/capsules, opened on use and
//     closed when idle; it answers the sync and blob protocols.
//     quarantine.go keeps aside the events peers sent that did not check.
//   - peers.go, gater.go, shares.go: the allowlist, the connection gater
//     that enforces it, and which capsule is shared with which peer.
//   - identity.go: the machine's key, which offline commands use too, so
//     that the key that signs journal events is the key the node serves
//     under.
//   - api.go, client.go, metrics.go: the loopback HTTP API (only for a
//     loopback Host and Origin, with its bearer token), the client the CLI
//     uses, and /metrics; status.go: the one table from an error to the
//     API's status.
//   - turns.go, live.go: the runtime, which runs the turns of the agents
//     the node runs as session.Next decides (model steps, tools with
//     intents and outcomes, reconciliation, snapshots), and the turns in
//     flight that SSE subscribers follow; turns_api.go: the sessions and
//     turns API; relay.go: following a turn that runs on another node.
//   - mcp.go: the agents' MCP servers (connections, OAuth callbacks);
//     memory.go: the memory API and search; model.go: model tests.
//   - members.go, members_api.go: who writes an agent's history (adding
//     a paired peer as it is given the agent, foreign copies) and its API.
//   - migrate_api.go: moves, the holder report and resolve; registry.go:
//     $TERN_HOME/registry.json, the fencing machines' durable record.
//   - chains.go: which copy this machine signed an agent in last
//     ($TERN_HOME/chains); home.go: the node's lock on its home.
//   - peeraddrs.go: a paired peer's stored address follows the port it
//     says it listens on; jobs.go: background work, one run per key.
//   - ui.go, ui/: the web page and its login and CSRF sessions.
//   - harness.go: the seams a harness (simnet/nodesim, the simulator's
//     node and libp2p layers) runs a node through: its transport, its
//     spawner, its clock, and what its checker watches.
//
// The wire protocols themselves are in package protocol; docs/PROTOCOLS.md
// describes them.
package node
