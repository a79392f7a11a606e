package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/custody"
	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
)

// connectAll pairs and connects every two of nodes.
func connectAll(t *testing.T, nodes ...*Node) {
	t.Helper()
	for i, a := range nodes {
		for _, b := range nodes[i+1:] {
			if err := link(a, b); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// link pairs and connects a and b (connectAll, for another goroutine).
// Paired, b may dial a at the same moment: two TCP dials that cross can
// fail their handshakes, so it dials again until they are connected.
func link(a, b *Node) error {
	if err := a.peers.Add(Peer{ID: b.info.PeerID, Name: "b", Addrs: hostAddrs(b)}); err != nil {
		return err
	}
	if err := b.peers.Add(Peer{ID: a.info.PeerID, Name: "a", Addrs: hostAddrs(a)}); err != nil {
		return err
	}
	var err error
	if poll(10*time.Second, func() bool {
		err = a.host.Connect(context.Background(), peer.AddrInfo{ID: b.host.ID(), Addrs: b.host.Addrs()})
		if err == nil || a.host.Network().Connectedness(b.host.ID()) == network.Connected {
			return true
		}
		if sw, ok := a.host.Network().(*swarm.Swarm); ok {
			sw.Backoff().Clear(b.host.ID()) // else the next try fails at once: "dial backoff"
		}
		return false
	}) {
		return nil
	}
	return err
}

// acceptEdit writes content to file of the capsule folder dir, as a
// person editing it would, and accepts the edit as n's machine.
func acceptEdit(t testing.TB, n *Node, dir, file, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := capsule.OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.AcceptEdits(context.Background(), n.id); err != nil {
		t.Fatal(err)
	}
}

// heldBy makes a capsule that n made (its manifest names n at epoch 0)
// and imports it into n, which then holds the agent at epoch 1.
func heldBy(t testing.TB, n *Node, edit func(dir string)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	c, err := capsule.New(dir, "mover", n.id)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if edit != nil {
		edit(dir)
	}
	id, _, err := n.Import(dir)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the creator runs its agent", func() bool {
		st, _ := n.holders.State(id)
		return st.State == "active" && n.runs(id)
	})
	return id
}

func say(t *testing.T, n *Node, agent, text string) *journal.Event {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": text}}})
	evs, err := n.Append(context.Background(), agent, []journal.Draft{{Type: "message", Session: "s", Body: body}})
	if err != nil {
		t.Fatal(err)
	}
	return evs[0]
}

func mustMigrate(t *testing.T, from, to *Node, agent string) Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := from.Migrate(ctx, agent, to.host.ID())
	if err != nil {
		t.Fatal(err)
	}
	if out.Outcome != "committed" {
		t.Fatalf("migration %s: %+v", out.Outcome, out)
	}
	t.Logf("%s -> %s: %+v", from.host.ID().ShortString(), to.host.ID().ShortString(), out)
	return out
}

func holderState(t *testing.T, n *Node, agent string) (string, uint64) {
	t.Helper()
	st, err := n.holders.State(agent)
	if err != nil {
		t.Fatal(err)
	}
	return st.State, st.Epoch
}

