// Package protocol holds tern's wire protocols between paired nodes:
// length-delimited frames with size limits, and the exchanges that run
// over them: /tern/sync/1.0.0, which brings two nodes' journals of one
// agent to the same event set by comparing version vectors and sending
// only the missing events; /tern/blob/1.0.0, which tells which blobs a
// peer holds and fetches one, resumably; and /tern/capsule/1.0.0, which
// lists the capsules a peer shares and copies one. Gossip is in package
// node.
//
// The exchanges run over any io.ReadWriter, so they are tested over
// in-memory pipes and run unchanged over libp2p streams. The package never
// trusts what it reads: every frame is bounded, every event is parsed and
// its signature and id checked before it reaches a store.
package protocol
