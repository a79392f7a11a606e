package node

import (
	"slices"

	evbus "github.com/libp2p/go-libp2p/core/event"
	ma "github.com/multiformats/go-multiaddr"
)

// followAddrs keeps the addresses stored for the paired peers as the
// peers say they listen (identify), for as long as the node runs: a peer
// restarted on another port is dialed there next time (tern peer list,
// the dials after a restart). It stops when the node does.
func (n *Node) followAddrs(sub evbus.Subscription) {
	defer sub.Close()
	for {
		select {
		case <-n.ctx.Done():
			return
		case e, ok := <-sub.Out():
			if !ok {
				return
			}
			id := e.(evbus.EvtPeerIdentificationCompleted)
			for _, p := range n.peers.List() {
				if p.ID != id.Peer.String() {
					continue
				}
				if next, changed := followPorts(p.Addrs, id.ListenAddrs); changed {
					q := p
					q.Addrs = next
					if err := n.peers.Add(q); err != nil {
						n.log.Warn("could not keep a paired peer's new address", "peer", n.peerName(id.Peer), "err", err)
					} else {
						n.log.Info("a paired peer listens on another port now: its address is updated", "peer", n.peerName(id.Peer), "addrs", next)
					}
				}
			}
		}
	}
}

// followPorts updates stored addresses (multiaddrs, without /p2p) to the
// ports a peer says it listens on: a stored address whose host and
// transport the peer still listens on, at another port, takes that port.
// Others stay as they are. changed reports whether any did.
func followPorts(stored []string, listen []ma.Multiaddr) (next []string, changed bool) {
	next = slices.Clone(stored)
	for i, s := range stored {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			continue
		}
		host, transport, port, ok := hostPort(a)
		if !ok {
			continue
		}
		for _, l := range listen {
			h, t, p, ok := hostPort(l)
			if ok && h == host && t == transport && p != port && sameShape(a, l) {
				next[i], changed = l.String(), true
				break
			}
		}
	}
	return next, changed
}

// hostPort returns an address's IP (or DNS name), its transport (tcp or
// udp) and its port.
func hostPort(a ma.Multiaddr) (host, transport, port string, ok bool) {
	for _, c := range a {
		switch c.Protocol().Code {
		case ma.P_IP4, ma.P_IP6, ma.P_DNS, ma.P_DNS4, ma.P_DNS6:
			host = c.Value()
		case ma.P_TCP, ma.P_UDP:
			transport, port = c.Protocol().Name, c.Value()
		}
	}
	return host, transport, port, host != "" && port != ""
}

// sameShape reports whether two addresses stack the same protocols (so a
// QUIC address is not replaced by a WebTransport one on the same port).
func sameShape(a, b ma.Multiaddr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Protocol().Code != b[i].Protocol().Code {
			return false
		}
	}
	return true
}