func TestAnAgentMigratesToAPeerAndBack(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		connectAll(t, a, b)
		agent := heldBy(t, a, nil)
		if e := say(t, a, agent, "on a"); e.Epoch != 1 {
			t.Fatalf("the holder appends at epoch %d, want 1", e.Epoch)
		}

		// Epoch 2, or 3 when b learnt of 2 from a as a proposed it (an
		// answer to b's ask on connecting) and refused it as stale.
		out := mustMigrate(t, a, b, agent)
		there := out.Epoch
		if there < 2 || there > 3 || len(out.Phases) == 0 || out.FrozenMS < 0 {
			t.Fatalf("outcome %+v", out)
		}
		if st, e := holderState(t, a, agent); st != "retired" || e != 1 {
			t.Fatalf("a is %s at %d after moving the agent, want retired at 1", st, e)
		}
		if st, e := holderState(t, b, agent); st != "active" || e != there || !b.runs(agent) {
			t.Fatalf("b is %s at %d, want active at %d and running", st, e, there)
		}
		if e := say(t, b, agent, "on b"); e.Epoch != there {
			t.Fatalf("the new holder appends at epoch %d, want %d", e.Epoch, there)
		}
		if e := say(t, a, agent, "an offline edit on a"); e.Epoch != 0 {
			t.Fatalf("the old holder appends at epoch %d, want 0 (an offline edit)", e.Epoch)
		}
		var mh capsule.Holder
		b.store.With(agent, func(d *capsule.Dir) error { mh = d.Manifest().Holder; return nil })
		if mh.Peer != b.info.PeerID || mh.Epoch != there {
			t.Fatalf("b's manifest names holder %+v", mh)
		}
		if _, err := os.Stat(filepath.Join(b.home, WorkspacesDir, agent)); err != nil {
			t.Fatalf("b has no prepared workspace for the agent: %v", err)
		}

		back := mustMigrate(t, b, a, agent)
		if back.Epoch <= there {
			t.Fatalf("back at epoch %d, want above %d", back.Epoch, there)
		}
		if st, e := holderState(t, a, agent); st != "active" || e != back.Epoch || !a.runs(agent) || b.runs(agent) {
			t.Fatalf("a is %s at %d after taking it back", st, e)
		}
	})
}

func TestAChainOfMigrationsEndsWhereItStarted(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b, c := tr.start(t, t.TempDir()), tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		connectAll(t, a, b, c)
		agent := heldBy(t, a, nil)
		epoch := uint64(1)
		for i, hop := range [][2]*Node{{a, b}, {b, c}, {c, a}} {
			say(t, hop[0], agent, "before a hop")
			out := mustMigrate(t, hop[0], hop[1], agent)
			// One above the last, or two when the target learnt of the
			// epoch as it was proposed and refused it as stale.
			if out.Epoch <= epoch || out.Epoch > epoch+2 {
				t.Fatalf("hop %d at epoch %d after %d", i, out.Epoch, epoch)
			}
			epoch = out.Epoch
			runners := 0
			for _, n := range []*Node{a, b, c} {
				if n.runs(agent) {
					runners++
				}
			}
			if runners != 1 || !hop[1].runs(agent) {
				t.Fatalf("after hop %d, %d nodes run the agent", i, runners)
			}
			if i == 1 {
				// a last heard b take it; asked, c says it holds the new epoch.
				rep, err := a.Holder(t.Context(), agent)
				if err != nil || !strings.Contains(rep.Note, c.info.PeerID) || !strings.Contains(rep.Note, fmt.Sprintf("epoch %d", epoch)) {
					t.Fatalf("a's holder report after b moved it on to c: %+v %v", rep, err)
				}
			}
		}
		// Every node holds the same events in the end.
		va, _ := a.store.Vector(agent)
		eventually(t, "c holds a's events", func() bool {
			vc, _ := c.store.Vector(agent)
			return vecEqual(va, vc)
		})
	})
}

func TestAMigrationTheTargetCannotPrepareAborts(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a := tr.start(t, t.TempDir())
		homeB := t.TempDir()
		b, err := Start(homeB, Config{Listen: []string{tr.listen}, NoMDNS: true, SyncInterval: 100 * time.Millisecond,
			Secrets: mapSecrets{}}, testLog(homeB))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		connectAll(t, a, b)
		// The environment needs a secret the target does not have.
		agent := heldBy(t, a, func(dir string) {
			acceptEdit(t, a, dir, capsule.EnvironmentFile, `{"workdir":"workspace","packages":[],"env":{},"secrets":["DB_PASSWORD"]}`+"\n")
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := a.Migrate(ctx, agent, b.host.ID())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("outcome %+v", out)
		if out.Outcome != "aborted" || !strings.Contains(out.Reason, "DB_PASSWORD") {
			t.Fatalf("outcome %+v, want aborted, naming the secret", out)
		}
		if st, e := holderState(t, a, agent); st != "active" || e != 1 || !a.runs(agent) || b.runs(agent) {
			t.Fatalf("after the abort a is %s at %d", st, e)
		}
		eventually(t, "b empties its staging area", func() bool {
			_, err := os.Stat(filepath.Join(b.home, StagingDir, agent))
			return errors.Is(err, os.ErrNotExist)
		})
		say(t, a, agent, "still running here")
	})
}

