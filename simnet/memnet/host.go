package memnet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/internal/clock"
)

// Host is one host on the network: a host.Host as far as tern's node uses
// one, and gossip topics (Join).
type Host struct {
	host.Host // what tern does not use; calling it panics
	net       *Network
	id        peer.ID
	addr      ma.Multiaddr
	ctx       context.Context // done when the host closes
	cancel    context.CancelFunc

	// Guarded by net.mu.
	handlers  map[protocol.ID]network.StreamHandler
	notifiees []network.Notifiee
	topics    map[string]Validator
	seen      map[[32]byte]bool // gossip messages seen, by content
	ends      []*stream         // every stream end it ever had
	closed    bool
}

var _ host.Host = (*Host)(nil)

// ID returns the host's peer ID.
func (h *Host) ID() peer.ID { return h.id }

// Addrs returns the one address the host listens at.
func (h *Host) Addrs() []ma.Multiaddr { return []ma.Multiaddr{h.addr} }

// SetStreamHandler serves pid with handler, each stream in its own
// goroutine.
func (h *Host) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	h.net.mu.Lock()
	h.handlers[pid] = handler
	h.net.mu.Unlock()
}

// RemoveStreamHandler stops serving pid.
func (h *Host) RemoveStreamHandler(pid protocol.ID) {
	h.net.mu.Lock()
	delete(h.handlers, pid)
	h.net.mu.Unlock()
}

// NewStream opens a stream to p for the first of pids, connecting first if
// need be. It returns at once; if p does not serve the protocol, the
// stream is reset when the open is delivered.
func (h *Host) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	if len(pids) == 0 {
		return nil, errors.New("memnet: NewStream without a protocol")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := h.net.connect(h.id, p)
	if err != nil {
		return nil, err
	}
	n := h.net
	n.mu.Lock()
	if c.closed || h.closed {
		n.mu.Unlock()
		return nil, fmt.Errorf("open a stream to %s: %w", p, network.ErrReset)
	}
	pp := &pipe{opener: h.id, acceptor: p, proto: pids[0], conn: c}
	pp.a = newStream(n, pp, true, h.id, p)
	pp.b = newStream(n, pp, false, p, h.id)
	c.pipes[pp] = struct{}{}
	h.ends = append(h.ends, pp.a)
	if q := n.hosts[p]; q != nil {
		q.ends = append(q.ends, pp.b)
	}
	pp.sent[1]++
	n.send(&Message{Kind: Open, From: h.id, To: p, Proto: pids[0], pipe: pp, out: true, seq: pp.sent[1]})
	n.mu.Unlock()
	return pp.a, nil
}

// Connect connects to ai.ID, if the link allows.
func (h *Host) Connect(_ context.Context, ai peer.AddrInfo) error {
	_, err := h.net.connect(h.id, ai.ID)
	return err
}

// Close takes the host off the network, as a process that dies: every
// connection closes and every stream on it is reset.
func (h *Host) Close() error {
	n := h.net
	n.mu.Lock()
	if h.closed {
		n.mu.Unlock()
		return nil
	}
	h.closed = true
	var conns []*conn
	for l, c := range n.conns {
		if l.a == h.id || l.b == h.id {
			conns = append(conns, c)
		}
	}
	n.mu.Unlock()
	for _, c := range conns {
		n.closeConn(c, h.id)
	}
	// Streams whose connection closed earlier may not have heard yet.
	n.mu.Lock()
	ends := h.ends
	h.ends = nil
	n.mu.Unlock()
	for _, s := range ends {
		s.hangUp(network.ErrReset)
	}
	h.cancel()
	return nil
}

// Clock is the network's clock, which its streams' read deadlines run
// on: the protocol package times its exchanges on a host's Clock.
func (h *Host) Clock() clock.Clock { return h.net.clock }

// Network returns the host's view of the network.
func (h *Host) Network() network.Network { return hostNetwork{h: h} }

// hostNetwork is a host's network.Network: its connections and their
// notifications.
type hostNetwork struct {
	network.Network // what tern does not use; calling it panics
	h               *Host
}

func (v hostNetwork) LocalPeer() peer.ID { return v.h.id }

