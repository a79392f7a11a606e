package node

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// transport is what a test node listens on. Nodes listen on TCP and QUIC by
// default, and libp2p prefers QUIC between two machines; a test node
// listens on one only, so that the one named is the one used.
type transport struct{ name, listen string }

var (
	tcp  = transport{"tcp", "/ip4/127.0.0.1/tcp/0"}
	quic = transport{"quic", "/ip4/127.0.0.1/udp/0/quic-v1"}
)

// overBoth runs test once over TCP and once over QUIC.
func overBoth(t *testing.T, test func(t *testing.T, tr transport)) {
	for _, tr := range []transport{tcp, quic} {
		t.Run(tr.name, func(t *testing.T) { test(t, tr) })
	}
}

// start runs a node on tr with home, whose anti-entropy runs every 100 ms.
func (tr transport) start(t testing.TB, home string) *Node {
	t.Helper()
	return tr.startWith(t, home, Config{SyncInterval: 100 * time.Millisecond})
}

// startAt runs a node on tr with home and fast fencing ticks, whose
// anti-entropy waits for an hour (it runs on connect).
func (tr transport) startAt(t testing.TB, home string) *Node {
	t.Helper()
	return tr.startWith(t, home, Config{SyncInterval: time.Hour, Tick: 20 * time.Millisecond})
}

// startWith runs a node on tr with home and cfg, without LAN discovery,
// logging to log (nil: testLog), and checks that it listens on tr only.
func (tr transport) startWith(t testing.TB, home string, cfg Config, log ...*slog.Logger) *Node {
	t.Helper()
	cfg.Listen, cfg.NoMDNS = []string{tr.listen}, true
	l := testLog(home)
	if len(log) > 0 {
		l = log[0]
	}
	n, err := Start(home, cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	for _, a := range n.host.Addrs() {
		if tr == tcp && !strings.Contains(a.String(), "/tcp/") || tr == quic && !strings.Contains(a.String(), "/quic-v1") {
			t.Fatalf("a node started on %s listens on %s", tr.name, a)
		}
	}
	return n
}

// startEvery runs a node on tr with home, whose anti-entropy runs every
// interval.
func (tr transport) startEvery(t testing.TB, home string, interval time.Duration) *Node {
	t.Helper()
	return tr.startWith(t, home, Config{SyncInterval: interval})
}