func TestMigratingToAPeerThatIsDownFreezesNothing(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		connectAll(t, a, b)
		agent := heldBy(t, a, nil)
		b.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := a.Migrate(ctx, agent, b.host.ID())
		if err != nil || out.Outcome != "aborted" || out.FrozenMS != 0 || !strings.Contains(out.Reason, "not connected") || strings.Contains(out.Reason, "dial") {
			t.Fatalf("a migration to a node that is down: %+v, %v; want aborted before any freeze, saying b is not connected", out, err)
		}
		if st, _ := holderState(t, a, agent); st != "active" || !a.runs(agent) {
			t.Fatalf("a is %s after the failed migration", st)
		}
		say(t, a, agent, "appends work")
	})
}

func TestAHolderReportsItselfAndItsPeers(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		connectAll(t, a, b)
		agent := heldBy(t, a, nil)
		moved := mustMigrate(t, a, b, agent)
		rep, err := a.Holder(context.Background(), agent)
		if err != nil {
			t.Fatal(err)
		}
		if rep.State != "retired" || len(rep.Peers) != 1 || rep.Peers[0].State != "active" || rep.Peers[0].Epoch != moved.Epoch {
			t.Fatalf("report %+v", rep)
		}
	})
}

// loseFirst returns a hook that loses the first message of type typ.
func loseFirst(typ fencing.MsgType) func(fencing.Message) bool {
	var mu sync.Mutex
	lost := false
	return func(m fencing.Message) bool {
		mu.Lock()
		defer mu.Unlock()
		if m.Type == typ && !lost {
			lost = true
			return true
		}
		return false
	}
}

// phaseFault strikes a migration between two real nodes once, at one
// phase: when the source sends the phase's request (or, for a lost reply
// and a target crash, when the target sends its reply to it).
type phaseFault struct {
	request, reply fencing.MsgType
	fault          string // "request lost", "reply lost", "target crash", "source crash", "link cut"

	mu      sync.Mutex
	struck  bool
	crashed *Node     // the node the fault closed, if any
	cutTill time.Time // a cut link loses everything until then
	nodes   map[string]*Node
	done    chan struct{} // closed once the crashed node has stopped
}

// hook is self's loseMigrate: it reports whether msg is lost.
func (f *phaseFault) hook(self string) func(fencing.Message) bool {
	return func(m fencing.Message) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case f.crashed != nil && f.crashed == f.nodes[self]:
			return true // a dead node sends nothing
		case time.Now().Before(f.cutTill):
			return true
		case f.struck:
			return false
		}
		var crash *Node
		switch {
		case self == "a" && m.Type == f.request && f.fault == "request lost":
		case self == "b" && m.Type == f.reply && f.fault == "reply lost":
		case self == "b" && m.Type == f.reply && f.fault == "target crash":
			crash = f.nodes["b"] // it handled the request and persisted; its reply dies with it
		case self == "a" && m.Type == f.request && f.fault == "source crash":
			crash = f.nodes["a"]
		case self == "a" && m.Type == f.request && f.fault == "link cut":
			f.cutTill = time.Now().Add(time.Second)
			a, b := f.nodes["a"], f.nodes["b"]
			go a.host.Network().ClosePeer(b.host.ID())
		default:
			return false
		}
		f.struck = true
		if crash != nil {
			f.crashed = crash
			go func() { crash.Close(); close(f.done) }()
		}
		return true
	}
}

