package node

import (
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/api"
)

// gater admits only paired peers: it refuses to dial anyone else and, once
// a handshake has authenticated an inbound peer, drops it unless paired.
// Refusals are logged.
type gater struct {
	peers *Peers
	log   *slog.Logger

	mu      sync.Mutex
	pending map[peer.ID]*PendingPeer // unpaired peers that tried to connect, the latest maxPending
}

// PendingPeer is an unpaired machine that tried to connect
// (api.PendingPeer).
type PendingPeer = api.PendingPeer

// maxPending bounds the unpaired peers remembered.
const maxPending = 64

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
		g.refused(p, addrs.RemoteMultiaddr())
	}
	return ok
}

// refused remembers an unpaired peer's attempt, and logs the first one of
// each peer, saying how to pair it.
func (g *gater) refused(p peer.ID, from ma.Multiaddr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if pp := g.pending[p]; pp != nil {
		pp.Last, pp.From = now, from.String()
		pp.Attempts++
		return
	}
	if g.pending == nil {
		g.pending = map[peer.ID]*PendingPeer{}
	}
	if len(g.pending) >= maxPending {
		var oldest peer.ID
		for id, pp := range g.pending {
			if oldest == "" || pp.Last.Before(g.pending[oldest].Last) {
				oldest = id
			}
		}
		delete(g.pending, oldest)
	}
	g.pending[p] = &PendingPeer{ID: p.String(), From: from.String(), First: now, Last: now, Attempts: 1}
	g.log.Info("an unpaired machine tried to connect and was refused; to pair it: tern peer add "+p.String()+" --name NAME (tern peer pending lists such machines)",
		"peer", p, "from", from)
}

// Pending returns the unpaired peers that tried to connect, newest first,
// leaving out those paired since.
func (g *gater) Pending() []PendingPeer {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := []PendingPeer{}
	for id, pp := range g.pending {
		if g.peers.Allowed(id) {
			delete(g.pending, id)
			continue
		}
		out = append(out, *pp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	return out
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
