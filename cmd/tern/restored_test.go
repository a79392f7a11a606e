package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
)

// journalLine is what tern journal log --json prints of an event.
type journalLine struct {
	ID          string `json:"id"`
	Machine     string `json:"machine"`
	Epoch       uint64 `json:"epoch"`
	Session     string `json:"session"`
	Type        string `json:"type"`
	Quarantined string `json:"quarantined"`
}

// journalOf is the agent's journal in d's node, as tern journal log --json
// prints it.
func journalOf(t *testing.T, d *daemon, agent string) []journalLine {
	t.Helper()
	code, out, errs := ternQuiet(d.home, "journal", "log", filepath.Join(d.home, store.CapsulesDir, agent), "--json")
	if code != 0 {
		t.Fatalf("tern journal log: exit %d: %s", code, errs)
	}
	var lines []journalLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l journalLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("tern journal log --json: %v: %s", err, sc.Text())
		}
		lines = append(lines, l)
	}
	return lines
}

// restoreDaemonHome puts the backup of a stopped daemon's home back in its
// place, as a person restoring it from a backup does.
func restoreDaemonHome(t *testing.T, backup, home string) {
	t.Helper()
	if err := os.RemoveAll(home); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(home, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(home, node.KeyFile), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The restored-home sequence as a person meets it, through the CLI and the
// HTTP API, between two tern node processes on QUIC: back up n0's home,
// run turns on n0, move the agent to n1, stop both, restore n0's old home
// and start it while n1 is down, use it, start n1. n0 then steps down at
// once (tern holder: retired, n1 at epoch 2), refuses a new session with
// 409 naming n1, and every event acknowledged before the move reads on both
// copies, both verify, and the turn n0 ran alone is set aside; with
// --strict n0 runs nothing alone.
func TestARestoredHomeThroughTheCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs daemons")
	}
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone it runs", true: "strict"}[strict], func(t *testing.T) {
			ds := pairedDaemons(t, true)
			n0, n1 := ds[0], ds[1]
			n0.strict = strict
			dir := filepath.Join(t.TempDir(), "agent")
			code, out, errs := ternQuiet(n0.home, "capsule", "new", dir, "--name", "restored")
			if code != 0 {
				t.Fatal(errs)
			}
			agent := strings.TrimSpace(out)
			if code, _, errs := ternQuiet(n0.home, "capsule", "import", dir); code != 0 {
				t.Fatal(errs)
			}
			turn := func(d *daemon, text string) (int, string) {
				t.Helper()
				code, _, errs := ternQuiet(d.home, "turn", agent, text)
				return code, errs
			}
			// A turn runs once the node is through its check with its
			// peers after a start (3 s when none answers).
			waitTurn := func(d *daemon, text string) {
				t.Helper()
				eventually(t, 30*time.Second, func() error {
					if code, errs := turn(d, text); code != 0 {
						return fmt.Errorf("tern turn on %s: exit %d: %s", filepath.Base(d.home), code, errs)
					}
					return nil
				})
			}
			waitTurn(n0, "in the backup")
			n0.kill()
			backup := filepath.Join(t.TempDir(), "backup")
			if err := os.CopyFS(backup, os.DirFS(n0.home)); err != nil {
				t.Fatal(err)
			}
			n0.start()
			waitTurn(n0, "acknowledged after the backup")
			var acked []string
			for _, l := range journalOf(t, n0, agent) {
				acked = append(acked, l.ID)
			}
			code, out, errs = ternQuiet(n0.home, "migrate", agent, "--to", "n1", "--json")
			var moved struct {
				Outcome string `json:"outcome"`
				Epoch   uint64 `json:"epoch"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &moved) != nil || moved.Outcome != "committed" {
				t.Fatalf("tern migrate: exit %d: %s %s", code, out, errs)
			}
			n0.kill()
			n1.kill()

			restoreDaemonHome(t, backup, n0.home)
			n0.start() // n1 is down
			var staleSession string
			if strict {
				// Past the 3 s after which a node that is not strict runs
				// the agent alone, the strict one still waits.
				eventually(t, 30*time.Second, func() error {
					code, out, _ := ternQuiet(n0.home, "holder", agent)
					if code == 0 && strings.Contains(out, "runs only once one of them answers") && checkedFor(out) >= 4*time.Second {
						return nil
					}
					return fmt.Errorf("the strict restored node: %s", out)
				})
				if code, errs := turn(n0, "from the restored home, alone"); code != 3 || !strings.Contains(errs, "--strict") {
					t.Fatalf("a turn on the strict restored node alone: exit %d: %s, want 3 saying it waits for a peer", code, errs)
				}
			} else {
				waitTurn(n0, "from the restored home, alone")
				for _, l := range journalOf(t, n0, agent) {
					if l.Type == "turn.started" && !slices.Contains(acked, l.ID) {
						staleSession = l.Session
					}
				}
			}

			n1.start()
			eventually(t, 20*time.Second, func() error {
				code, out, _ := ternQuiet(n0.home, "holder", agent, "--json")
				var r api.HolderReport
				if code == 0 && json.Unmarshal([]byte(out), &r) == nil && r.State == "retired" && r.Holder.Epoch == moved.Epoch && r.Holder.Peer == peerIDOf(t, n1) {
					return nil
				}
				return fmt.Errorf("n0 did not step down after n1's start: %s", out)
			})
			if code, _, errs := ternQuiet(n0.home, "session", "new", agent); code != 2 || !strings.Contains(errs, "n1") && !strings.Contains(errs, peerIDOf(t, n1)) {
				t.Fatalf("tern session new on n0: exit %d: %s, want 2 naming n1", code, errs)
			}
			cl, err := api.Dial(n0.home)
			if err != nil {
				t.Fatal(err)
			}
			var refused *api.APIError
			if err := cl.Do(t.Context(), http.MethodPost, "/v1/agents/"+agent+"/sessions", nil, nil); !errors.As(err, &refused) || refused.Status != 409 {
				t.Fatalf("POST /v1/agents/%s/sessions on n0: %v, want 409", agent, err)
			}
			waitTurn(n1, "after the move, on n1")

			if code, _, errs := ternQuiet(n0.home, "sync", "wait", agent, "--peer", "n1", "--timeout", "60s"); code != 0 {
				t.Fatalf("tern sync wait: %s", errs)
			}
			for _, d := range []*daemon{n0, n1} {
				lines := journalOf(t, d, agent)
				why := map[string]string{}
				for _, l := range lines {
					why[l.ID] = l.Quarantined
				}
				for _, id := range acked {
					if q, ok := why[id]; !ok || q != "" {
						t.Fatalf("%s: acknowledged event %s is %q (present: %v)", filepath.Base(d.home), id, q, ok)
					}
				}
				for _, l := range lines {
					if staleSession != "" && l.Session == staleSession && l.Quarantined != "stale_epoch" {
						t.Fatalf("%s: the turn run alone under the ended epoch: %s is %q, want stale_epoch", filepath.Base(d.home), l.Type, l.Quarantined)
					}
				}
				if code, out, errs := ternQuiet(d.home, "capsule", "verify", filepath.Join(d.home, store.CapsulesDir, agent)); code != 0 {
					t.Fatalf("%s: tern capsule verify: exit %d: %s %s", filepath.Base(d.home), code, out, errs)
				}
			}
		})
	}
}

func peerIDOf(t *testing.T, d *daemon) string {
	t.Helper()
	var info node.Info
	data, err := os.ReadFile(filepath.Join(d.home, node.InfoFile))
	if err != nil || json.Unmarshal(data, &info) != nil {
		t.Fatalf("node.json of %s: %v", d.home, err)
	}
	return info.PeerID
}

// checkedFor reads how long tern holder says the node has been checking
// with its peers: "… (for 4.2s so far)".
func checkedFor(holder string) time.Duration {
	_, rest, ok := strings.Cut(holder, "(for ")
	if !ok {
		return 0
	}
	d, _, _ := strings.Cut(rest, " so far)")
	v, err := time.ParseDuration(d)
	if err != nil {
		return 0
	}
	return v
}