// Every phase of a migration × every fault, on real hosts on loopback: the
// request lost, the reply lost, the target or the source crashing at that
// moment (and restarting from its home), the link cut for a second. Each
// ends with exactly one node running the agent (the one the outcome names
// when the source lived to tell it), the other one retired or a copy, and
// no staging area left.
func TestEveryPhaseUnderEveryFaultEndsWithOneRunner(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		if testing.Short() {
			t.Skip("waits for retries and restarts")
		}
		phases := []struct {
			name           string
			request, reply fencing.MsgType
		}{
			{"propose", fencing.MsgPropose, fencing.MsgAccept},
			{"prepare", fencing.MsgPrepare, fencing.MsgPrepared},
			{"activate", fencing.MsgActivate, fencing.MsgDecision},
		}
		for _, ph := range phases {
			for _, fault := range []string{"request lost", "reply lost", "target crash", "source crash", "link cut"} {
				t.Run(ph.name+"/"+fault, func(t *testing.T) {
					f := &phaseFault{request: ph.request, reply: ph.reply, fault: fault, nodes: map[string]*Node{}, done: make(chan struct{})}
					homes := map[string]string{"a": t.TempDir(), "b": t.TempDir()}
					for _, name := range []string{"a", "b"} {
						n, err := Start(homes[name], Config{Listen: []string{tr.listen}, NoMDNS: true,
							SyncInterval: time.Hour, Tick: 20 * time.Millisecond, loseMigrate: f.hook(name)}, testLog(homes[name]))
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { n.Close() })
						f.mu.Lock()
						f.nodes[name] = n
						f.mu.Unlock()
					}
					a, b := f.nodes["a"], f.nodes["b"]
					connectAll(t, a, b)
					agent := heldBy(t, a, nil)
					// A crashed target restarts from its home while the source
					// waits; a crashed source after its Migrate has returned.
					restarted := make(chan *Node, 1)
					go func() {
						<-f.done
						if f.crashed == b {
							back, err := Start(homes["b"], Config{Listen: []string{tr.listen}, NoMDNS: true, SyncInterval: time.Hour, Tick: 20 * time.Millisecond}, testLog(homes["b"]))
							if err == nil {
								err = link(a, back)
							}
							if err != nil {
								t.Error(err)
								back = nil
							}
							restarted <- back
						}
					}()
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					out, err := a.Migrate(ctx, agent, b.host.ID())
					f.mu.Lock()
					struck, crashed := f.struck, f.crashed
					f.mu.Unlock()
					if !struck {
						t.Fatalf("the fault never struck (outcome %+v, %v)", out, err)
					}
					want := (*Node)(nil)
					if crashed != a {
						if err != nil {
							t.Fatal(err)
						}
						switch out.Outcome {
						case "committed":
							want = b
						case "aborted":
							want = a
						case "frozen": // resolved in the background
						default:
							t.Fatalf("outcome %+v", out)
						}
					}
					switch crashed {
					case a:
						<-f.done
						a = tr.startAt(t, homes["a"])
						connectAll(t, a, b)
					case b:
						back := <-restarted
						if back == nil {
							t.FailNow()
						}
						t.Cleanup(func() { back.Close() })
						if want == b {
							want = back
						}
						b = back
						connectAll(t, a, b)
					}
					// A target left staging by a crashed source drops it after
					// Staging ticks of silence (12 s at these ticks); a warmed
					// workspace lingers as long.
					wait := time.Duration(custody.Timing.Staging+100) * 20 * time.Millisecond
					within(t, wait, "exactly one node runs the agent, the other has retired it or holds a copy", func() bool {
						sa, _ := a.holders.State(agent)
						sb, _ := b.holders.State(agent)
						one := (a.runs(agent) && sa.State == "active" && (sb.State == "copy" || sb.State == "retired")) ||
							(b.runs(agent) && sb.State == "active" && (sa.State == "copy" || sa.State == "retired"))
						return one && (want == nil || want.runs(agent))
					})
					within(t, wait, "no staging area is left", func() bool {
						_, ea := os.Stat(filepath.Join(a.home, StagingDir, agent))
						_, eb := os.Stat(filepath.Join(b.home, StagingDir, agent))
						return errors.Is(ea, os.ErrNotExist) && errors.Is(eb, os.ErrNotExist)
					})
					runner := map[bool]string{true: "a", false: "b"}[a.runs(agent)]
					t.Logf("outcome %q (%v); %s runs the agent", out.Outcome, err, runner)
				})
			}
		}
	})
}