// Peers returns the peers the host is connected to, in order.
func (v hostNetwork) Peers() []peer.ID {
	n := v.h.net
	n.mu.Lock()
	defer n.mu.Unlock()
	var ps []peer.ID
	for l := range n.conns {
		switch v.h.id {
		case l.a:
			ps = append(ps, l.b)
		case l.b:
			ps = append(ps, l.a)
		}
	}
	slices.Sort(ps)
	return ps
}

func (v hostNetwork) Connectedness(p peer.ID) network.Connectedness {
	if v.h.net.Connected(v.h.id, p) {
		return network.Connected
	}
	return network.NotConnected
}

// ClosePeer closes the connection to p.
func (v hostNetwork) ClosePeer(p peer.ID) error {
	n := v.h.net
	n.mu.Lock()
	c := n.conns[linkOf(v.h.id, p)]
	n.mu.Unlock()
	if c != nil {
		n.closeConn(c, "")
	}
	return nil
}

// Notify tells f of every new connection (Connected only).
func (v hostNetwork) Notify(f network.Notifiee) {
	n := v.h.net
	n.mu.Lock()
	v.h.notifiees = append(v.h.notifiees, f)
	n.mu.Unlock()
}

func (v hostNetwork) StopNotify(f network.Notifiee) {
	n := v.h.net
	n.mu.Lock()
	v.h.notifiees = slices.DeleteFunc(v.h.notifiees, func(g network.Notifiee) bool { return g == f })
	n.mu.Unlock()
}

// Validator decides what a host does with a gossip message on a topic it
// joined, as a GossipSub validator does: Accept forwards it to the host's
// other peers in the topic, Ignore and Reject do not. from is the peer that
// passed it on, origin the one that published it.
type Validator = func(ctx context.Context, from, origin peer.ID, data []byte) pubsub.ValidationResult

// Join takes part in topic: messages on it go to v, and publish sends data
// to every connected peer that joined it. Each host handles a message
// (by its content) once.
func (h *Host) Join(topic string, v Validator) (publish func(ctx context.Context, data []byte) error, err error) {
	n := h.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := h.topics[topic]; ok {
		return nil, fmt.Errorf("memnet: topic %s already joined", topic)
	}
	h.topics[topic] = v
	return func(ctx context.Context, data []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if h.closed {
			return errors.New("memnet: host closed")
		}
		h.seen[gossipSum(topic, h.id, data)] = true
		h.forward(topic, h.id, h.id, data)
		return nil
	}, nil
}

func gossipSum(topic string, origin peer.ID, data []byte) [32]byte {
	s := sha256.New()
	fmt.Fprintf(s, "%s|%s|", topic, origin)
	s.Write(data)
	return [32]byte(s.Sum(nil))
}

// forward sends a gossip message to every peer h is connected to that
// joined the topic, except from and origin. n.mu held.
func (h *Host) forward(topic string, from, origin peer.ID, data []byte) {
	n := h.net
	for l := range n.conns {
		var q peer.ID
		switch h.id {
		case l.a:
			q = l.b
		case l.b:
			q = l.a
		default:
			continue
		}
		if q == from || q == origin {
			continue
		}
		if hq := n.hosts[q]; hq == nil || hq.closed || hq.topics[topic] == nil {
			continue
		}
		n.send(&Message{Kind: Gossip, From: h.id, To: q, Topic: topic, Origin: origin, Data: data})
	}
}

// deliverGossip hands a gossip message to the receiver's validator in a
// new goroutine, unless the receiver has seen it, left, or is no longer
// connected to the sender; an accepted message goes on to its peers.
func (n *Network) deliverGossip(m *Message) {
	n.mu.Lock()
	h := n.hosts[m.To]
	if h == nil || h.closed || n.conns[linkOf(m.From, m.To)] == nil {
		n.mu.Unlock()
		return
	}
	v := h.topics[m.Topic]
	sum := gossipSum(m.Topic, m.Origin, m.Data)
	if v == nil || h.seen[sum] {
		n.mu.Unlock()
		return
	}
	h.seen[sum] = true
	n.mu.Unlock()
	go func() {
		if v(h.ctx, m.From, m.Origin, m.Data) != pubsub.ValidationAccept {
			return
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if !h.closed {
			h.forward(m.Topic, m.From, m.Origin, m.Data)
		}
	}()
}
