package node

import (
	"log/slog"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// gater admits only paired peers: it refuses to dial anyone else and, once
// a handshake has authenticated an inbound peer, drops it unless paired.
// Refusals are logged.
type gater struct {
	peers *Peers
	log   *slog.Logger
}

var _ connmgr.ConnectionGater = (*gater)(nil)

func (g *gater) InterceptPeerDial(p peer.ID) bool { return g.check("dial", p) }

func (g *gater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return g.check("dial", p) }

// InterceptAccept cannot know the peer yet (no handshake); InterceptSecured
// decides.
func (g *gater) InterceptAccept(network.ConnMultiaddrs) bool { return true }

func (g *gater) InterceptSecured(dir network.Direction, p peer.ID, addrs network.ConnMultiaddrs) bool {
	if dir == network.DirOutbound {
		return g.check("dial", p)
	}
	ok := g.peers.Allowed(p)
	if !ok {
		g.log.Warn("refused a connection from an unpaired peer", "peer", p, "from", addrs.RemoteMultiaddr())
	}
	return ok
}

func (g *gater) InterceptUpgraded(c network.Conn) (bool, control.DisconnectReason) {
	return g.peers.Allowed(c.RemotePeer()), 0
}

func (g *gater) check(what string, p peer.ID) bool {
	ok := g.peers.Allowed(p)
	if !ok {
		g.log.Debug("refused to "+what+" an unpaired peer", "peer", p)
	}
	return ok
}
