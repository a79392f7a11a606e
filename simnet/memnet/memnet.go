// Package memnet is an in-memory network of libp2p hosts for the node layer
// of the simulator. A Host implements what tern's node uses of host.Host:
// streams (open, read, write, close, reset, deadlines), connections with
// their notifications, and gossip topics; any other method panics.
//
// Nothing moves on its own. Every stream opened, every write, close and
// reset, and every gossip message becomes a Message the network holds
// until its driver delivers or loses it. A driver that runs inside a
// testing/synctest bubble, takes what was sent (Sent, in an order that does
// not depend on how the hosts' goroutines were scheduled), delivers one
// message and waits for every goroutine to block before the next, makes a
// run a function of its own choices.
//
// Time is a clock's (New): a read waits for its deadline on it, and so do
// the exchanges the protocol package times on a host's Clock. A driver
// that fires the clock's timers itself, one at a time, decides in what
// order the goroutines they wake run, as it does for deliveries.
//
// Failures are the connection's, as on a real network, where TCP and QUIC
// hide lost packets until the connection fails: losing a message closes
// the connection it was on, and every stream on it is reset at both ends.
// A cut link refuses connections until it is mended.
package memnet

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/internal/clock"
)

// Kind is what a Message does.
type Kind uint8

// The kinds of message.
const (
	Open        Kind = iota + 1 // a stream is opened for Proto
	Data                        // bytes written to a stream
	CloseWrite                  // the writer closed its side: the reader gets EOF
	Reset                       // the stream is reset
	Gossip                      // a gossip message on Topic
	StopSending                 // the reader stopped reading: the writer's writes fail, as on QUIC
)

func (k Kind) String() string {
	switch k {
	case Open:
		return "open"
	case Data:
		return "data"
	case CloseWrite:
		return "close"
	case Reset:
		return "reset"
	case Gossip:
		return "gossip"
	case StopSending:
		return "stop"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// A Message is one thing a host sent that the network holds until its
// driver delivers or loses it.
type Message struct {
	Kind     Kind
	From, To peer.ID
	Proto    protocol.ID // Open
	Topic    string      // Gossip
	Origin   peer.ID     // Gossip: the host that published it
	Data     []byte      // Data, Gossip

	pipe *pipe // the stream, for Open, Data, CloseWrite, Reset
	out  bool  // sent by the stream's opener
	seq  uint64
	hang bool // Reset: the connection closed; the end it goes to learns it
}

// Flow identifies the stream and direction a message travels on: the
// messages of one flow must be delivered in the order Sent returns them.
// Gossip messages have flow 0: each is on its own.
func (m *Message) Flow() uint64 {
	if m.pipe == nil {
		return 0
	}
	f := m.pipe.num << 1
	if m.out {
		f |= 1
	}
	return f
}

// Local reports whether m is news for its receiver alone: its stream's
// connection closed. Nothing crossed the network; the sender may be gone.
func (m *Message) Local() bool { return m.hang }

// Stream returns the number of the message's stream (0 for gossip),
// counted in the order Sent first returned them.
func (m *Message) Stream() uint64 {
	if m.pipe == nil {
		return 0
	}
	return m.pipe.num
}

// Sum is a digest of the message's content, for a trace.
func (m *Message) Sum() [32]byte {
	h := sha256.New()
	var b []byte
	b = append(b, byte(m.Kind))
	for _, s := range [...]string{string(m.From), string(m.To), string(m.Proto), m.Topic, string(m.Origin)} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Data)))
	h.Write(b)
	h.Write(m.Data)
	return [32]byte(h.Sum(nil))
}

func (m *Message) String() string {
	switch m.pipe {
	case nil:
		return fmt.Sprintf("%s %s→%s %s (%d bytes)", m.Kind, short(m.From), short(m.To), m.Topic, len(m.Data))
	default:
		return fmt.Sprintf("%s %s→%s stream %d %s (%d bytes)", m.Kind, short(m.From), short(m.To), m.pipe.num, m.pipe.proto, len(m.Data))
	}
}

func short(p peer.ID) string {
	s := p.String()
	if len(s) > 6 {
		return s[len(s)-6:]
	}
	return s
}

// ErrUnreachable is what dialing a peer that is down or behind a cut link
// returns.
var ErrUnreachable = errors.New("memnet: peer unreachable")

// Network is the in-memory network: its hosts, their connections, the
// links that are cut, and the messages sent and not yet delivered.
type Network struct {
	clock clock.Clock

	mu     sync.Mutex
	hosts  map[peer.ID]*Host
	conns  map[link]*conn
	cut    map[link]bool
	fresh  []*Message // sent since the last Sent, in the order goroutines sent them
	pipes  uint64     // streams numbered so far
	wake   chan struct{}
	closed bool
}

