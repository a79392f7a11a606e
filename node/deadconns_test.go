package node

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// On a new connection to a peer, an older one is pinged on its own: one
// that answers stays (a reset of the ping by the peer is an answer), one
// that does not is closed.
func TestAnOlderConnectionThatDoesNotAnswerIsClosed(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.startEvery(t, t.TempDir(), time.Hour), tr.startEvery(t, t.TempDir(), time.Hour)
		connectAll(t, a, b)
		pa := a.host.ID()
		conns := b.host.Network().ConnsToPeer(pa)
		if len(conns) == 0 {
			t.Fatal("b has no connection to a")
		}
		if closed := b.closeSilent(conns); len(closed) != 0 || conns[0].IsClosed() {
			t.Fatal("b closed a connection to a that answers its pings")
		}
		// a takes the pings and never answers: a process stopped, or gone
		// behind a connection nothing has closed yet. (A reset is an
		// answer: a live peer resets pings over its limit.)
		silent := make(chan struct{})
		defer close(silent)
		a.host.SetStreamHandler(ping.ID, func(s network.Stream) { <-silent; s.Reset() })
		if closed := b.closeSilent(conns); len(closed) != 1 || !conns[0].IsClosed() {
			t.Fatal("b kept a connection to a that does not answer its pings")
		}
	})
}
