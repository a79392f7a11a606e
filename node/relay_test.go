package node

import (
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	ma "github.com/multiformats/go-multiaddr"
)

func TestTwoPeersWithoutARouteSyncThroughAPairedRelay(t *testing.T) {
	start := func(cfg Config) *Node {
		cfg.Listen, cfg.NoMDNS, cfg.SyncInterval = []string{"/ip4/127.0.0.1/tcp/0"}, true, 100*time.Millisecond
		n, err := Start(t.TempDir(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	home := start(Config{RelayService: true}) // the always-on machine
	laptop, desktop := start(Config{NAT: true}), start(Config{NAT: true})
	pair(t, home, laptop)
	pair(t, home, desktop)
	// laptop and desktop are paired, but neither knows an address of the other.
	for _, p := range [][2]*Node{{laptop, desktop}, {desktop, laptop}} {
		if err := p[0].peers.Add(Peer{ID: p[1].info.PeerID}); err != nil {
			t.Fatal(err)
		}
	}
	homeInfo := peer.AddrInfo{ID: home.host.ID(), Addrs: home.host.Addrs()}
	if _, err := client.Reserve(t.Context(), desktop.host, homeInfo); err != nil {
		t.Fatalf("desktop could not reserve a slot on the home relay: %v", err)
	}
	agent := sharedCapsule(t, desktop)
	appendN(t, desktop, agent, 3)

	circuit := ma.StringCast(home.host.Addrs()[0].String() + "/p2p/" + home.info.PeerID + "/p2p-circuit")
	if err := laptop.host.Connect(t.Context(), peer.AddrInfo{ID: desktop.host.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
		t.Fatalf("laptop could not reach desktop through the relay: %v", err)
	}
	conns := laptop.host.Network().ConnsToPeer(desktop.host.ID())
	if len(conns) == 0 || !strings.Contains(conns[0].RemoteMultiaddr().String(), "p2p-circuit") {
		t.Fatalf("the connection did not go through the relay: %v", conns)
	}
	converged(t, agent, 3, laptop, desktop)
}