// link is an unordered pair of peers.
type link struct{ a, b peer.ID }

func linkOf(a, b peer.ID) link {
	if a > b {
		a, b = b, a
	}
	return link{a, b}
}

// conn is a connection between two hosts; its streams are reset when it
// closes.
type conn struct {
	l      link
	pipes  map[*pipe]struct{}
	closed bool
}

// New returns an empty network on c (nil: the real clock).
func New(c clock.Clock) *Network {
	if c == nil {
		c = clock.Real
	}
	return &Network{clock: c, hosts: map[peer.ID]*Host{}, conns: map[link]*conn{}, cut: map[link]bool{}, wake: make(chan struct{}, 1)}
}

// AddHost starts a host with key, listening at addr. A host of the same
// peer that was closed is replaced: a node that restarts.
func (n *Network) AddHost(key crypto.PrivKey, addr ma.Multiaddr) (*Host, error) {
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{net: n, id: id, addr: addr, ctx: ctx, cancel: cancel,
		handlers: map[protocol.ID]network.StreamHandler{}, topics: map[string]Validator{}, seen: map[[32]byte]bool{}}
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.hosts[id]; ok && !old.closed {
		cancel()
		return nil, fmt.Errorf("memnet: host %s is already running", id)
	}
	n.hosts[id] = h
	return h, nil
}

// Woken returns a channel that receives when a message was sent since the
// driver last took them: a driver waiting for time to pass selects on it.
func (n *Network) Woken() <-chan struct{} { return n.wake }

// Sent returns the messages sent since the last call, in an order that
// depends only on what was sent: by stream (new streams numbered by their
// ends, protocol and content), then by position in the stream; gossip
// last, by sender, receiver and content. Messages of one flow keep their
// order.
func (n *Network) Sent() []*Message {
	n.mu.Lock()
	defer n.mu.Unlock()
	fresh := n.fresh
	n.fresh = nil
	type newPipe struct {
		p   *pipe
		sum [32]byte
	}
	var news []newPipe
	contents := map[*pipe][]*Message{}
	for _, m := range fresh {
		if m.pipe != nil && m.pipe.num == 0 {
			if _, ok := contents[m.pipe]; !ok {
				news = append(news, newPipe{p: m.pipe})
			}
			contents[m.pipe] = append(contents[m.pipe], m)
		}
	}
	for i := range news {
		h := sha256.New()
		for _, m := range contents[news[i].p] {
			s := m.Sum()
			h.Write(s[:])
		}
		news[i].sum = [32]byte(h.Sum(nil))
	}
	slices.SortFunc(news, func(x, y newPipe) int {
		return cmp.Or(cmp.Compare(x.p.opener, y.p.opener), cmp.Compare(x.p.acceptor, y.p.acceptor),
			cmp.Compare(x.p.proto, y.p.proto), slices.Compare(x.sum[:], y.sum[:]))
	})
	for _, np := range news {
		n.pipes++
		np.p.num = n.pipes
	}
	sums := map[*Message][32]byte{}
	for _, m := range fresh {
		if m.pipe == nil {
			sums[m] = m.Sum()
		}
	}
	slices.SortStableFunc(fresh, func(x, y *Message) int {
		switch {
		case x.pipe != nil && y.pipe != nil:
			return cmp.Or(cmp.Compare(x.pipe.num, y.pipe.num), cmp.Compare(x.Flow(), y.Flow()), cmp.Compare(x.seq, y.seq))
		case x.pipe != nil:
			return -1
		case y.pipe != nil:
			return 1
		}
		sx, sy := sums[x], sums[y]
		return cmp.Or(cmp.Compare(x.From, y.From), cmp.Compare(x.To, y.To), slices.Compare(sx[:], sy[:]))
	})
	return fresh
}

