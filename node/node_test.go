package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/store"
)

// startNode runs a node on 127.0.0.1 with a fresh home.
func startNode(t testing.TB, home string) *Node {
	t.Helper()
	return startNodeEvery(t, home, 100*time.Millisecond)
}

// startNodeEvery starts a node on 127.0.0.1 whose anti-entropy runs every
// interval.
func startNodeEvery(t testing.TB, home string, interval time.Duration) *Node {
	t.Helper()
	return tcp.startWith(t, home, Config{SyncInterval: interval})
}

// pair makes a and b allow each other, with b's addresses known to a.
func pair(t *testing.T, a, b *Node) {
	t.Helper()
	if err := a.peers.Add(Peer{ID: b.info.PeerID, Name: "b", Addrs: hostAddrs(b)}); err != nil {
		t.Fatal(err)
	}
	if err := b.peers.Add(Peer{ID: a.info.PeerID, Name: "a", Addrs: hostAddrs(a)}); err != nil {
		t.Fatal(err)
	}
}

func hostAddrs(n *Node) []string {
	var out []string
	for _, a := range n.host.Addrs() {
		out = append(out, a.String())
	}
	return out
}

// sharedCapsule makes one capsule, created by the first node, and imports
// it into every node: into the first, which adds its paired peers to the
// members, then, as an export of the first's copy, into the others.
func sharedCapsule(t *testing.T, nodes ...*Node) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	c, err := capsule.New(dir, "shared", nodes[0].id)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, _, err := nodes[0].Import(dir); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[1:] {
		if _, err := nodes[0].AddMember(context.Background(), c.ID(), n.id.Machine()); err != nil {
			t.Fatal(err)
		}
	}
	tar := filepath.Join(t.TempDir(), "agent.tar")
	if err := nodes[0].store.ExportFile(c.ID(), tar); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[1:] {
		if _, _, err := n.Import(tar); err != nil {
			t.Fatal(err)
		}
	}
	return c.ID()
}

// withoutMembers leaves out the events that name an agent's members.
func withoutMembers(evs []*journal.Event) []*journal.Event {
	return slices.DeleteFunc(evs, func(e *journal.Event) bool {
		return e.Type == journal.MemberAddedType || e.Type == journal.MemberRemovedType
	})
}

func appendN(t *testing.T, n *Node, agent string, count int) {
	t.Helper()
	var drafts []journal.Draft
	for i := 0; i < count; i++ {
		body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": fmt.Sprint(n.info.PeerID[len(n.info.PeerID)-4:], " ", i)}}})
		drafts = append(drafts, journal.Draft{Type: "message", Session: "s", Body: body})
	}
	if _, err := n.store.Append(context.Background(), agent, n.id, 0, drafts); err != nil {
		t.Fatal(err)
	}
}

// converged waits until every node holds the same vector for agent, and
// want events besides those that name its members.
func converged(t *testing.T, agent string, want int, nodes ...*Node) {
	t.Helper()
	alike := func() bool {
		var first journal.Vector
		for i, n := range nodes {
			v, err := n.store.Vector(agent)
			if err != nil && !n.store.Holds(agent) {
				return false // not taken yet
			}
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = v
			}
			if !maps.Equal(first, v) {
				return false
			}
		}
		// The vectors are alike: count the events (a read of each journal).
		for _, n := range nodes {
			evs, _ := n.store.Events(agent, "")
			if len(withoutMembers(evs)) != want {
				return false
			}
		}
		return true
	}
	if poll(20*time.Second, alike) {
		return
	}
	for _, n := range nodes {
		evs, _ := n.store.Events(agent, "")
		t.Logf("%s holds %d events", n.info.PeerID, len(evs))
	}
	t.Fatalf("nodes did not converge on %d events", want)
}

func TestTwoNodesConvergeAfterConcurrentAppends(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		pair(t, a, b)
		agent := sharedCapsule(t, a, b)
		appendN(t, a, agent, 20)
		appendN(t, b, agent, 15)
		converged(t, agent, 35, a, b)
		for _, n := range []*Node{a, b} {
			rep, err := capsule.Verify(filepath.Join(n.home, store.CapsulesDir, agent), capsule.VerifyOptions{})
			if err != nil || !rep.OK() {
				t.Fatalf("capsule on %s: %v %+v", n.info.PeerID, err, rep)
			}
		}
	})
}

func TestThreeNodesConverge(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b, c := tr.start(t, t.TempDir()), tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		pair(t, a, b)
		pair(t, b, c)
		pair(t, a, c)
		agent := sharedCapsule(t, a, b, c)
		appendN(t, a, agent, 5)
		appendN(t, b, agent, 6)
		appendN(t, c, agent, 7)
		converged(t, agent, 18, a, b, c)
	})
}