// startAt runs a node on home with fast fencing ticks.
func startAt(t *testing.T, home string) *Node {
	t.Helper()
	return tcp.startAt(t, home)
}

// copyHome copies a stopped node's home, as a backup would.
func copyHome(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "home")
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(to, KeyFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}

// A node restored from a copy of its home made before it handed the agent
// on wakes up believing it still holds it. Offline, it runs and writes under
// its old epoch; once it meets the new holder, those events are set aside
// there, and its attempt to move the agent is refused as stale.
func TestAStaleWakeUpIsFencedOff(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		if testing.Short() {
			t.Skip("restarts nodes")
		}
		homeA, homeB := t.TempDir(), t.TempDir()
		a, b := tr.startAt(t, homeA), tr.startAt(t, homeB)
		connectAll(t, a, b)
		agent := heldBy(t, a, nil)
		// b holds a copy before the backup (a made it a member as it gave
		// it one): a restored home that lacks what the real one wrote
		// later is the case under test, not a member added meanwhile.
		eventually(t, "b holds a copy, a member", func() bool {
			m, err := a.store.Members(agent)
			return err == nil && m.Has(b.id.Machine()) && b.store.Holds(agent)
		})
		say(t, a, agent, "before the backup")
		a.Close()
		backup := copyHome(t, homeA)
		a = tr.startAt(t, homeA)
		connectAll(t, a, b)
		eventually(t, "a runs the agent again", func() bool { return a.runs(agent) })
		moved := mustMigrate(t, a, b, agent) // epoch 2, or 3 if b learnt of 2 as it was proposed
		a.Close()
		b.Close()

		stale := tr.startAt(t, backup) // b is down: the startup check finds no peer and runs offline
		eventually(t, "the restored node runs the agent offline", func() bool { return stale.runs(agent) })
		if e := say(t, stale, agent, "written by a stale holder"); e.Epoch != 1 {
			t.Fatalf("the stale node wrote at epoch %d", e.Epoch)
		}

		b = tr.startAt(t, homeB)
		connectAll(t, stale, b)
		stale.SyncPeer(context.Background(), b.host.ID())
		evs, err := b.store.Events(agent, "")
		if err != nil {
			t.Fatal(err)
		}
		view, aside := journal.Readable(evs)
		found := false
		for _, e := range aside {
			if string(e.Body) == `{"content":[{"text":"written by a stale holder","type":"text"}],"role":"user"}` {
				found = true
			}
		}
		if !found {
			t.Fatalf("b reads the stale event: %d read, %d aside", len(view), len(aside))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := stale.Migrate(ctx, agent, b.host.ID())
		if err == nil && out.Outcome == "committed" {
			t.Fatalf("the stale node moved the agent: %+v", out)
		}
		t.Logf("the stale node's attempt: %+v, %v", out, err)
		eventually(t, fmt.Sprintf("b runs the agent at epoch %d", moved.Epoch), func() bool {
			st, e := holderState(t, b, agent)
			return st == "active" && e == moved.Epoch && b.runs(agent)
		})
	})
}

// startLosing runs a node whose outgoing migrate messages of the given
// types are all lost.
func startLosing(t *testing.T, types ...fencing.MsgType) *Node {
	t.Helper()
	home := t.TempDir()
	n, err := Start(home, Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, SyncInterval: time.Hour, Tick: 20 * time.Millisecond,
		loseMigrate: func(m fencing.Message) bool { return slices.Contains(types, m.Type) }}, testLog(home))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// frozenForGood leaves a frozen past the point of no return: b activates,
