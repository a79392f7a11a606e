// Package syncpolicy decides when a tern node syncs its capsules with its
// paired peers, and with whom: the anti-entropy rounds, which side of a new
// connection leads them, how requests for rounds coalesce, which peers to
// dial and when, and which capsules a round may skip. It decides; the node
// does the I/O (dials, the capsule list, sync exchanges, blob fetches).
//
// # Shape
//
// A [Machine] is the policy of one node, in the shape of fencing's: inputs
// are calls ([Machine.Tick] for one unit of time, [Machine.Connected] and
// [Machine.Disconnected] as connections come and go, [Machine.DialAll] and
// [Machine.SetPeers] as the node starts and its pairings change,
// [Machine.Dialed],
// [Machine.RoundDone], [Machine.Exchanged], [Machine.ExchangeStarted] and
// [Machine.ExchangeEnded] as the node's work ends or a peer's begins,
// [Machine.Imported] and [Machine.Differs] for what the node learnt),
// outputs accumulate in a [Ready] (rounds to start, peers to dial, whether
// to close idle capsules) that the caller takes, acknowledges with
// [Machine.Advance] and carries out. Within a round, [Machine.Decide] says
// what to do with each capsule.
//
// The rules, as the node kept them before this package existed:
//
//   - Anti-entropy: every Config.Interval ticks, a round that exchanges the
//     capsules that changed with every connected peer, a dial of every
//     dialable peer not connected, and idle capsules closed. The same
//     dials at once as the node starts and when a pairing changes
//     ([Machine.DialAll]).
//   - On a connection, the side whose ID is lower ([Leads]) runs a round of
//     everything; the other only fetches the blobs it wants. One exchange
//     per capsule brings both up to date; two would send the events twice.
//     What was recorded of that peer is forgotten: it may have restarted
//     from another state.
//   - At most one round runs per peer; rounds asked for meanwhile run once
//     more when it ends, at the widest scope asked.
//   - A round of changed capsules skips a capsule when the peer is known to
//     hold everything this node holds of it (the vector both held at the
//     end of their last exchange is still this node's), and when an
//     exchange of it that the peer started is running.
//   - An import runs a round of everything with every connected peer; so
//     does a sign that a peer holds what this node lacks, or lacks what it
//     holds ([Machine.Differs]).
//   - A failed dial is remembered, for the status report, until the peer
//     connects; it does not change when the peer is dialed next.
//
// Vectors are the caller's type V, compared with the function given to
// [New]: the node uses journal.Vector, the simulator a vector of its own.
//
// # What it must never do
//
// The package never does I/O, never starts a goroutine, never reads a clock
// and never draws a random number: time arrives as ticks. The same inputs
// give the same Readies. It never asks for a round with a peer that is not
// paired, never runs two rounds with one peer at once, and never drops a
// round asked for while one runs. A Machine is not safe for concurrent use.
package syncpolicy
