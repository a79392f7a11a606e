package simnet

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/journal"
)

// capNode is a node of the table test: a real fencing machine whose
// capsule store and staging area are real folders.
type capNode struct {
	t       *testing.T
	name    string // "source" or "target", for messages
	id      string
	m       *fencing.Machine
	reg     fencing.MemRegistry
	store   string // the capsule this node holds
	staging string
	running bool
	other   *capNode
}

func newCapNode(t *testing.T, name, id, peerID string, rec fencing.Record, store string, agent string, inc uint64) *capNode {
	t.Helper()
	n := &capNode{t: t, name: name, id: id, store: store, staging: filepath.Join(t.TempDir(), "staging")}
	if err := os.MkdirAll(n.staging, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := n.reg.Save(agent, rec); err != nil {
		t.Fatal(err)
	}
	cfg := fencing.Config{Self: id, Agent: agent, Peers: []string{peerID}, Incarnation: inc, Have: n.have}
	m, err := fencing.New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	n.m = m
	return n
}

// have reports whether the store already holds f (gossip synced it).
func (n *capNode) have(f fencing.File) bool {
	data, err := os.ReadFile(filepath.Join(n.store, filepath.FromSlash(f.Name)))
	return err == nil && sumOf(data) == f.Sum && int64(len(data)) == f.Size
}

// apply carries out the machine's Ready in the documented order and
// returns the messages to send.
func (n *capNode) apply(agent string) []fencing.Message {
	t := n.t
	var out []fencing.Message
	for n.m.HasReady() {
		rd := n.m.Ready()
		if rd.Stop {
			n.running = false
		}
		if rd.ClearStaging {
			if err := os.RemoveAll(n.staging); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(n.staging, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range rd.Stage {
			writeFile(t, filepath.Join(n.staging, filepath.FromSlash(c.File.Name)), c.Data)
		}
		if rd.Persist {
			if err := n.reg.Save(agent, rd.Record); err != nil {
				t.Fatalf("%s: persist: %v", n.name, err)
			}
		}
		if rd.Promote {
			for _, f := range rd.Files {
				src := filepath.Join(n.staging, filepath.FromSlash(f.Name))
				dst := filepath.Join(n.store, filepath.FromSlash(f.Name))
				if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
					continue // the store had it already
				}
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(src, dst); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.RemoveAll(n.staging); err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(n.staging, 0o755)
		}
		for _, msg := range rd.Messages {
			if msg.Type == fencing.MsgTransfer {
				msg.Data = n.readFile(msg.Index)
			}
			out = append(out, msg)
		}
		if rd.Run {
			n.running = true
		}
		prepare, promoted := rd.Prepare, rd.Promote
		n.m.Advance()
		if prepare != 0 {
			n.m.PrepareDone(prepare, nil)
		}
		if promoted {
			n.m.PromoteDone(nil)
		}
		if n.running && n.other.running {
			t.Fatalf("%s and %s both run the agent", n.name, n.other.name)
		}
	}
	return out
}

// readFile is the source's transport adapter: the bytes of a file of the
// migration in progress, read from the capsule.
func (n *capNode) readFile(i int) []byte {
	files := capsuleFiles(n.t, n.store)
	data, err := os.ReadFile(filepath.Join(n.store, filepath.FromSlash(files[i].Name)))
	if err != nil {
		n.t.Fatal(err)
	}
	return data
}

// peerOf is the Peer the source talks to: the target's machine.
type peerOf struct {
	n     *capNode
	agent string
}

func (p peerOf) Deliver(req fencing.Message) []fencing.Message {
	if err := p.n.m.Step(req); err != nil {
		p.n.t.Fatalf("%s: step %s: %v", p.n.name, &req, err)
	}
	return p.n.apply(p.agent)
}

func sumOf(b []byte) [32]byte { return sha256.Sum256(b) }

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// capsuleFiles lists every file of the capsule at dir, the manifest
// included, sorted by name, with its hash: what a proposal moves.
func capsuleFiles(t *testing.T, dir string) []fencing.File {
	t.Helper()
	c, err := capsule.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	man, err := os.ReadFile(filepath.Join(dir, capsule.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	files := []fencing.File{{Name: capsule.ManifestFile, Sum: sumOf(man), Size: int64(len(man))}}
	for name, e := range c.Manifest().Files {
		var f fencing.File
		b, err := hex.DecodeString(e.SHA256)
		if err != nil || len(b) != 32 {
			t.Fatalf("manifest entry %s: bad sha256 %q", name, e.SHA256)
		}
		copy(f.Sum[:], b)
		f.Name, f.Size = name, e.Size
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b fencing.File) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return files
}

func newPeerID(t *testing.T) string { return newSigner(t).Machine() }

func newSigner(t *testing.T) journal.Signer {
	t.Helper()
	priv, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := journal.NewKeySigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fault is one call a case fails.
type fault struct {
	call  fencing.MsgType
	when  When
	times int
}

// TestEveryCallFailingBeforeOrAfter drives a real migration of a real
// capsule through a target wrapped in the Faulty double, failing each call
// of the protocol before it runs (the request is lost) or after (the
// answer is lost). In every case at most one node runs the agent at any
// time, exactly one runs it at the end (the one the protocol says), no
// staging is left anywhere, and the capsule of the node that runs still
// verifies.
func TestEveryCallFailingBeforeOrAfter(t *testing.T) {
	type outcome int
	const (
		sourceRuns outcome = iota
		targetRuns
	)
	type testCase struct {
		name   string
		faults []fault // the first is the call under test
		want   outcome
		event  fencing.EventKind // the source's outcome
	}
	cases := []testCase{
		{"a lost proposal is sent again and the migration commits",
			[]fault{{fencing.MsgPropose, Before, 1}}, targetRuns, fencing.EvCommit},
		{"a lost accept is answered again on the repeated proposal and the migration commits",
			[]fault{{fencing.MsgPropose, After, 1}}, targetRuns, fencing.EvCommit},
		{"a lost file is reported missing at prepare, sent again, and the migration commits",
			[]fault{{fencing.MsgTransfer, Before, 1}}, targetRuns, fencing.EvCommit},
		{"a file that arrived without an answer changes nothing and the migration commits",
			[]fault{{fencing.MsgTransfer, After, 1}}, targetRuns, fencing.EvCommit},
		{"a lost prepare is sent again and the migration commits",
			[]fault{{fencing.MsgPrepare, Before, 1}}, targetRuns, fencing.EvCommit},
		{"a lost prepared is answered again on the repeated prepare and the migration commits",
			[]fault{{fencing.MsgPrepare, After, 1}}, targetRuns, fencing.EvCommit},
		{"a lost activate is fenced by the query and the source resumes",
			[]fault{{fencing.MsgActivate, Before, 1}}, sourceRuns, fencing.EvResumeByQuery},
		{"a lost activate answer is recovered by the query and the source retires",
			[]fault{{fencing.MsgActivate, After, 1}}, targetRuns, fencing.EvRetireByQuery},
		{"a lost query after a lost activate is asked again, fences, and the source resumes",
			[]fault{{fencing.MsgQuery, Before, 1}, {fencing.MsgActivate, Before, 1}}, sourceRuns, fencing.EvResumeByQuery},
		{"a lost query after a lost activate answer is asked again and the source retires",
			[]fault{{fencing.MsgQuery, Before, 1}, {fencing.MsgActivate, After, 1}}, targetRuns, fencing.EvRetireByQuery},
		{"a lost query answer after a lost activate: the fence holds and the source resumes",
			[]fault{{fencing.MsgQuery, After, 1}, {fencing.MsgActivate, Before, 1}}, sourceRuns, fencing.EvResumeByQuery},
		{"a lost query answer after a lost activate answer: asked again, the source retires",
			[]fault{{fencing.MsgQuery, After, 1}, {fencing.MsgActivate, After, 1}}, targetRuns, fencing.EvRetireByQuery},
		{"a lost abort leaves the target to time out its staging area; the source resumes",
			[]fault{{fencing.MsgAbort, Before, 1}, {fencing.MsgPrepare, Before, 1000}}, sourceRuns, fencing.EvAbort},
		{"a lost abort answer: the target refused and emptied staging; the source resumes",
			[]fault{{fencing.MsgAbort, After, 1}, {fencing.MsgPrepare, Before, 1000}}, sourceRuns, fencing.EvAbort},
	}
	// Every call × before/after is covered.
	for _, call := range Calls {
		for _, when := range []When{Before, After} {
			if !slices.ContainsFunc(cases, func(c testCase) bool {
				return c.faults[0].call == call && c.faults[0].when == when
			}) {
				t.Errorf("no case fails %v %v", call, when)
			}
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			creator, dstID := newSigner(t), newPeerID(t)
			srcID := creator.Machine()
			dir := filepath.Join(t.TempDir(), "agent")
			c, err := capsule.New(dir, "helper", creator)
			if err != nil {
				t.Fatal(err)
			}
			agent := c.ID()
			c.Close()
			// The target already holds the files gossip gave it.
			store := filepath.Join(t.TempDir(), "target")
			for _, name := range []string{capsule.AgentFile, capsule.EnvironmentFile} {
				data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(store, filepath.FromSlash(name)), data)
			}
			src := newCapNode(t, "source", srcID, dstID, fencing.Created(srcID), dir, agent, 1)
			dst := newCapNode(t, "target", dstID, srcID, fencing.Joined(fencing.Holder{Peer: srcID, Epoch: 1}), store, agent, 2)
			src.other, dst.other = dst, src

			// The target behind the double; faults wrap each other.
			var target Peer = peerOf{dst, agent}
			var doubles []*Faulty
			for i := len(tc.faults) - 1; i >= 0; i-- {
				f := &Faulty{Peer: target, Call: tc.faults[i].call, When: tc.faults[i].when, Times: tc.faults[i].times}
				doubles = append(doubles, f)
				target = f
			}
			// The moment the source decides, a delayed copy of the activate
			// arrives at the target: it must not win.
			const epoch = 2
			late := fencing.Message{Type: fencing.MsgActivate, From: srcID, To: dstID, Agent: agent, Epoch: epoch}
			var events []fencing.Event
			decided := false
			observe := func() []fencing.Message {
				evs := src.m.Ready().Events
				events = append(events, evs...)
				for _, e := range evs {
					switch e.Kind {
					case fencing.EvCommit, fencing.EvAbort, fencing.EvRetireByQuery, fencing.EvResumeByQuery:
						if !decided {
							decided = true
							return []fencing.Message{late}
						}
					}
				}
				return nil
			}
			drive := func(msgs []fencing.Message) {
				for len(msgs) > 0 {
					msg := msgs[0]
					msgs = msgs[1:]
					if msg.To == dstID {
						msgs = append(msgs, target.Deliver(msg)...)
						continue
					}
					if err := src.m.Step(msg); err != nil {
						t.Fatalf("source: step %s: %v", &msg, err)
					}
					msgs = append(msgs, observe()...)
					msgs = append(msgs, src.apply(agent)...)
				}
			}
			tick := func() {
				for _, n := range []*capNode{src, dst} {
					n.m.Tick()
					var late []fencing.Message
					if n == src {
						late = observe()
					}
					drive(append(n.apply(agent), late...))
				}
			}
			drive(append(src.apply(agent), dst.apply(agent)...))
			for i := 0; i < 20 && !src.running; i++ {
				tick() // the source's startup check
			}
			if !src.running {
				t.Fatal("the source never started running")
			}
			if err := src.m.Migrate(dstID, capsuleFiles(t, dir)); err != nil {
				t.Fatal(err)
			}
			drive(src.apply(agent))
			for i := 0; i < 500 && !(src.m.Idle() && dst.m.Idle()); i++ {
				tick()
			}

			for _, d := range doubles {
				if d.Failed == 0 {
					t.Errorf("the double never failed %v %v: the case does not test it", d.Call, d.When)
				}
			}
			if !src.m.Idle() || !dst.m.Idle() {
				t.Fatalf("not settled after 500 ticks: source %+v, target %+v", src.m.Record(), dst.m.Record())
			}
			runner, other := src, dst
			if tc.want == targetRuns {
				runner, other = dst, src
			}
			if !runner.running || other.running {
				t.Fatalf("source runs: %v, target runs: %v; want only the %s", src.running, dst.running, runner.name)
			}
			if !slices.ContainsFunc(events, func(e fencing.Event) bool { return e.Kind == tc.event }) {
				t.Errorf("the source never reported %v; events %v", tc.event, events)
			}
			for _, n := range []*capNode{src, dst} {
				if st := n.m.State(); st == fencing.Frozen || st == fencing.Staging {
					t.Errorf("the %s is left %v", n.name, st)
				}
				if ents, _ := os.ReadDir(n.staging); len(ents) > 0 {
					t.Errorf("the %s's staging area is not empty: %d entries", n.name, len(ents))
				}
			}
			// When the source runs again, the target durably refused the
			// epoch: a late activate cannot win, now or ever.
			rec := dst.m.Record()
			if d := rec.Decision(epoch); tc.want == sourceRuns && d != fencing.Refused {
				t.Errorf("the source runs again but the target's decision for epoch %d is %v, not refused", epoch, d)
			}
			if !decided {
				t.Error("the source never decided")
			}

			rep, err := capsule.Verify(runner.store, capsule.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() {
				t.Errorf("the capsule of the node that runs does not verify: %v", rep.Problems)
			}
		})
	}
}