// and its every decision is lost.
func frozenForGood(t *testing.T) (a, b *Node, agent string) {
	t.Helper()
	a, b = startAt(t, t.TempDir()), startLosing(t, fencing.MsgDecision)
	connectAll(t, a, b)
	agent = heldBy(t, a, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	out, err := a.Migrate(ctx, agent, b.host.ID())
	if err != nil || out.Outcome != "frozen" {
		t.Fatalf("migrate: %+v, %v; want frozen", out, err)
	}
	if st, _ := holderState(t, a, agent); st != "frozen" {
		t.Fatalf("a is %s", st)
	}
	return a, b, agent
}

func TestAnOperatorRetiresASourceFrozenForGood(t *testing.T) {
	a, b, agent := frozenForGood(t)
	if !b.runs(agent) {
		t.Fatal("b did not activate")
	}
	if _, err := a.Resolve(context.Background(), agent, "retire"); err != nil {
		t.Fatal(err)
	}
	if st, _ := holderState(t, a, agent); st != "retired" || a.runs(agent) {
		t.Fatalf("a is %s after retire", st)
	}
	say(t, b, agent, "b runs it")
}

func TestAnOperatorResumesWhenTheTargetIsGoneForGood(t *testing.T) {
	a, b, agent := frozenForGood(t)
	_, activated := holderState(t, b, agent)
	b.Close() // its disk died
	msg, err := a.Resolve(context.Background(), agent, "resume")
	if err != nil {
		t.Fatal(err)
	}
	st, e := holderState(t, a, agent)
	if st != "active" || e <= activated || !a.runs(agent) {
		t.Fatalf("a is %s at %d after resume (%s): want active above epoch %d, b's", st, e, msg, activated)
	}
	if ev := say(t, a, agent, "back here"); ev.Epoch != e {
		t.Fatalf("appends at epoch %d, want %d", ev.Epoch, e)
	}
}

// Two machines that lost their holder registries at once wait for each
// other (neither can relearn from the other), say so in tern holder, and
// an operator's resume on the one with the newest copy resolves it.
func TestTwoNodesThatLostTheirRegistriesWaitUntilAnOperatorResumesOne(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts nodes")
	}
	homeA, homeB := t.TempDir(), t.TempDir()
	a, b := startAt(t, homeA), startAt(t, homeB)
	connectAll(t, a, b)
	agent := heldBy(t, a, nil)
	moved := mustMigrate(t, a, b, agent)
	a.Close()
	b.Close()
	for _, home := range []string{homeA, homeB} {
		if err := os.Remove(filepath.Join(home, RegistryFile)); err != nil {
			t.Fatal(err)
		}
	}
	a, b = startAt(t, homeA), startAt(t, homeB)
	connectAll(t, a, b)
	for _, n := range []*Node{a, b} {
		eventually(t, "the node says it waits for a peer that lost its registry too", func() bool {
			st, err := n.holders.State(agent)
			return err == nil && st.State == "unknown" && strings.Contains(st.Note, "lost its registry too") &&
				strings.Contains(st.Note, "tern migrate resolve "+agent+" --resume --force")
		})
	}
	if a.runs(agent) || b.runs(agent) {
		t.Fatal("a node runs the agent while its registry is lost")
	}
	msg, err := b.Resolve(context.Background(), agent, "resume")
	if err != nil {
		t.Fatal(err)
	}
	st, e := holderState(t, b, agent)
	if st != "active" || e <= moved.Epoch || !b.runs(agent) {
		t.Fatalf("b is %s at %d after resume (%s): want active above epoch %d", st, e, msg, moved.Epoch)
	}
	eventually(t, "a relearns that b holds the agent", func() bool {
		st, err := a.holders.State(agent)
		return err == nil && st.State == "copy" && st.Holder.Epoch == e && !a.runs(agent)
	})
	if ev := say(t, b, agent, "resumed"); ev.Epoch != e {
		t.Fatalf("b appends at epoch %d, want %d", ev.Epoch, e)
	}
}

