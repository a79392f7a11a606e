package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filelock"
	"github.com/tern-dev/tern/internal/linelog"
	"github.com/tern-dev/tern/node"
)

func TestIDAndVersion(t *testing.T) {
	home := t.TempDir()
	code, out, errs := tern(t, home, "", "id")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "12D3KooW") || !strings.Contains(errs, "no node runs") {
		t.Fatalf("id without a node: exit %d %q %q", code, out, errs)
	}
	n := runNode(t, home)
	var got struct {
		PeerID string   `json:"peer_id"`
		Addrs  []string `json:"addrs"`
	}
	if err := json.Unmarshal([]byte(mustTern(t, home, "", "id", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.PeerID != id || got.PeerID != n.Info().PeerID || len(got.Addrs) == 0 || !strings.HasSuffix(got.Addrs[0], "/p2p/"+id) {
		t.Fatalf("id with a node: %+v", got)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if out := mustTern(t, home, "", args...); !strings.HasPrefix(out, "tern ") {
			t.Fatalf("%v: %q", args, out)
		}
	}
}

// Pairing takes what tern id prints on the other machine, a bare peer ID
// or a name, keeps known addresses, and refuses this machine's own ID.
func TestPeerAddTakesWhatTernIDPrints(t *testing.T) {
	home, other := t.TempDir(), t.TempDir()
	mine := strings.TrimSpace(mustTern(t, home, "", "id"))
	theirs := strings.TrimSpace(mustTern(t, other, "", "id"))

	if out := mustTern(t, home, "", "peer", "list"); out != "" {
		t.Fatalf("an empty peer list printed %q", out)
	}
	_, _, out := tern(t, home, "", "peer", "add", "/ip4/192.168.1.20/tcp/4001/p2p/"+theirs, "--name", "desktop")
	if !strings.Contains(out, "paired "+theirs+" (desktop), 1 address") {
		t.Fatalf("peer add of a full address: %q", out)
	}
	if _, _, out := tern(t, home, "", "peer", "add", "desktop", "/ip4/192.168.1.21/tcp/4001"); !strings.Contains(out, "(desktop), 2 addresses") {
		t.Fatalf("peer add by name with another address: %q", out)
	}
	if _, _, out := tern(t, home, "", "peer", "add", theirs); !strings.Contains(out, "(desktop), 2 addresses") {
		t.Fatalf("peer add again without addresses: %q", out)
	}
	list := mustTern(t, home, "", "peer", "list")
	if !strings.HasPrefix(list, "PEER ID") || !strings.Contains(list, "/ip4/192.168.1.20/tcp/4001") || !strings.Contains(list, "desktop") {
		t.Fatalf("peer list: %q", list)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"peer", "add", mine}, "this machine's own peer ID"},
		{[]string{"peer", "add", "/ip4/192.168.1.20/tcp/4001"}, "does not end in /p2p/"},
		{[]string{"peer", "add", "laptop"}, "neither a peer ID nor the name of a paired peer"},
		{[]string{"peer", "add", theirs, "192.168.1.20:4001"}, "is not an address"},
	} {
		if code, _, errs := tern(t, home, "", c.args...); code != 2 || !strings.Contains(errs, c.says) {
			t.Errorf("%v: exit %d %q, want 2 saying %q", c.args, code, errs, c.says)
		}
	}
	if _, _, errs := tern(t, home, "", "peer", "remove", "desktop", "--quiet"); errs != "" {
		t.Fatalf("peer remove --quiet said %q", errs)
	}
	if out := mustTern(t, home, "", "peer", "list"); out != "" {
		t.Fatalf("after remove by name: %q", out)
	}
}

func TestPackRefusesToReplaceAFileWithoutForce(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	out := filepath.Join(t.TempDir(), "a.tar")
	mustTern(t, home, "", "capsule", "pack", dir, "-o", out)
	if code, _, errs := tern(t, home, "", "capsule", "pack", dir, "-o", out); code != 2 || !strings.Contains(errs, "--force") {
		t.Fatalf("pack over a file: exit %d %q", code, errs)
	}
	if code, _, errs := tern(t, home, "", "capsule", "pack", dir, "-o", out, "--force"); code != 0 || !strings.Contains(errs, "packed") {
		t.Fatalf("pack --force: exit %d %q", code, errs)
	}
}