func TestNodeJSONSaysWhereTheAPIIs(t *testing.T) {
	home := t.TempDir()
	n := startNode(t, home)
	data, err := os.ReadFile(filepath.Join(home, InfoFile))
	if err != nil {
		t.Fatal(err)
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil || info.Token == "" || info.PeerID != n.host.ID().String() {
		t.Fatalf("node.json = %s (%v)", data, err)
	}
	if st, _ := os.Stat(filepath.Join(home, InfoFile)); st.Mode().Perm() != 0o600 {
		t.Fatalf("node.json mode %v", st.Mode())
	}
}

func TestTheAPIAndMetricsNeedTheTokenUnlessMetricsArePublic(t *testing.T) {
	get := func(n *Node, path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, n.info.API+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	private := startNode(t, t.TempDir())
	public, err := Start(t.TempDir(), Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, MetricsPublic: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { public.Close() })
	for _, tc := range []struct {
		name        string
		n           *Node
		path, token string
		want        int
	}{
		{"the status without a token is refused", private, "/v1/status", "", http.StatusUnauthorized},
		{"the status with a wrong token is refused", private, "/v1/status", "wrong", http.StatusUnauthorized},
		{"metrics without a token are refused", private, "/metrics", "", http.StatusUnauthorized},
		{"metrics with the token are served", private, "/metrics", private.info.Token, http.StatusOK},
		{"public metrics without a token are served", public, "/metrics", "", http.StatusOK},
		{"the status of a node with public metrics still needs the token", public, "/v1/status", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.n, tc.path, tc.token)
			if code != tc.want {
				t.Fatalf("answered %d, want %d: %.200s", code, tc.want, body)
			}
			if code == http.StatusOK && tc.path == "/metrics" && !strings.Contains(body, "tern_peers_connected") {
				t.Fatalf("metrics: %.200s", body)
			}
			if code == http.StatusUnauthorized && !strings.Contains(body, "token") {
				t.Fatalf("the refusal does not say a token is needed: %s", body)
			}
		})
	}
}

func TestTheAPIListensOnLoopbackOnly(t *testing.T) {
	_, err := Start(t.TempDir(), Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, API: "0.0.0.0:0"}, nil)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("a public API address was accepted: %v", err)
	}
}

func TestATamperedEventFromAPeerIsQuarantinedAndShown(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		pair(t, a, b)
		agent := sharedCapsule(t, a, b)
		appendN(t, b, agent, 1)
		evs, _ := b.store.Events(agent, "")
		evs = withoutMembers(evs)
		bad := bytes.Replace(evs[0].Line(), []byte(`"text":"`), []byte(`"text":"forged `), 1)

		// b plays a peer that lies: it opens a sync stream to a and sends the
		// tampered line as an event a lacks.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.host.Connect(ctx, peer.AddrInfo{ID: a.host.ID(), Addrs: a.host.Addrs()}); err != nil {
			t.Fatal(err)
		}
		s, err := b.host.NewStream(ctx, a.host.ID(), protocol.SyncID)
		if err != nil {
			t.Fatal(err)
		}
		hello, _ := json.Marshal(map[string]any{"agent": agent, "vector": map[string]any{}})
		protocol.WriteFrame(s, append([]byte{'H'}, hello...))
		protocol.WriteFrame(s, append([]byte{'E'}, bad...))
		protocol.WriteFrame(s, []byte(`D{"vector":{}}`))
		io.Copy(io.Discard, s)
		s.Close()

		var st api.Status
		if !poll(10*time.Second, func() bool {
			var err error
			if st, err = a.Status(); err != nil {
				t.Fatal(err)
			}
			return st.Capsules[0].Rejected == 1
		}) {
			t.Fatalf("status does not show the rejected event: %+v", st.Capsules)
		}
		held, _ := a.store.Events(agent, "")
		for _, e := range held {
			if bytes.Contains(e.Line(), []byte("forged")) {
				t.Fatal("the tampered event entered the journal")
			}
		}
		data, err := os.ReadFile(filepath.Join(a.home, store.QuarantineDir, agent+".jsonl"))
		if err != nil || !bytes.Contains(data, []byte("forged")) || !bytes.Contains(data, []byte(b.info.PeerID)) {
			t.Fatalf("quarantine file: %s %v", data, err)
		}
	})
}

