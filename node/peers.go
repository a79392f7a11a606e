package node

import (
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/internal/allowlist"
)

// PeersFile is the allowlist of paired peers inside $TERN_HOME.
const PeersFile = allowlist.File

// Peer is one paired machine (api.Peer: the API shows it as peers.json
// holds it).
type Peer = api.Peer

// Peers is the allowlist (package allowlist).
type Peers = allowlist.Peers

// LoadPeers reads home's allowlist; a missing file is an empty list.
func LoadPeers(home string) (*Peers, error) { return allowlist.Load(home) }

// ParsePeerID parses a peer ID, with an error that says what one looks
// like (api.ParsePeerID).
func ParsePeerID(s string) (peer.ID, error) { return api.ParsePeerID(s) }
