package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/filecopy"
	"github.com/tern-dev/tern/internal/linelog"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
)

// runNode starts a node for home on 127.0.0.1, in-process, as tern node would.
func runNode(t *testing.T, home string) *node.Node {
	t.Helper()
	n, err := node.Start(home, node.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, SyncInterval: 100 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func TestTwoNodesSyncACapsuleThroughTheCLI(t *testing.T) {
	homeA, homeB := t.TempDir(), t.TempDir()
	a, b := runNode(t, homeA), runNode(t, homeB)
	ia, ib := a.Info(), b.Info()
	mustTern(t, homeA, "", "peer", "add", ib.PeerID, ib.Addrs[0], "--name", "desktop")
	mustTern(t, homeB, "", "peer", "add", ia.PeerID, ia.Addrs[0], "--name", "laptop")
	if out := mustTern(t, homeA, "", "peer", "list"); !strings.Contains(out, "desktop") {
		t.Fatalf("peer list: %s", out)
	}

	dir := newAgent(t, homeA)
	tarPath := filepath.Join(t.TempDir(), "a.tar")
	mustTern(t, homeA, "", "capsule", "pack", dir, "-o", tarPath)
	id := strings.TrimSpace(mustTern(t, homeA, "", "capsule", "import", tarPath))
	if id2 := strings.TrimSpace(mustTern(t, homeB, "", "capsule", "import", dir)); id2 != id {
		t.Fatalf("imported ids %s and %s", id, id2)
	}
	mustTern(t, homeA, conversation, "journal", "append", id)
	// b writes once a makes it a member, which a does as it syncs with b,
	// its paired peer.
	mustTern(t, homeA, "", "sync", "wait", id, "--peer", ib.PeerID, "--timeout", "20s")
	mustTern(t, homeB, conversation, "journal", "append", id)
	mustTern(t, homeA, "", "sync", "wait", id, "--peer", ib.PeerID, "--timeout", "20s")

	var st api.Status
	if err := json.Unmarshal([]byte(mustTern(t, homeB, "", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	// a's 4 (its creation, the conversation, the workspace) and b's
	// member.added, a's second conversation and b's.
	if len(st.Capsules) != 1 || st.Capsules[0].Events != 9 || len(st.Peers) != 1 {
		t.Fatalf("status of b: %+v", st)
	}
	out := filepath.Join(t.TempDir(), "b.tar")
	mustTern(t, homeB, "", "capsule", "export", id, "-o", out)
	if v := mustTern(t, homeB, "", "capsule", "verify", out); !strings.Contains(v, "9 events") {
		t.Fatalf("verify of b's export: %s", v)
	}
	if l := mustTern(t, homeB, "", "capsule", "list"); !strings.Contains(l, id) {
		t.Fatalf("capsule list: %s", l)
	}
}

func TestNodeCommandsWithoutANodeSayHowToStartOne(t *testing.T) {
	code, _, errs := tern(t, t.TempDir(), "", "status")
	if code != exitFailed || !strings.Contains(errs, "tern node") {
		t.Fatalf("exit %d, %q", code, errs)
	}
}

func TestSyncWaitTimesOutWithExitOne(t *testing.T) {
	home := t.TempDir()
	runNode(t, home)
	dir := newAgent(t, home)
	id := strings.TrimSpace(mustTern(t, home, "", "capsule", "import", dir))
	code, _, _ := tern(t, home, "", "sync", "wait", id, "--peer", "12D3KooWRBy97UB99e3J6hiPesre1MZeuNQvfan4gBziswrRJsNK", "--timeout", "300ms")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
}

func TestUnshareAndShareWorkWithoutANode(t *testing.T) {
	home := t.TempDir()
	const agent, peer = "6f1c9a52-0d1e-4a8e-9b7f-2a4c1e9d3b10", "12D3KooWRBy97UB99e3J6hiPesre1MZeuNQvfan4gBziswrRJsNK"
	mustTern(t, home, "", "capsule", "unshare", agent, peer)
	s, err := store.LoadShares(home)
	if err != nil || s.Shared(agent, peer) {
		t.Fatalf("after unshare: %v", err)
	}
	mustTern(t, home, "", "capsule", "share", agent, peer)
	if s, _ := store.LoadShares(home); !s.Shared(agent, peer) {
		t.Fatal("share did not undo unshare")
	}
	if code, _, errs := tern(t, home, "", "capsule", "unshare", "not-an-id", peer); code != 2 || !strings.Contains(errs, "agent id") {
		t.Fatalf("bad id: exit %d %q", code, errs)
	}
}

func TestABadConfigFileStopsTheNodeWithExitTwo(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, node.ConfigFile), []byte(`{"sync_interval": "often"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := tern(t, home, "", "node", "--no-mdns")
	if code != 2 || !strings.Contains(errs, "config.json") || !strings.Contains(errs, "sync_interval") {
		t.Fatalf("exit %d, %q", code, errs)
	}
}

// A capsule folder that cannot be packed is refused with why (exit 2), not
// with the upload that broke because of it; nothing reaches the node.
func TestImportingAFolderThatCannotBePackedSaysWhy(t *testing.T) {
	home := t.TempDir()
	n := runNode(t, home)
	dir := newAgent(t, home)
	f, err := os.OpenFile(filepath.Join(dir, capsule.AgentFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n") // a hand edit, not accepted
	f.Close()
	code, _, errs := tern(t, home, "", "capsule", "import", dir)
	if code != 2 || !strings.Contains(errs, "edited by hand") || strings.Contains(errs, "Post ") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if ids, _ := n.Store().List(); len(ids) > 0 {
		t.Fatalf("the node holds %v after a refused import", ids)
	}
}

// A folder is imported by the node from where it lies, without a tar, and
// the person is told how its blobs were copied; stdout is the agent id
// alone, as for a tar.
func TestImportingAFolderSaysHowItsBlobsWereCopied(t *testing.T) {
	home := t.TempDir()
	n := runNode(t, home)
	dir := newAgent(t, home)
	code, out, errs := tern(t, home, "", "capsule", "import", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	id := strings.TrimSpace(out)
	if !n.Store().Holds(id) {
		t.Fatalf("the node does not hold %q", id)
	}
	if !slices.ContainsFunc(filecopy.Methods, func(m filecopy.Method) bool { return strings.Contains(errs, "blobs copied by "+string(m)) }) {
		t.Fatalf("stderr %q names no copy method", errs)
	}
}

// A tar the node refuses is named in the error as the person gave it, not
// as "the uploaded tar"; nothing is left of it in the node.
func TestARefusedTarIsNamedByItsPath(t *testing.T) {
	home := t.TempDir()
	n := runNode(t, home)
	dir := newAgent(t, home)
	tarPath := filepath.Join(t.TempDir(), "agent.tar")
	mustTern(t, home, "", "capsule", "pack", dir, "-o", tarPath)
	data, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.tar")
	os.WriteFile(cut, data[:len(data)/2+100], 0o644) // inside a block: truncated
	code, _, errs := tern(t, home, "", "capsule", "import", cut)
	if code != 2 || !strings.Contains(errs, cut) || strings.Contains(errs, "the uploaded tar") || !strings.Contains(errs, "truncated") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if ids, _ := n.Store().List(); len(ids) > 0 {
		t.Fatalf("the node holds %v after a refused import", ids)
	}
}

// A bad flag of tern node is refused before anything is touched: no port
// is probed (the default one is taken here, as when another node runs),
// no key or file is written in the home.
func TestABadFlagOfTernNodeTouchesNothing(t *testing.T) {
	if l, err := net.Listen("tcp", fmt.Sprintf(":%d", DefaultPort)); err == nil {
		defer l.Close()
	}
	home := t.TempDir()
	for _, args := range [][]string{{"--log-format", "xml"}, {"--sync-interval", "-1s"}} {
		code, out, errs := tern(t, home, "", append([]string{"node"}, args...)...)
		if code != exitBadInput || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, args[0]) {
			t.Fatalf("tern node %v: exit %d, stdout %q, stderr %q: want exit 2 and one line naming the flag", args, code, out, errs)
		}
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Fatalf("a refused tern node left %d entries in its home", len(entries))
	}
}

// sync wait names the peer by its paired name, says "nothing to copy yet"
// rather than counting "events of 0 machines", and says when the peer is
// not connected; status says since when: the time the connection ended.
func TestSyncWaitAndStatusNameThePeerAndWhenItWentAway(t *testing.T) {
	homeA, homeB := t.TempDir(), t.TempDir()
	a, b := runNode(t, homeA), runNode(t, homeB)
	ia, ib := a.Info(), b.Info()
	mustTern(t, homeA, "", "peer", "add", ib.PeerID, ib.Addrs[0], "--name", "desktop")
	mustTern(t, homeB, "", "peer", "add", ia.PeerID, ia.Addrs[0], "--name", "laptop")
	dir := filepath.Join(t.TempDir(), "agent")
	id := strings.TrimSpace(mustTern(t, homeA, "", "capsule", "new", dir, "--name", "helper"))
	mustTern(t, homeA, "", "capsule", "import", dir)
	out := mustTern(t, homeA, "", "sync", "wait", id, "--peer", "desktop", "--timeout", "20s")
	if !strings.HasPrefix(out, "in sync with desktop: ") || strings.Contains(out, "0 machines") {
		t.Fatalf("sync wait after an import: %q", out)
	}

	ended := time.Now()
	b.Close()
	var st api.Status
	// libp2p on loopback tells the disconnection when it does: a positive
	// answer to wait for.
	eventually(t, 20*time.Second, func() error {
		if err := json.Unmarshal([]byte(mustTern(t, homeA, "", "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Peers) == 1 && !st.Peers[0].Connected {
			return nil
		}
		return errors.New("the laptop still counts the stopped desktop connected")
	})
	if at := st.Peers[0].DisconnectedAt; at == nil || at.Before(ended) {
		t.Fatalf("status: disconnected at %v, want the time the connection ended (after %v)", at, ended)
	}
	if s := mustTern(t, homeA, "", "status"); !strings.Contains(s, "(desktop) (not connected since "+st.Peers[0].DisconnectedAt.Local().Format(time.DateTime)) {
		t.Fatalf("status:\n%s", s)
	}

	mustTern(t, homeA, conversation, "journal", "append", id)
	code, _, errs := tern(t, homeA, "", "sync", "wait", id, "--peer", "desktop", "--timeout", "300ms")
	if code != exitCheck || !strings.Contains(errs, "desktop is not connected") || strings.Contains(errs, ib.PeerID) {
		t.Fatalf("sync wait with the desktop down: exit %d, %q", code, errs)
	}
}

// A move to a paired peer whose node is down says so, by the peer's name,
// and exits 3 (a failure that trying again may fix); tern holder says the
// same of that peer, without libp2p's dial dump.
func TestAMoveToAStoppedPeerSaysItIsNotConnected(t *testing.T) {
	homeA, homeB := t.TempDir(), t.TempDir()
	a, b := runNode(t, homeA), runNode(t, homeB)
	ia, ib := a.Info(), b.Info()
	mustTern(t, homeA, "", "peer", "add", ib.PeerID, ib.Addrs[0], "--name", "desktop")
	mustTern(t, homeB, "", "peer", "add", ia.PeerID, ia.Addrs[0], "--name", "laptop")
	id := strings.TrimSpace(mustTern(t, homeA, "", "capsule", "import", newAgent(t, homeA)))
	mustTern(t, homeA, "", "sync", "wait", id, "--peer", "desktop", "--timeout", "20s")
	b.Close()

	code, _, errs := tern(t, homeA, "", "migrate", id, "--to", "desktop")
	if code != exitFailed || !strings.Contains(errs, "desktop") || !strings.Contains(errs, "not connected") || strings.Contains(errs, "dial") {
		t.Fatalf("migrate to a stopped peer: exit %d: %s", code, errs)
	}
	out := mustTern(t, homeA, "", "holder", id)
	if !strings.Contains(out, "not connected") || strings.Contains(out, "dial") {
		t.Fatalf("holder with a stopped peer:\n%s", out)
	}
}

// A node that chose its port keeps it: the first start writes it into
// config.json, and the next start listens there again even when the
// default port is free (item 6 of issue 31: two tour nodes restarted in
// the other order swapped ports, and their peers dialed the wrong one).
func TestANodeKeepsThePortItChose(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	home := t.TempDir()
	port := func() string {
		t.Helper()
		cmd := ternProcess(home, "", "node", "--no-mdns")
		out := &linelog.Log{}
		stdout, err := linelog.Pipe(out, out.End)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = stdout
		err = cmd.Start()
		stdout.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
		// tern node prints the API's address once the node has started.
		if _, _, err := awaitLine(out, 0, 20*time.Second, func(line string) bool { return strings.HasPrefix(line, "api ") }); err != nil {
			t.Fatalf("the node did not come up: %v", err)
		}
		var info node.Info
		data, err := os.ReadFile(filepath.Join(home, node.InfoFile))
		if err != nil || json.Unmarshal(data, &info) != nil {
			t.Fatalf("%s of the started node: %v", node.InfoFile, err)
		}
		for _, a := range info.Addrs {
			if _, p, ok := strings.Cut(a, "/tcp/"); ok {
				p, _, _ = strings.Cut(p, "/")
				return p
			}
		}
		t.Fatalf("no TCP address in %v", info.Addrs)
		return ""
	}
	// The default port is taken at the first start (as by the other tour
	// node) and free at the next: a node that chose again would take it.
	held, err := net.Listen("tcp", fmt.Sprintf(":%d", DefaultPort))
	first := port()
	if err == nil {
		held.Close()
	}
	cfg, err := node.LoadConfig(home)
	if err != nil || len(cfg.Listen) != 2 || !strings.Contains(cfg.Listen[0], "/tcp/"+first) {
		t.Fatalf("config.json after the first start: %+v %v", cfg.Listen, err)
	}
	if again := port(); again != first {
		t.Fatalf("the node listens on %s after a restart, on %s before", again, first)
	}
}

// With the node stopped, a note and an append to an agent it holds are
// written to this home's copy, saying so; the node holds them when it
// starts again.
func TestANoteWithTheNodeStoppedIsWrittenToTheHomesCopy(t *testing.T) {
	home := t.TempDir()
	n := runNode(t, home)
	id := importAgent(t, home, nil)
	n.Close()

	code, out, errs := tern(t, home, "", "memory", "note", id, "written while the node was stopped")
	if code != 0 || !strings.HasPrefix(out, "note_") || !strings.Contains(errs, "no node runs") {
		t.Fatalf("memory note with the node stopped: exit %d, %q, %q", code, out, errs)
	}
	code, _, errs = tern(t, home, draftLine("appended while stopped"), "journal", "append", id)
	if code != 0 || !strings.Contains(errs, "offline edit") {
		t.Fatalf("journal append with the node stopped: exit %d, %q", code, errs)
	}

	runNode(t, home)
	tar := filepath.Join(t.TempDir(), "a.tar")
	mustTern(t, home, "", "capsule", "export", id, "-o", tar)
	log := mustTern(t, home, "", "journal", "log", tar, "--json")
	for _, want := range []string{"written while the node was stopped", "appended while stopped"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the node does not hold %q:\n%s", want, log)
		}
	}
}