// A source that serves a corrupt blob: the target refuses every copy of it
// (each fails its hash check), so the migration aborts cleanly: the source
// runs the agent again, the target keeps no staging area. Once the blob is
// served whole, the same migration commits.
func TestACorruptBlobDuringTheTransferAbortsCleanly(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		if testing.Short() {
			t.Skip("waits for the migration to give up")
		}
		a, b := tr.startAt(t, t.TempDir()), tr.startAt(t, t.TempDir())
		connectAll(t, a, b)
		agent := heldBy(t, a, nil)
		blob := snapshotOn(t, a, agent, 3*protocol.BlobChunk)
		serveBlobsRotten(a, protocol.BlobChunk+10)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := a.Migrate(ctx, agent, b.host.ID())
		if err != nil {
			t.Fatal(err)
		}
		if out.Outcome != "aborted" {
			t.Fatalf("outcome %+v, want aborted", out)
		}
		t.Logf("aborted: %s", out.Reason)
		eventually(t, "a runs the agent again and b keeps no staging area", func() bool {
			_, err := os.Stat(filepath.Join(b.home, StagingDir, agent))
			return a.runs(agent) && !b.runs(agent) && errors.Is(err, os.ErrNotExist)
		})
		if b.store.HoldsBlob(agent, "", blob) {
			t.Fatal("b adopted the corrupt blob")
		}
		protocol.HandleBlob(a.host, protocol.Counted(a.store, a.transfers), a.log) // a serves it whole again
		mustMigrate(t, a, b, agent)
	})
}

// A target that activates and then loses its registry before its decision
// reaches the source: its journal still holds the holder.activated event it
// signed under the new epoch, so it relearns that it activated it and runs
// it, and the source, told so, retires: one runner, at the new epoch. (A
// target that signed nothing could not know, and the source would stay
// frozen, asking, rather than resume beside it.)
func TestATargetThatLostItsRegistryAfterActivatingRelearnsItFromItsJournal(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a node")
	}
	a, b, agent := frozenForGood(t) // b activated; its decision never reached a
	_, activated := holderState(t, b, agent)
	homeB := b.home
	b.Close()
	if err := os.Remove(filepath.Join(homeB, RegistryFile)); err != nil {
		t.Fatal(err)
	}
	b = startAt(t, homeB)
	connectAll(t, a, b)
	eventually(t, fmt.Sprintf("b runs epoch %d again and a retires", activated), func() bool {
		sb, eb := holderState(t, b, agent)
		sa, _ := holderState(t, a, agent)
		return sb == "active" && eb == activated && b.runs(agent) && sa == "retired" && !a.runs(agent)
	})
}

