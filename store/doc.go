// Package store is a node's store of capsules: the capsules under
// $TERN_HOME/capsules, opened on use and closed when idle (opening and
// closing happen outside the store-wide lock, so a slow disk for one agent
// holds up no other), and what the sync, blob and capsule protocols ask of
// them (package protocol's interfaces).
//
//   - store.go: Open and Close, uses of a capsule (Use, With), appends and
//     what peers send, imports and exports, the summaries that answer for
//     a closed capsule (tern status opens none).
//   - chains.go: which copy this machine signed an agent in last
//     ($TERN_HOME/chains): a claim a writer takes before it signs, so that
//     no two copies on one machine fork its chain.
//   - shares.go: which capsule is shared with which paired peer
//     (shares.json); quarantine.go: the lines peers sent that did not
//     check, kept aside.
package store