// Reading commands take the agent id of a capsule the node holds, where
// they take a folder or a tar.
func TestReadingCommandsTakeAnAgentIDTheNodeHolds(t *testing.T) {
	home := t.TempDir()
	runNode(t, home)
	id := importAgent(t, home, nil)
	mustTern(t, home, "", "turn", id, "hello")
	for _, args := range [][]string{
		{"journal", "log", id},
		{"capsule", "inspect", id},
		{"capsule", "verify", id},
		{"render", id, "--provider", "anthropic"},
	} {
		if code, out, errs := tern(t, home, "", args...); code != 0 || out == "" {
			t.Errorf("%v: exit %d %q %q", args, code, out, errs)
		}
	}
	if code, _, errs := tern(t, home, "", "journal", "log", "3f1c2a4e-0000-4000-8000-000000000000"); code != 2 || !strings.Contains(errs, "3f1c2a4e") {
		t.Errorf("an agent id the node does not hold: exit %d %q", code, errs)
	}
}

func TestAnUnknownSubcommandGetsSuggestions(t *testing.T) {
	for args, want := range map[string]string{"peer lst": "did you mean list?", "capsule verfy": "did you mean verify?", "trun": "turn"} {
		code, _, errs := tern(t, t.TempDir(), "", strings.Fields(args)...)
		if code != 2 || !strings.Contains(errs, want) {
			t.Errorf("tern %s: exit %d %q, want 2 suggesting %q", args, code, errs, want)
		}
	}
}

func TestArgumentErrorsNameWhatIsMissing(t *testing.T) {
	for args, want := range map[string]string{
		"turn 3f1c2a4e-0000-4000-8000-000000000000": "turn: missing MESSAGE",
		"capsule pack":    "capsule pack: missing PATH",
		"approve":         "approve: missing ACTION_ID",
		"id extra":        `id: too many arguments ("extra" and after)`,
		"journal log a b": `journal log: too many arguments ("b" and after)`,
	} {
		code, _, errs := tern(t, t.TempDir(), "", strings.Fields(args)...)
		if code != 2 || !strings.Contains(errs, want) || !strings.Contains(errs, "--help' for more") {
			t.Errorf("tern %s: exit %d %q, want 2 saying %q and pointing to --help", args, code, errs, want)
		}
	}
}

// A snapshot leaves out .git/, what .ternignore lists and what --exclude
// names, says so once, and a refused one stores nothing.
func TestSnapshotLeavesOutWhatItIsToldAndARefusalStoresNothing(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "agent")
	mustTern(t, home, "", "capsule", "new", dir, "--name", "helper")
	ws := t.TempDir()
	for name, content := range map[string]string{
		"main.go": "package main\n", ".git/HEAD": "ref: main\n", "build/out.bin": "x", "debug.log": "y",
		"notes/a.log": "z", ".ternignore": "# built\nbuild/\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755)
		os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644)
	}
	code, out, errs := tern(t, home, "", "capsule", "snapshot", dir, ws, "--exclude", "*.log")
	if code != 0 || !strings.Contains(out, "2 files") || !strings.Contains(errs, ".git/") || !strings.Contains(errs, "build/") || !strings.Contains(errs, "notes/a.log") {
		t.Fatalf("snapshot: exit %d %q %q; want main.go and .ternignore only, the rest said left out", code, out, errs)
	}
	blobs := func() int { e, _ := os.ReadDir(filepath.Join(dir, "blobs")); return len(e) }
	before := blobs()
	os.WriteFile(filepath.Join(ws, "new.txt"), []byte("a new file, never stored"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(ws, "link"))
	if code, _, errs := tern(t, home, "", "capsule", "snapshot", dir, ws); code != 2 || !strings.Contains(errs, "link is a symbolic link") {
		t.Fatalf("a snapshot with a link: exit %d %q", code, errs)
	}
	if after := blobs(); after != before {
		t.Fatalf("a refused snapshot left %d blobs behind", after-before)
	}
}