// A target on which the agent's model key does not resolve refuses to
// prepare: the migration aborts naming the secret, and commits once the
// secret is there.
func TestAMigrationToAMachineWithoutTheAgentsSecretAborts(t *testing.T) {
	targetSecrets := mapSecrets{}
	start := func(s mapSecrets) *Node {
		home := t.TempDir()
		n, err := Start(home, Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, SyncInterval: time.Hour,
			Tick: 20 * time.Millisecond, Secrets: s}, testLog(home))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	a, b := start(mapSecrets{"MODEL_KEY": "k"}), start(targetSecrets)
	connectAll(t, a, b)
	agent := heldBy(t, a, func(dir string) {
		acceptEdit(t, a, dir, capsule.AgentFile, `{"name":"mover","instructions":"","provider":"anthropic","model":"claude-sonnet-4-5","key_secret":"MODEL_KEY","tools":[]}`+"\n")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := a.Migrate(ctx, agent, b.host.ID())
	if err != nil || out.Outcome != "aborted" || !strings.Contains(out.Reason, "MODEL_KEY") {
		t.Fatalf("%+v %v: want aborted, naming the secret", out, err)
	}
	eventually(t, "a runs the agent again", func() bool { return a.runs(agent) })
	targetSecrets["MODEL_KEY"] = "k"
	mustMigrate(t, a, b, agent)
}

// A target without the command of one of the agent's stdio MCP servers
// refuses to prepare: the migration aborts naming the server and the
// command, the agent runs on at the source, and it moves once the command
// is installed.
func TestAMigrationToAMachineWithoutAnMCPServersCommandAborts(t *testing.T) {
	a, b := startNode(t, t.TempDir()), startNode(t, t.TempDir())
	connectAll(t, a, b)
	agent := heldBy(t, a, func(dir string) {
		acceptEdit(t, a, dir, capsule.AgentFile, `{"name":"mover","instructions":"","provider":"offline","model":"tern-offline","tools":[],`+
			`"mcp_servers":{"files":{"command":"tern-test-mcp-files","args":["--root","."]}}}`+"\n")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := a.Migrate(ctx, agent, b.host.ID())
	if err != nil || out.Outcome != "aborted" || !strings.Contains(out.Reason, `the MCP server files needs the command "tern-test-mcp-files"`) {
		t.Fatalf("%+v %v: want aborted, naming the server and its command", out, err)
	}
	eventually(t, "a runs the agent again", func() bool { return a.runs(agent) })

	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "tern-test-mcp-files"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	mustMigrate(t, a, b, agent)
}

// An activation that cannot complete on the target (its promotion fails:
// here the workspace cannot move into place) runs nothing there: tern
// holder says so and why, a new session is refused with that reason, and
// the node retries on its own until it completes; then the agent runs,
// with its holder.activated event written.
func TestAnActivationThatCannotCompleteRunsNothingUntilItDoes(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.startAt(t, t.TempDir()), tr.startAt(t, t.TempDir())
		connectAll(t, a, b)
		agent := heldBy(t, a, nil)
		snapshotOn(t, a, agent, 1000) // a workspace, which the promotion moves into place
		blocker := filepath.Join(b.home, WorkspacesDir)
		if err := os.WriteFile(blocker, []byte("a file where the workspaces folder goes"), 0o600); err != nil {
			t.Fatal(err)
		}
		moved := mustMigrate(t, a, b, agent)
		eventually(t, "b says its activation is not complete, and why", func() bool {
			st, _ := b.holders.State(agent)
			return st.State == "active" && strings.Contains(st.Note, "activation is complete") && strings.Contains(st.Note, "last try failed")
		})
		if b.runs(agent) {
			t.Fatal("b runs the agent before its activation is complete")
		}
		var refused map[string]any
		if code := callAPI(t, b, "POST", "/v1/agents/"+agent+"/sessions", nil, &refused); code != 503 {
			t.Fatalf("a new session on b: %d %v, want 503", code, refused)
		}
		// b restarts before its activation completes: it takes the
		// promotion up again from its record and its manifest.
		homeB := b.home
		b.Close()
		b = tr.startAt(t, homeB)
		connectAll(t, a, b)
		eventually(t, "b, restarted, still waits for its activation", func() bool {
			st, _ := b.holders.State(agent)
			return st.State == "active" && strings.Contains(st.Note, "last try failed")
		})
		if err := os.Remove(blocker); err != nil {
			t.Fatal(err)
		}
		eventually(t, "b runs the agent once its activation completes", func() bool { return b.runs(agent) })
		evs, _ := b.store.Events(agent, "")
		activations := 0
		for _, e := range evs {
			if e.Type == journal.ActivatedType && e.Epoch == moved.Epoch {
				activations++
				if !strings.Contains(string(e.Body), a.info.PeerID) {
					t.Fatalf("the holder.activated event does not name the old holder: %s", e.Body)
				}
			}
		}
		if activations != 1 {
			t.Fatalf("%d holder.activated events after the activation completed, want 1", activations)
		}
		if _, err := os.Stat(filepath.Join(b.home, WorkspacesDir, agent)); err != nil {
			t.Fatalf("the workspace is not in place: %v", err)
		}
	})
}
