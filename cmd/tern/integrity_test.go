package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
	"github.com/tern-dev/tern/tool/mcptest"
)

// TestMain lets a test run this binary as the tern command itself, in a
// child process: with TERN_TEST_AS_CLI=1 the arguments are tern's.
func TestMain(m *testing.M) {
	mcptest.ServeIfAsked() // with TERN_TEST_AS_MCP=1, an MCP server on stdio
	if os.Getenv("TERN_TEST_AS_CLI") == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// ternProcess is tern run as a separate process.
func ternProcess(home string, stdin string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TERN_TEST_AS_CLI=1", "TERN_HOME="+home)
	cmd.Stdin = strings.NewReader(stdin)
	return cmd
}

func draftLine(text string) string {
	return fmt.Sprintf(`{"type":"message","session":"s1","turn":"t1","body":{"role":"user","content":[{"type":"text","text":%q}]}}`+"\n", text)
}

// Four tern journal append processes on one folder, with one home and
// with four: every acknowledged event is there, nothing forked, and the
// capsule verifies.
func TestFourAppendProcessesOnOneFolderLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, homes := range []int{1, 4} {
		t.Run(fmt.Sprintf("%d homes", homes), func(t *testing.T) {
			home := t.TempDir()
			dir := filepath.Join(t.TempDir(), "agent")
			mustTern(t, home, "", "capsule", "new", dir, "--name", "helper")
			var (
				mu    sync.Mutex
				acked []string
				wg    sync.WaitGroup
			)
			for p := range 4 {
				h := home
				if homes > 1 {
					h = t.TempDir()
					mustTern(t, home, "", "member", "add", dir, strings.TrimSpace(mustTern(t, h, "", "id")))
				}
				wg.Go(func() {
					for i := range 6 {
						out, err := ternProcess(h, draftLine(fmt.Sprintf("process %d, append %d", p, i)), "journal", "append", dir).CombinedOutput()
						if err != nil {
							t.Errorf("append: %v\n%s", err, out)
							return
						}
						mu.Lock()
						acked = append(acked, strings.Fields(string(out))...)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(acked) != 24 {
				t.Fatalf("%d events acknowledged, want 24", len(acked))
			}
			// The 24 appended, the agent's creation and, with four homes,
			// the other three's membership.
			want := 25
			if homes > 1 {
				want += 4
			}
			if v := mustTern(t, home, "", "capsule", "verify", dir); !strings.Contains(v, fmt.Sprintf("%d events", want)) {
				t.Fatalf("verify: %s", v)
			}
			log := mustTern(t, home, "", "journal", "log", dir, "--json")
			for _, id := range acked {
				if !strings.Contains(log, id) {
					t.Fatalf("acknowledged event %s is missing", id)
				}
			}
		})
	}
}

// agentAndCopy makes a capsule and a copy of it on the same machine, as
// the README does: pack, then unpack elsewhere.
func agentAndCopy(t *testing.T, home string) (dir, cp string) {
	t.Helper()
	dir = newAgent(t, home)
	tarPath := filepath.Join(t.TempDir(), "agent.tar")
	mustTern(t, home, "", "capsule", "pack", dir, "-o", tarPath)
	cp = filepath.Join(t.TempDir(), "copy")
	mustTern(t, home, "", "capsule", "unpack", tarPath, cp)
	return dir, cp
}

// The README's flow: unpack a copy on the same machine, write to both,
// merge. The second copy is refused until it is merged, so the machine's
// chain never forks, and the merged capsule verifies and takes appends.
func TestTheSameMachineCopyFlowNeverForks(t *testing.T) {
	home := t.TempDir()
	dir, cp := agentAndCopy(t, home)

	mustTern(t, home, draftLine("written in the copy"), "journal", "append", cp)
	code, _, errs := tern(t, home, draftLine("written in the original"), "journal", "append", dir)
	if code != exitBadInput || !strings.Contains(errs, "tern capsule merge") || !strings.Contains(errs, cp) {
		t.Fatalf("appending to the stale original: exit %d, %q; want 2, naming the copy and the merge", code, errs)
	}
	merged := filepath.Join(t.TempDir(), "merged")
	mustTern(t, home, "", "capsule", "merge", dir, cp, "-o", merged)
	mustTern(t, home, draftLine("written after the merge"), "journal", "append", merged)
	if v := mustTern(t, home, "", "capsule", "verify", merged); !strings.Contains(v, "ok:") {
		t.Fatalf("verify: %s", v)
	}
	log := mustTern(t, home, "", "journal", "log", merged)
	for _, want := range []string{"written in the copy", "written after the merge"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the merged journal lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "QUARANTINED") {
		t.Fatalf("a fork:\n%s", log)
	}
}

// A fork this machine made anyway (here: its record of where it wrote
// last was lost, as with an older tern) is reported by merge with exit 1
// and what to do, and tern capsule heal resolves it.
func TestAForkThisMachineMadeIsHealedWithCapsuleHeal(t *testing.T) {
	home := t.TempDir()
	dir, cp := agentAndCopy(t, home)
	mustTern(t, home, draftLine("branch one"), "journal", "append", dir)
	os.RemoveAll(filepath.Join(home, store.ChainsDir))
	mustTern(t, home, draftLine("branch two"), "journal", "append", cp)

	merged := filepath.Join(t.TempDir(), "merged")
	code, _, errs := tern(t, home, "", "capsule", "merge", dir, cp, "-o", merged)
	if code != exitCheck || !strings.Contains(errs, "tern capsule heal "+merged) {
		t.Fatalf("merge of a fork: exit %d, %q; want 1 and the heal command", code, errs)
	}
	if code, _, _ := tern(t, home, draftLine("refused"), "journal", "append", merged); code == 0 {
		t.Fatal("an append to a forked chain succeeded")
	}
	// A tar of it unpacks, fork and all, so that it can be healed there too.
	forkedTar := filepath.Join(t.TempDir(), "forked.tar")
	mustTern(t, home, "", "capsule", "pack", merged, "-o", forkedTar)
	unpacked := filepath.Join(t.TempDir(), "unpacked")
	code, _, errs = tern(t, home, "", "capsule", "unpack", forkedTar, unpacked)
	if code != exitCheck || !strings.Contains(errs, "tern capsule heal "+unpacked) {
		t.Fatalf("unpack of a forked tar: exit %d, %q", code, errs)
	}
	// For scripts, --json marks both sides of the fork and leaves every
	// other line byte for byte as stored.
	if marked := quarantinedInLog(t, home, merged); len(marked) != 2 || marked[0] != "fork" || marked[1] != "fork" {
		t.Fatalf("journal log --json of a fork marks %v; want both sides as fork", marked)
	}
	out := mustTern(t, home, "", "capsule", "heal", merged)
	if !strings.Contains(out, "healed") || !strings.Contains(out, "ok:") {
		t.Fatalf("heal: %s", out)
	}
	mustTern(t, home, draftLine("after the heal"), "journal", "append", merged)
	mustTern(t, home, "", "capsule", "verify", merged)
	log := mustTern(t, home, "", "journal", "log", merged)
	for _, want := range []string{"branch one", "branch two", "after the heal"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the healed journal lacks %q:\n%s", want, log)
		}
	}
	if !strings.Contains(log, "SET ASIDE") || !strings.Contains(log, "healed a fork") {
		t.Fatalf("journal log does not show the heal:\n%s", log)
	}
	if marked := quarantinedInLog(t, home, merged); len(marked) != 1 || marked[0] != "healed" {
		t.Fatalf("journal log --json after the heal marks %v; want the replaced side as healed", marked)
	}
	if again := mustTern(t, home, "", "capsule", "heal", merged); !strings.Contains(again, "nothing to heal") {
		t.Fatalf("heal again: %s", again)
	}
}

// quarantinedInLog runs journal log --json on dir and returns the
// "quarantined" value of each marked line, in order. It fails the test if
// an unmarked line is not the journal's stored line or a marked one is not
// the stored line plus the mark.
func quarantinedInLog(t *testing.T, home, dir string) []string {
	t.Helper()
	stored := map[string]bool{}
	raw, err := os.ReadFile(filepath.Join(dir, capsule.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		stored[l] = true
	}
	var marks []string
	for _, l := range strings.Split(strings.TrimSpace(mustTern(t, home, "", "journal", "log", dir, "--json")), "\n") {
		var m struct {
			Quarantined string `json:"quarantined"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("journal log --json printed %q: %v", l, err)
		}
		if m.Quarantined == "" {
			if !stored[l] {
				t.Fatalf("journal log --json printed a line not in the journal: %s", l)
			}
			continue
		}
		suffix := `,"quarantined":"` + m.Quarantined + `"}`
		if !strings.HasSuffix(l, suffix) || !stored[strings.TrimSuffix(l, suffix)+"}"] {
			t.Fatalf("a marked line is not the stored line plus the mark: %s", l)
		}
		marks = append(marks, m.Quarantined)
	}
	return marks
}

func TestVerifySignerMustBeAPeerIDInItsCanonicalSpelling(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	var in inspection
	if err := json.Unmarshal([]byte(mustTern(t, home, "", "capsule", "inspect", dir, "--json")), &in); err != nil {
		t.Fatal(err)
	}
	id, err := peer.Decode(in.Holder.Peer)
	if err != nil {
		t.Fatal(err)
	}
	for name, signer := range map[string]string{
		"empty":                 "",
		"not a peer ID":         "hello",
		"a CID spelling of one": peer.ToCid(id).String(),
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errs := tern(t, home, "", "capsule", "verify", dir, "--signer", signer)
			if code != exitBadInput || !strings.Contains(errs, "--signer") {
				t.Fatalf("exit %d, %q", code, errs)
			}
		})
	}
}

// A write to the running node's own folder of a capsule goes through the
// node.
func TestWritesToTheNodesFolderGoThroughTheNode(t *testing.T) {
	home := t.TempDir()
	runNode(t, home)
	dir := newAgent(t, home)
	id := strings.TrimSpace(mustTern(t, home, "", "capsule", "import", dir))
	held := filepath.Join(home, store.CapsulesDir, id)
	code, out, errs := tern(t, home, draftLine("through the node"), "journal", "append", held)
	if code != 0 || !strings.Contains(errs, "through the node") || len(strings.Fields(out)) != 1 {
		t.Fatalf("append to the node's folder: exit %d, %q, %q", code, out, errs)
	}
	code, out, errs = tern(t, home, "", "capsule", "snapshot", held, t.TempDir())
	if code != 0 || !strings.Contains(out, "(through the node)") {
		t.Fatalf("snapshot of the node's folder: exit %d, %q, %q", code, out, errs)
	}
	// export reads the node's copy, named by its folder too; another
	// folder is pointed to pack, and an existing tar is kept.
	tar := filepath.Join(t.TempDir(), "agent.tar")
	if code, _, errs := tern(t, home, "", "capsule", "export", held, "-o", tar); code != 0 || !strings.Contains(errs, "exported "+id) {
		t.Fatalf("export of the node's folder: exit %d, %q", code, errs)
	}
	if code, _, errs := tern(t, home, "", "capsule", "export", dir, "-o", tar+"2"); code != exitBadInput || !strings.Contains(errs, "tern capsule pack "+dir) {
		t.Fatalf("export of another folder: exit %d, %q", code, errs)
	}
	if code, _, errs := tern(t, home, "", "capsule", "export", id, "-o", tar); code != exitBadInput || !strings.Contains(errs, "--force") {
		t.Fatalf("export over an existing tar: exit %d, %q", code, errs)
	}
	mustTern(t, home, "", "capsule", "export", id, "-o", tar, "--force")
	// The node's chain of the agent is claimed: another copy cannot be
	// signed meanwhile, and a command in another process says so at once.
	cmd := ternProcess(home, draftLine("in the old copy"), "journal", "append", dir)
	b, err := cmd.CombinedOutput()
	if err == nil || cmd.ProcessState.ExitCode() != exitFailed || !strings.Contains(string(b), "running tern node") {
		t.Fatalf("append to another copy while the node writes the agent: %v, %s", err, b)
	}
}

// A home whose key was deleted, holding capsules, is refused with what to
// do, never given a new identity silently.
func TestAMissingKeyInAHomeInUseIsRefused(t *testing.T) {
	home := t.TempDir()
	runNodeAndStop(t, home)
	dir := newAgent(t, home)
	mustTern(t, home, "", "peer", "add", "12D3KooWRBy97UB99e3J6hiPesre1MZeuNQvfan4gBziswrRJsNK")
	os.Remove(filepath.Join(home, node.KeyFile))
	code, _, errs := tern(t, home, draftLine("x"), "journal", "append", dir)
	if code != exitBadInput || !strings.Contains(errs, "--new-identity") {
		t.Fatalf("exit %d, %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(home, node.KeyFile)); err == nil {
		t.Fatal("a new key was written")
	}
}

func runNodeAndStop(t *testing.T, home string) {
	t.Helper()
	runNode(t, home).Close()
}

// Event types only tern's commands write, with the content they name,
// cannot be appended by hand.
func TestTypesOnlyTernWritesAreRefusedAtAppend(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	before := mustTern(t, home, "", "journal", "log", dir, "--json")
	for typ, cmd := range map[string]string{
		"chain.healed":       "tern capsule heal",
		"workspace.snapshot": "tern capsule snapshot",
		"file.updated":       "tern capsule accept",
	} {
		t.Run(typ, func(t *testing.T) {
			code, _, errs := tern(t, home, `{"type":"`+typ+`","body":{}}`+"\n", "journal", "append", dir)
			if code != exitBadInput || !strings.Contains(errs, cmd) {
				t.Fatalf("exit %d, %q", code, errs)
			}
		})
	}
	if after := mustTern(t, home, "", "journal", "log", dir, "--json"); after != before {
		t.Fatal("the journal changed")
	}
}

// Restoring an older copy into the folder last written (a backup, a
// re-unpacked export) would fork the machine's chain: the next write is
// refused, saying so, and heal takes the chain over when the newer events
// are lost for good.
func TestAnOlderCopyRestoredInPlaceIsRefused(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	old := filepath.Join(t.TempDir(), "old.tar")
	mustTern(t, home, "", "capsule", "pack", dir, "-o", old)
	mustTern(t, home, draftLine("only in the newer copy"), "journal", "append", dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	mustTern(t, home, "", "capsule", "unpack", old, dir)
	code, _, errs := tern(t, home, draftLine("would fork"), "journal", "append", dir)
	if code != exitBadInput || !strings.Contains(errs, "replaced by an older copy") || !strings.Contains(errs, "tern capsule heal") {
		t.Fatalf("append to a restored older copy: exit %d, %q", code, errs)
	}
	mustTern(t, home, "", "capsule", "heal", dir)
	mustTern(t, home, draftLine("after taking the chain over"), "journal", "append", dir)
	mustTern(t, home, "", "capsule", "verify", dir)
}
