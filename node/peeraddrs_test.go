package node

import (
	"context"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

func TestFollowPortsTakesTheNewPortOfTheSameHost(t *testing.T) {
	addrs := func(ss ...string) []ma.Multiaddr {
		var out []ma.Multiaddr
		for _, s := range ss {
			out = append(out, ma.StringCast(s))
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		stored  []string
		listen  []ma.Multiaddr
		want    []string
		changed bool
	}{
		{"the same port", []string{"/ip4/192.168.1.20/tcp/4001"}, addrs("/ip4/192.168.1.20/tcp/4001", "/ip4/127.0.0.1/tcp/4001"),
			[]string{"/ip4/192.168.1.20/tcp/4001"}, false},
		{"another port", []string{"/ip4/192.168.1.20/tcp/4001", "/ip4/192.168.1.20/udp/4001/quic-v1"},
			addrs("/ip4/127.0.0.1/tcp/4002", "/ip4/192.168.1.20/tcp/4002", "/ip4/192.168.1.20/udp/4002/quic-v1", "/ip4/192.168.1.20/udp/4002/quic-v1/webtransport"),
			[]string{"/ip4/192.168.1.20/tcp/4002", "/ip4/192.168.1.20/udp/4002/quic-v1"}, true},
		{"a host it no longer listens on", []string{"/ip4/10.0.0.5/tcp/4001"}, addrs("/ip4/192.168.1.20/tcp/4002"),
			[]string{"/ip4/10.0.0.5/tcp/4001"}, false},
		{"a name", []string{"/dns4/desktop.lan/tcp/4001"}, addrs("/ip4/192.168.1.20/tcp/4002"), []string{"/dns4/desktop.lan/tcp/4001"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := followPorts(tc.stored, tc.listen)
			if !slices.Equal(got, tc.want) || changed != tc.changed {
				t.Fatalf("followPorts = %v, %v; want %v, %v", got, changed, tc.want, tc.changed)
			}
		})
	}
}

// A paired peer that restarts on another port is dialed there: the node
// keeps the address the peer says it listens on when it connects.
func TestAPairedPeerOnANewPortIsKeptThere(t *testing.T) {
	a, b := tcp.start(t, t.TempDir()), tcp.start(t, t.TempDir())
	stale := "/ip4/127.0.0.1/tcp/9" // the port b listened on before a restart
	if err := a.peers.Add(Peer{ID: b.info.PeerID, Name: "desktop", Addrs: []string{stale}}); err != nil {
		t.Fatal(err)
	}
	if err := b.peers.Add(Peer{ID: a.info.PeerID, Name: "laptop", Addrs: hostAddrs(a)}); err != nil {
		t.Fatal(err)
	}
	if err := b.host.Connect(context.Background(), peer.AddrInfo{ID: a.host.ID(), Addrs: a.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a keeps b's new port", func() bool {
		for _, p := range a.peers.List() {
			if p.ID == b.info.PeerID {
				return len(p.Addrs) == 1 && p.Addrs[0] != stale && slices.Contains(hostAddrs(b), p.Addrs[0])
			}
		}
		return false
	})
}
