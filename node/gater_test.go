package node

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
)

func realHost(t *testing.T, opts ...libp2p.Option) host.Host {
	t.Helper()
	opts = append([]libp2p.Option{libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay()}, opts...)
	h, err := libp2p.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestOnlyPairedPeersGetIn(t *testing.T) {
	peers, err := LoadPeers(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	paired, stranger := realHost(t), realHost(t)
	if err := peers.Add(Peer{ID: paired.ID().String(), Name: "desktop"}); err != nil {
		t.Fatal(err)
	}
	home := realHost(t, libp2p.ConnectionGater(&gater{peers: peers, log: slog.New(slog.DiscardHandler)}))
	const proto = "/tern/sync/1.0.0"
	home.SetStreamHandler(proto, func(s network.Stream) { s.Write([]byte("ok")); s.Close() })
	info := peer.AddrInfo{ID: home.ID(), Addrs: home.Addrs()}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := paired.Connect(ctx, info); err != nil {
		t.Fatalf("a paired peer could not connect: %v", err)
	}
	s, err := paired.NewStream(ctx, home.ID(), proto)
	if err != nil {
		t.Fatalf("a paired peer could not open a tern protocol: %v", err)
	}
	s.Close()

	if err := stranger.Connect(ctx, info); err == nil {
		// The handshake may complete on the dialer's side before home drops
		// the connection; no stream may get through either way.
		if _, err := stranger.NewStream(ctx, home.ID(), proto); err == nil {
			t.Fatal("an unpaired peer opened a tern protocol")
		}
	}
	if home.Network().Connectedness(stranger.ID()) == network.Connected {
		t.Fatal("home kept a connection from an unpaired peer")
	}
	// home refuses to dial the stranger too.
	stranger.Peerstore().AddAddrs(home.ID(), home.Addrs(), time.Minute)
	if err := home.Connect(ctx, peer.AddrInfo{ID: stranger.ID(), Addrs: stranger.Addrs()}); err == nil {
		t.Fatal("home dialed an unpaired peer")
	}

	// Unpairing takes effect at once for new connections.
	if ok, err := peers.Remove(paired.ID().String()); !ok || err != nil {
		t.Fatalf("remove: %v %v", ok, err)
	}
	paired.Network().ClosePeer(home.ID())
	if err := paired.Connect(ctx, info); err == nil {
		if _, err := paired.NewStream(ctx, home.ID(), proto); err == nil {
			t.Fatal("an unpaired (removed) peer still opened a stream")
		}
	}
}

func TestThePeerListSurvivesARestartAndRefusesBadEntries(t *testing.T) {
	home := t.TempDir()
	p, _ := LoadPeers(home)
	h := realHost(t)
	if err := p.Add(Peer{ID: h.ID().String(), Name: "laptop", Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(Peer{ID: "not-a-peer"}); err == nil {
		t.Fatal("a bad peer ID was accepted")
	}
	if err := p.Add(Peer{ID: h.ID().String(), Addrs: []string{"127.0.0.1:4001"}}); err == nil {
		t.Fatal("a bad address was accepted")
	}
	again, err := LoadPeers(home)
	if err != nil {
		t.Fatal(err)
	}
	list := again.List()
	if len(list) != 1 || list[0].Name != "laptop" || !again.Allowed(h.ID()) {
		t.Fatalf("after reload: %+v", list)
	}
}

// An unpaired peer that keeps trying is logged once, with the command that
// pairs it, and listed as pending until it is paired.
func TestAnUnpairedPeerIsLoggedOnceAndListedUntilPaired(t *testing.T) {
	peers, err := LoadPeers(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	g := &gater{peers: peers, log: slog.New(slog.NewTextHandler(&log, nil))}
	home := realHost(t, libp2p.ConnectionGater(g))
	stranger := realHost(t)
	info := peer.AddrInfo{ID: home.ID(), Addrs: home.Addrs()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		stranger.Connect(ctx, info)
		stranger.Network().ClosePeer(home.ID())
		if sw, ok := stranger.Network().(*swarm.Swarm); ok {
			sw.Backoff().Clear(home.ID()) // dial again at once
		}
	}
	pending := g.Pending()
	if len(pending) != 1 || pending[0].ID != stranger.ID().String() || pending[0].Attempts < 2 {
		t.Fatalf("pending %+v", pending)
	}
	if n := strings.Count(log.String(), "an unpaired machine tried to connect"); n != 1 || !strings.Contains(log.String(), "tern peer add "+stranger.ID().String()) {
		t.Fatalf("logged %d times:\n%s", n, log.String())
	}
	peers.Add(Peer{ID: stranger.ID().String()})
	if pending := g.Pending(); len(pending) != 0 {
		t.Fatalf("a paired peer is still pending: %+v", pending)
	}
}

// tern status says why a paired peer is not connected.
func TestStatusSaysWhyAPairedPeerIsNotConnected(t *testing.T) {
	n := startNode(t, t.TempDir())
	far, gone := realHost(t), realHost(t)
	n.peers.Add(Peer{ID: far.ID().String(), Name: "far"})
	dead := gone.Addrs()[0].String()
	n.peers.Add(Peer{ID: gone.ID().String(), Name: "gone", Addrs: []string{dead}})
	gone.Close()
	why := func(name string) string {
		st, err := n.Status()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Peers {
			if p.Name == name {
				return p.Why
			}
		}
		return ""
	}
	if w := why("far"); !strings.Contains(w, "never seen: no address to dial") {
		t.Fatalf("a peer without address: %q", w)
	}
	eventually(t, "a dial of the gone peer fails", func() bool { return strings.Contains(why("gone"), "the last dial failed") })
}
