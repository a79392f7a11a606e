package node

import (
	"context"
	"io"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/protocol"
)

// serveTurnRelay answers api.TurnRelayID streams from paired peers (the
// gater lets no one else connect): the API streams the turn they ask for.
func (n *Node) serveTurnRelay(s network.Stream) {
	ctx, cancel := context.WithCancel(n.ctx)
	defer cancel()
	if !n.apiSrv.ServeRelay(ctx, s) {
		s.Reset()
		return
	}
	protocol.Finish(s) // resets the stream if the follower is gone
}

// OpenRelay opens a turn relay stream to the peer to, for the API to
// follow a turn that moved there; done(ok) finishes it (ok) or resets it.
// The stream is reset when ctx ends.
func (n *Node) OpenRelay(ctx context.Context, to peer.ID) (io.ReadWriter, func(ok bool), error) {
	s, err := n.host.NewStream(network.WithAllowLimitedConn(ctx, "turn relay"), to, api.TurnRelayID)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	return s, func(ok bool) {
		stop()
		if ok {
			protocol.Finish(s)
		} else {
			s.Reset()
		}
	}, nil
}
