package api

import (
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/protocol"
)

// InfoFile is written by a running node inside $TERN_HOME (0600): how
// commands reach it (Info).
const InfoFile = "node.json"

// Info is node.json: where a running node's API is and who it is.
type Info struct {
	API    string   `json:"api"`
	Token  string   `json:"token"`
	PeerID string   `json:"peer_id"`
	Addrs  []string `json:"addrs"`
}

// Peer is one paired machine: its peer ID, a name for people, and
// addresses to dial it at (optional: mDNS may find it).
type Peer struct {
	ID    string   `json:"id"`
	Name  string   `json:"name,omitempty"`
	Addrs []string `json:"addrs"`
}

// Transfer is a blob moving between this node and a peer right now, as
// `tern status` and the progress bars of `tern sync wait` show it.
type Transfer = protocol.Transfer

// PendingPeer is an unpaired machine that tried to connect (tern peer
// pending).
type PendingPeer struct {
	ID       string    `json:"id"`
	From     string    `json:"from"` // the address it connected from, as this node saw it
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	Attempts int       `json:"attempts"`
}

// Outcome is what a migration came to, as tern migrate reports it.
type Outcome struct {
	Outcome  string  `json:"outcome"` // committed, aborted or frozen
	Reason   string  `json:"reason,omitempty"`
	Epoch    uint64  `json:"epoch"`
	FrozenMS int64   `json:"frozen_ms"`
	Bytes    int64   `json:"bytes_sent"`
	Phases   []Phase `json:"phases"`
}

// Phase is one phase of a migration and how long it took.
type Phase struct {
	Name string `json:"name"`
	MS   int64  `json:"ms"`
}

// ParsePeerID reads a peer ID as tern prints them (12D3KooW…), failing with
// what one looks like and where to find it rather than the decoder's words.
func ParsePeerID(s string) (peer.ID, error) {
	id, err := peer.Decode(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a peer ID (one looks like 12D3KooW… followed by 44 letters and digits; tern id prints this machine's)", s)
	}
	return id, nil
}
