package node

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/session"
	"github.com/tern-dev/tern/store"
)

// A home restored from an old backup, the sequence a person meets: back up
// a's home, append three events on a (acknowledged), move the agent to b
// (epoch 2, or the next if b had seen 2), stop both, restore a's old home
// and start it while b is down, use it (a turn, unless --strict keeps it
// from running alone), then start b. Within one exchange a steps down
// (retired, naming b at the move's epoch, new sessions refused with 409
// naming b); every acknowledged event reads on
// both copies; the turn a ran under the ended epoch is set aside on both;
// both copies verify with no command run; a's next edit continues its chain.
func TestAHomeRestoredFromABackupStepsDownAndLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts nodes")
	}
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone it runs", true: "strict"}[strict], func(t *testing.T) {
			overBoth(t, func(t *testing.T, tr transport) {
				cfgA := Config{SyncInterval: time.Hour, Tick: 20 * time.Millisecond, Strict: strict}
				homeA, homeB := t.TempDir(), t.TempDir()
				a, b := tr.startWith(t, homeA, cfgA), tr.startAt(t, homeB)
				connectAll(t, a, b)
				agent := heldBy(t, a, nil)
				say(t, a, agent, "in the backup")
				a.Close()
				backup := copyHome(t, homeA)
				a = tr.startWith(t, homeA, cfgA)
				connectAll(t, a, b)
				eventually(t, "a runs the agent again", func() bool { return a.runs(agent) })
				var acked []*journal.Event
				for i := range 3 {
					acked = append(acked, say(t, a, agent, fmt.Sprintf("acknowledged %d, after the backup", i)))
				}
				moved := mustMigrate(t, a, b, agent).Epoch // 2, or 3 if b had seen 2 (a stale refusal, proposed again)
				a.Close()
				b.Close()

				restoreHome(t, backup, homeA)
				restored := tr.startWith(t, homeA, cfgA) // b is down
				var staleTurn []*journal.Event
				if strict {
					// It does not run alone: what it writes is an offline
					// edit (epoch 0), which stands.
					if e := say(t, restored, agent, "written alone, offline"); e.Epoch != 0 {
						t.Fatalf("the strict restored node wrote at epoch %d alone", e.Epoch)
					}
				} else {
					eventually(t, "the restored node runs the agent alone", func() bool { return restored.runs(agent) })
					sessionID := newSession(t, restored, agent)
					_, turn := startTurn(t, restored, sessionID, map[string]any{"text": "hello from the restored home"})
					turnID := turn["id"].(string)
					eventually(t, "the turn on the restored node completes", func() bool {
						return getTurn(t, restored, sessionID, turnID).Status == session.Completed
					})
					evs, _ := restored.store.Events(agent, "")
					for _, e := range evs {
						if e.Session == sessionID {
							staleTurn = append(staleTurn, e)
							if e.Epoch != 1 {
								t.Fatalf("the restored node wrote its turn at epoch %d", e.Epoch)
							}
						}
					}
				}

				b = tr.startAt(t, homeB)
				connectAll(t, restored, b)
				eventually(t, fmt.Sprintf("the restored node steps down, naming b at epoch %d", moved), func() bool {
					st, _ := restored.holders.State(agent)
					return st.State == "retired" && st.Holder == (fencing.Holder{Peer: b.info.PeerID, Epoch: moved}) && !restored.runs(agent)
				})
				var refused map[string]any
				if code := callAPI(t, restored, "POST", "/v1/agents/"+agent+"/sessions", nil, &refused); code != 409 || refused["peer"] != b.info.PeerID {
					t.Fatalf("a new session on the restored node: %d %v, want 409 naming b", code, refused)
				}
				eventually(t, "b runs the agent after its startup check", func() bool { return b.runs(agent) })
				newSession(t, b, agent) // b alone accepts sessions

				eventually(t, "both copies hold the same events", func() bool {
					va, _ := restored.store.Vector(agent)
					vb, _ := b.store.Vector(agent)
					ea, _ := restored.store.Events(agent, "")
					eb, _ := b.store.Events(agent, "")
					return vecEqual(va, vb) && len(ea) == len(eb)
				})
				for _, n := range []*Node{restored, b} {
					evs, _ := n.store.Events(agent, "")
					view, _ := journal.Readable(evs)
					read := idsOf(view)
					for _, e := range acked {
						if !slices.Contains(read, e.ID) {
							t.Fatalf("%s: the acknowledged %s is not read", n.info.PeerID, e.Body)
						}
					}
					why := journal.Quarantined(evs)
					for _, e := range staleTurn {
						if why[e.ID] != journal.AsideStaleEpoch {
							t.Fatalf("%s: the stale turn's %s is %q, want it set aside as %s", n.info.PeerID, e.Type, why[e.ID], journal.AsideStaleEpoch)
						}
					}
					rep, err := capsule.Verify(filepath.Join(n.home, store.CapsulesDir, agent), capsule.VerifyOptions{})
					if err != nil || !rep.OK() {
						t.Fatalf("%s: verify: %v %+v", n.info.PeerID, err, rep.Problems)
					}
				}
				next := say(t, restored, agent, "an edit on the copy, after the reconnect")
				if next.Epoch != 0 || next.Seq <= acked[2].Seq {
					t.Fatalf("the restored node's next event: epoch %d seq %d, want epoch 0 after seq %d", next.Epoch, next.Seq, acked[2].Seq)
				}
				evs, _ := restored.store.Events(agent, "")
				if probs := journal.Check(evs); len(probs) != 0 {
					t.Fatalf("after the next edit: %v", probs)
				}
			})
		})
	}
}

// restoreHome puts the backup of a stopped node's home back in its place,
// as a person restoring it from a backup does.
func restoreHome(t *testing.T, backup, home string) {
	t.Helper()
	if err := os.RemoveAll(home); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(home, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(home, KeyFile), 0o600); err != nil {
		t.Fatal(err)
	}
}
