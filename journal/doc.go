// Package journal is tern's event journal: the signed, hash-chained,
// append-only record of everything an agent did, stored as
// memory/timeline_events.jsonl in a capsule.
//
// The package has two layers.
//
// The model is pure: [ParseLine] and [Decode] read envelopes (whatever
// their bodies hold), [ParseDraft] reads what a writer supplies, [NewEvent]
// makes and signs one (refusing a draft of a core type, message, tool_call,
// tool_result or reasoning, whose body lacks what docs/FORMAT.md requires),
// [Compare] and [Sort] give the total order (clock, machine, seq), [Merge] is
// the set union keyed by id, [VectorOf] and [Since] summarise a journal for
// sync and say what a peer lacks, [Check], [Forks] and [Readable] find and
// quarantine broken or forked chains, and [Heal] plans how a machine
// resolves a fork of its own chain (a chain.healed event sets the other
// branch aside, its content signed again). These functions take time as an input, do no I/O, start no
// goroutines and are safe for concurrent use.
//
// The file adapter is [Log] (and [ExtendFile]): one journal file, opened and
// checked, repaired (a torn last line only, logged), appended to durably
// with group commit ([Log.Append] for the node's own events, [Log.Add] for
// events received from peers), and extended atomically by a heal ([Heal]
// plans it, purely).
//
// The package must never touch the network, never read any file but the
// journal it is given, never rewrite or reorder bytes of an event it has read
// (unknown fields and types are kept byte for byte), and never silently choose
// between two forked events. Bad input is an error, never a panic.
//
// # Envelope (format version 1)
//
// Each line is the RFC 8785 canonical JSON of one object, then "\n". All of
// these fields are always present:
//
//	v        integer format version, 1
//	id       CIDv1 (codec json 0x0200, sha2-256), base32 string, of the
//	         canonical bytes of the envelope without "id"
//	machine  libp2p peer ID (ed25519) of the writer
//	seq      position in the machine's chain, from 1
//	prev     id of the machine's event seq-1, "" for seq 1
//	clock    Lamport clock, from 1
//	epoch    holder epoch, 0 for offline edits
//	time     RFC 3339 UTC wall clock, for people only
//	session  string, may be ""
//	turn     string, may be ""
//	type     non-empty string
//	body     any JSON value
//	sig      standard base64 ed25519 signature over the canonical bytes of
//	         the envelope without "id" and "sig"
//
// Fields a newer writer adds are kept and covered by id and sig. Integers
// are at most 2^53-1.
package journal
