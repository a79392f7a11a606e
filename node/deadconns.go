package node

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	msmux "github.com/multiformats/go-multistream"
)

// A peer killed and started again reaches this node on a new connection
// while the old one still looks open: over QUIC nothing says it died until
// its idle timeout (30 s), and libp2p opens new streams on the connection
// with the most streams, which the old one, holding the streams the kill
// cut, often is. A fetch after the restart then waited up to half a minute
// on a connection to a process that no longer exists.

// pingWithin bounds the ping of an older connection.
const pingWithin = 2 * time.Second

// closeDeadConns, on a new connection to p, closes in the background each
// older connection to p that does not answer a ping (closeSilent). A live
// one (two nodes that dialed each other at once) answers and stays.
func (n *Node) closeDeadConns(p peer.ID, fresh network.Conn) {
	var older []network.Conn
	for _, c := range n.host.Network().ConnsToPeer(p) {
		if c != fresh && !c.IsClosed() {
			older = append(older, c)
		}
	}
	if len(older) > 0 {
		n.spawn(func() { n.closeSilent(older) })
	}
}

// closeSilent pings each of conns on its own, at once, and closes and
// returns those that do not answer within pingWithin.
func (n *Node) closeSilent(conns []network.Conn) []network.Conn {
	silent := make([]bool, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(n.ctx, pingWithin)
			defer cancel()
			if err := pingConn(ctx, c); err != nil && !answered(err) && n.ctx.Err() == nil {
				n.log.Info("closing a connection to a paired peer that no longer answers", "peer", n.peerName(c.RemotePeer()), "addr", c.RemoteMultiaddr(), "err", err)
				c.Close()
				silent[i] = true
			}
		})
	}
	wg.Wait()
	var closed []network.Conn
	for i, c := range conns {
		if silent[i] {
			closed = append(closed, c)
		}
	}
	return closed
}

// answered reports whether err is the peer's own answer: a stream it
// reset for a reason of its own (libp2p's ping service allows a peer few
// streams at once, and resets the rest as over its limit), which only a
// live connection carries.
func answered(err error) bool {
	var se *network.StreamError
	return errors.As(err, &se) && se.Remote && se.ErrorCode != network.StreamProtocolNegotiationFailed
}

// pingConn pings the peer over c only (libp2p's ping protocol, which every
// node serves).
func pingConn(ctx context.Context, c network.Conn) error {
	s, err := c.NewStream(ctx)
	if err != nil {
		return err
	}
	defer s.Reset()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if err := s.SetProtocol(ping.ID); err != nil {
		return err
	}
	if err := msmux.SelectProtoOrFail(ping.ID, s); err != nil {
		return err
	}
	var out, in [ping.PingSize]byte
	rand.Read(out[:])
	if _, err := s.Write(out[:]); err != nil {
		return err
	}
	if _, err := io.ReadFull(s, in[:]); err != nil {
		return err
	}
	if in != out {
		return errors.New("the ping came back changed")
	}
	return nil
}
