package node

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// On a new connection to a peer, an older one is pinged on its own: one
// that answers stays, one that does not (here the peer serves no ping, as
// a killed one does not) is closed.
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
		a.host.RemoveStreamHandler(ping.ID)
		if closed := b.closeSilent(conns); len(closed) != 1 || !conns[0].IsClosed() {
			t.Fatal("b kept a connection to a that does not answer its pings")
		}
	})
}