// send records m as sent. n.mu held.
func (n *Network) send(m *Message) {
	n.fresh = append(n.fresh, m)
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Deliver hands m to its receiver: a new stream to the handler of its
// protocol (in a new goroutine), bytes, EOF or a reset to the stream's
// reader, a gossip message to the topic's validator (in a new goroutine).
// A message whose connection closed meanwhile is dropped: its stream was
// reset then.
func (n *Network) Deliver(m *Message) {
	if m.Kind == Gossip {
		n.deliverGossip(m)
		return
	}
	n.mu.Lock()
	p := m.pipe
	to := p.end(!m.out)
	if m.hang {
		n.mu.Unlock()
		to.hangUp(network.ErrReset)
		return
	}
	if p.conn.closed || p.dead {
		n.mu.Unlock()
		return
	}
	switch m.Kind {
	case Open:
		h := n.hosts[m.To]
		var handler network.StreamHandler
		if h != nil && !h.closed {
			handler = h.handlers[m.Proto]
		}
		if handler == nil {
			// Protocol negotiation fails: the opener sees a reset.
			p.dead = true
			from := p.end(m.out)
			n.mu.Unlock()
			from.hangUp(network.ErrReset)
			return
		}
		n.mu.Unlock()
		go handler(to)
		return
	case Data:
		n.mu.Unlock()
		to.receive(m.Data, false)
	case CloseWrite:
		n.mu.Unlock()
		to.receive(nil, true)
	case Reset:
		p.dead = true
		n.mu.Unlock()
		to.hangUp(network.ErrReset)
	case StopSending:
		n.mu.Unlock()
		to.stop()
	}
}

// Lose drops m as a failing connection would: the connection it was on
// closes, and every stream on it is reset at both ends (each end learns it
// from a Reset message of its own, so that the goroutines reading them
// wake one delivery at a time). A lost gossip message is just gone; a
// reset is not lost (the connection is going down anyway).
func (n *Network) Lose(m *Message) {
	switch m.Kind {
	case Gossip:
		return
	case Reset:
		n.Deliver(m)
		return
	}
	n.mu.Lock()
	c := m.pipe.conn
	n.mu.Unlock()
	n.closeConn(c, "")
}

// Cut closes the connection between a and b, if any, and refuses new ones
// until Mend.
func (n *Network) Cut(a, b peer.ID) {
	n.mu.Lock()
	l := linkOf(a, b)
	n.cut[l] = true
	c := n.conns[l]
	n.mu.Unlock()
	if c != nil {
		n.closeConn(c, "")
	}
}

// Mend lets a and b connect again (they do when one dials the other).
func (n *Network) Mend(a, b peer.ID) {
	n.mu.Lock()
	delete(n.cut, linkOf(a, b))
	n.mu.Unlock()
}

// Connect connects a and b, as a dial from a would; it fails if either is
// down or the link is cut.
func (n *Network) Connect(a, b peer.ID) error {
	_, err := n.connect(a, b)
	return err
}

// connect returns the connection between a and b, dialing it (and telling
// both hosts' notifiees) if there is none.
func (n *Network) connect(a, b peer.ID) (*conn, error) {
	if a == b {
		return nil, fmt.Errorf("memnet: %s dials itself", a)
	}
	n.mu.Lock()
	l := linkOf(a, b)
	if c := n.conns[l]; c != nil {
		n.mu.Unlock()
		return c, nil
	}
	ha, hb := n.hosts[a], n.hosts[b]
	if ha == nil || hb == nil || ha.closed || hb.closed || n.cut[l] {
		n.mu.Unlock()
		return nil, fmt.Errorf("dial %s: %w", b, ErrUnreachable)
	}
	c := &conn{l: l, pipes: map[*pipe]struct{}{}}
	n.conns[l] = c
	na, nb := slices.Clone(ha.notifiees), slices.Clone(hb.notifiees)
	n.mu.Unlock()
	for _, f := range na {
		f.Connected(ha.Network(), connView{local: a, remote: b})
	}
	for _, f := range nb {
		f.Connected(hb.Network(), connView{local: b, remote: a})
	}
	return c, nil
}

// closeConn closes c: every stream on it is reset at both ends. The ends
// of host now learn it at once, the others by a Reset message each.
func (n *Network) closeConn(c *conn, now peer.ID) {
	n.mu.Lock()
	if c.closed {
		n.mu.Unlock()
		return
	}
	c.closed = true
	if n.conns[c.l] == c {
		delete(n.conns, c.l)
	}
	var hung []*stream
	for p := range c.pipes {
		p.dead = true
		for _, out := range []bool{true, false} {
			end := p.end(out)
			if end.local == now {
				hung = append(hung, end)
				continue
			}
			p.sent[btoi(!out)]++
			n.send(&Message{Kind: Reset, From: end.remote, To: end.local, pipe: p, out: !out, seq: p.sent[btoi(!out)], hang: true})
		}
	}
	n.mu.Unlock()
	for _, end := range hung {
		end.hangUp(network.ErrReset)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Connected reports whether a and b are connected.
func (n *Network) Connected(a, b peer.ID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conns[linkOf(a, b)] != nil
}