// Shell completion knows agent ids (with names), peer names and providers.
func TestCompletionKnowsAgentsPeersAndProviders(t *testing.T) {
	home := t.TempDir()
	runNode(t, home)
	id := importAgent(t, home, nil)
	other := strings.TrimSpace(mustTern(t, t.TempDir(), "", "id"))
	mustTern(t, home, "", "peer", "add", other, "--name", "desktop")
	for args, want := range map[string]string{
		"__complete turn ":                    id + "\thelper",
		"__complete journal log ":             id,
		"__complete migrate " + id + " --to ": "desktop\t" + other,
		"__complete turn x y --provider ":     "anthropic",
	} {
		fields := strings.Split(args, " ") // the last, empty, is the word being completed
		if out := mustTern(t, home, "", fields...); !strings.Contains(out, want) {
			t.Errorf("tern %s: %q, want %q", args, out, want)
		}
	}
}

func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && !c.HasSubCommands() && !c.Hidden && c.Name() != "help" && c.Name() != "completion" && c.Example == "" {
			t.Errorf("%s has no Examples: section", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot(nil, io.Discard, io.Discard))
}

func TestAnActionAnsweredTwiceInOneCommandIsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"approve", "act_a", "act_a"},
		{"approve", "act_a", "--deny", "act_a"},
		{"respond", "act_b", "--output", `"x"`, "--deny", "act_b"},
	} {
		if code, _, errs := tern(t, t.TempDir(), "", args...); code != 2 || !strings.Contains(errs, "is answered twice") {
			t.Errorf("%v: exit %d %q", args, code, errs)
		}
	}
}

// A new --name for a paired peer renames it, and says so: the old name no
// longer names it.
func TestPeerAddWithANewNameSaysItRenames(t *testing.T) {
	home, other := t.TempDir(), t.TempDir()
	theirs := strings.TrimSpace(mustTern(t, other, "", "id"))
	if _, _, errs := tern(t, home, "", "peer", "add", theirs, "--name", "desktop"); strings.Contains(errs, "renamed") {
		t.Fatalf("a first pairing said %q", errs)
	}
	if _, _, errs := tern(t, home, "", "peer", "add", theirs, "--name", "desktop"); strings.Contains(errs, "renamed") {
		t.Fatalf("the same name again said %q", errs)
	}
	_, _, errs := tern(t, home, "", "peer", "add", theirs, "--name", "tower")
	if !strings.Contains(errs, "renamed desktop → tower") {
		t.Fatalf("peer add with a new name: %q, want it to say renamed desktop → tower", errs)
	}
	if code, _, _ := tern(t, home, "", "peer", "remove", "desktop"); code != exitBadInput {
		t.Fatalf("the old name still names the peer: exit %d", code)
	}
}

// tern id run while the node of its home starts (it holds the home's lock
// but has not written node.json since, or only a crashed node's is there)
// waits for it, says so, and prints the addresses it writes.
func TestIDWaitsForANodeThatIsStarting(t *testing.T) {
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("a stopped node's node.json left behind: %v", stale), func(t *testing.T) {
			home := t.TempDir()
			id := strings.TrimSpace(mustTern(t, home, "", "id"))
			infoPath := filepath.Join(home, node.InfoFile)
			write := func(port int) {
				data, _ := json.Marshal(node.Info{API: "127.0.0.1:1", PeerID: id, Addrs: []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port)}})
				if err := atomicfile.WriteFile(infoPath, data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if stale {
				write(4999)
				old := time.Now().Add(-time.Hour)
				os.Chtimes(infoPath, old, old)
			}
			lock, err := filelock.TryLock(filepath.Join(home, node.LockFile)) // the starting node's
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Unlock()
			stderr := &linelog.Log{}
			var stdout strings.Builder
			done := make(chan int, 1)
			t.Setenv("TERN_HOME", home)
			go func() {
				code := run([]string{"id"}, strings.NewReader(""), &stdout, stderr)
				stderr.End()
				done <- code
			}()
			if _, _, err := awaitLine(stderr, 0, time.Minute, func(line string) bool {
				return strings.Contains(line, "waiting for the node of this TERN_HOME")
			}); err != nil {
				t.Fatalf("tern id did not say it waits: %v: %q %q", err, stdout.String(), stderr.String())
			}
			write(4002)
			if code := <-done; code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			if want := id + "\n/ip4/127.0.0.1/tcp/4002/p2p/" + id + "\n"; stdout.String() != want {
				t.Fatalf("tern id printed %q, want %q", stdout.String(), want)
			}
		})
	}
}