func TestAWorkspaceSnapshotReachesThePeerWithEveryBlob(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		pair(t, a, b)
		agent := sharedCapsule(t, a, b)
		ws := filepath.Join(t.TempDir(), "ws")
		os.MkdirAll(filepath.Join(ws, "src"), 0o755)
		os.WriteFile(filepath.Join(ws, "src", "main.go"), []byte("package main\n"), 0o644)
		os.WriteFile(filepath.Join(ws, "big.bin"), bytes.Repeat([]byte("0123456789"), 100_000), 0o644)
		d, done, err := a.store.Use(agent)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Snapshot(context.Background(), a.id, ws)
		done()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range a.host.Network().Peers() {
			a.goSync(p)
		}
		var st api.Status
		if !poll(20*time.Second, func() bool {
			st, _ = b.Status()
			evs, _ := b.store.Events(agent, "")
			return len(withoutMembers(evs)) == 1 && st.Capsules[0].Wants == 0
		}) {
			t.Fatalf("b did not get the snapshot and its blobs: %+v", st.Capsules)
		}
		out := filepath.Join(t.TempDir(), "out")
		c, err := capsule.Open(filepath.Join(b.home, store.CapsulesDir, agent))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Materialize(out); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(out, "big.bin")); len(got) != 1_000_000 {
			snap, _ := os.ReadFile(filepath.Join(b.home, store.CapsulesDir, agent, filepath.FromSlash(capsule.SnapshotFile)))
			_, nextErr := os.Stat(filepath.Join(b.home, store.CapsulesDir, agent, filepath.FromSlash(capsule.SnapshotFile)+".next"))
			want, _ := b.store.Wanted(agent)
			t.Fatalf("big.bin has %d bytes on b; b's snapshot.json now %q (.next: %v), wanted %v, listed %v",
				len(got), snap, nextErr, want, c.Manifest().Files[capsule.SnapshotFile])
		}
		if rep, _ := capsule.Verify(filepath.Join(b.home, store.CapsulesDir, agent), capsule.VerifyOptions{}); !rep.OK() {
			t.Fatalf("b's capsule: %+v", rep.Problems)
		}
	})
}

// A snapshot of a folder taken through the node (tern capsule snapshot
// AGENT DIR) is offered to the connected peers at once, as an import is:
// the peer holds it and its blobs with no round due for an hour.
func TestASnapshotThroughTheNodeIsOfferedToThePeersAtOnce(t *testing.T) {
	a, b := tcp.startEvery(t, t.TempDir(), time.Hour), tcp.startEvery(t, t.TempDir(), time.Hour)
	agent := sharedCapsule(t, a, b)
	connectAll(t, a, b)
	converged(t, agent, 0, a, b)
	ws := filepath.Join(t.TempDir(), "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "big.bin"), bytes.Repeat([]byte("0123456789"), 100_000), 0o644)
	body, _, err := a.Snapshot(context.Background(), agent, ws, capsule.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !poll(20*time.Second, func() bool {
		evs, _ := b.store.Events(agent, "")
		want, _ := b.store.Wanted(agent)
		return slices.ContainsFunc(evs, func(e *journal.Event) bool { return bytes.Contains(e.Body, []byte(body.Snapshot)) }) && len(want) == 0
	}) {
		t.Fatal("b did not take the snapshot and its blobs without a round")
	}
}

func TestAPeerTakesACapsuleItDoesNotHoldYet(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		agent := sharedCapsule(t, a) // only a holds it
		appendN(t, a, agent, 4)
		pair(t, a, b)
		converged(t, agent, 4, a, b)
		if rep, err := capsule.Verify(filepath.Join(b.home, store.CapsulesDir, agent), capsule.VerifyOptions{}); err != nil || !rep.OK() {
			t.Fatalf("b's copy: %v %+v", err, rep)
		}
	})
}

func testLog(home string) *slog.Logger {
	if os.Getenv("TERN_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("home", filepath.Base(home))
}

// mdnsGoroutines counts the goroutines of LAN discovery: the mDNS
// service's and its zeroconf server's, which its Close waits for.
func mdnsGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "p2p/discovery/mdns.") || strings.Contains(g, "zeroconf/v2.(*Server)") {
			count++
		}
	}
	return count
}

func TestCloseStopsLANDiscovery(t *testing.T) {
	if got := mdnsGoroutines(); got != 0 {
		t.Fatalf("%d mDNS goroutines run before the node starts", got)
	}
	home := t.TempDir()
	n, err := Start(home, Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}}, testLog(home))
	if err != nil {
		t.Fatal(err)
	}
	if mdnsGoroutines() == 0 {
		n.Close()
		t.Skip("mDNS did not start on this machine (no multicast interface)")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mdnsGoroutines(); got != 0 {
		t.Fatalf("%d mDNS goroutines outlived Close", got)
	}
}
