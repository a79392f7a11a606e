// Package custody keeps the custody of every agent's epoch on a node
// (docs/MIGRATION.md): it runs the fencing machine (package fencing) of
// each agent whose capsule the node holds and does what the machines ask,
// in their order: the holder registry saved before anything depends on it,
// fencing messages sent over /tern/migrate/1.0.0, the staging area of a
// migration coming here, its promotion (the staged blobs and workspace,
// the holder.activated event carrying the old holder's signed handover,
// then the manifest), the runtime stopped at a freeze and resumed where
// the agent runs. Appends hold the agent's gate (AppendEpoch), so a freeze
// waits for those in flight.
//
// The node is reached through Node (node.go): its capsules, its paired
// peers, and the sync that brings a capsule up to date before a move.
//
//   - holders.go: the machines and what is done for them; migrations
//     started here (Migrate), operators' overrides (Resolve), the startup
//     check and relearning a lost registry, the holder report (State).
//   - registry.go: $TERN_HOME/registry.json, the machines' durable record
//     (tern.registry/1), rewritten whole and atomically on every save.
package custody
