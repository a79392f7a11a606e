package fencing

import (
	"crypto/sha256"
	"slices"
	"testing"
)

const testAgent = "0f0e0d0c-0b0a-4908-8706-050403020100"

// testNode is a node of testNet: a machine, its registry, its staging area
// and whether its runtime runs.
type testNode struct {
	id      string
	m       *Machine
	reg     MemRegistry
	running bool
	staged  map[int][]byte
	up      bool
	readies []Ready // every Ready applied, with copies of its messages
}

// testNet delivers messages between machines in order, one at a time,
// dropping those drop says to drop. It fails the test if two nodes ever
// run the agent.
type testNet struct {
	t      *testing.T
	nodes  []*testNode
	queue  []Message
	drop   func(*Message) bool
	events []Event
	inc    uint64
	// promote, if set, is how a node's promotion goes; nil: it succeeds.
	promote func(nd *testNode) error
	// restored: a node's home was restored from an old backup and it ran
	// alone, the one fault epochs cannot see while offline: two runners are
	// expected until it meets the holder.
	restored bool
}

// newNet makes nodes ids[0], ids[1], …; ids[0] created the agent and runs
// it (after its startup check), the others know of it.
func newNet(t *testing.T, ids ...string) *testNet {
	t.Helper()
	n := &testNet{t: t}
	for i, id := range ids {
		rec := Joined(Holder{ids[0], 1})
		if i == 0 {
			rec = Created(id)
		}
		nd := &testNode{id: id, staged: map[int][]byte{}, up: true}
		if err := nd.reg.Save(testAgent, rec); err != nil {
			t.Fatal(err)
		}
		n.nodes = append(n.nodes, nd)
	}
	for _, nd := range n.nodes {
		n.start(nd)
	}
	n.settle(50)
	if !n.node(ids[0]).running {
		t.Fatalf("%s does not run the agent it created", ids[0])
	}
	return n
}

func (n *testNet) config(id string) Config {
	var peers []string
	for _, o := range n.nodes {
		if o.id != id {
			peers = append(peers, o.id)
		}
	}
	n.inc++
	return Config{Self: id, Agent: testAgent, Peers: peers, Incarnation: n.inc, Timing: Timing{Retry: 2, Abort: 10, Staging: 20, Startup: 5}}
}

// start (re)starts nd's machine from its registry, as after a crash.
func (n *testNet) start(nd *testNode) {
	n.t.Helper()
	rec, ok, err := nd.reg.Load(testAgent)
	switch {
	case err != nil:
		nd.m, err = NewLost(n.config(nd.id))
	case !ok:
		n.t.Fatalf("%s has no record", nd.id)
	default:
		nd.m, err = New(n.config(nd.id), rec)
	}
	if err != nil {
		n.t.Fatal(err)
	}
	nd.up, nd.running = true, false
	n.apply(nd)
}

// crash stops nd: volatile state is lost, its registry too if lose.
func (n *testNet) crash(nd *testNode, lose bool) {
	nd.up, nd.running = false, false
	if lose {
		nd.reg.Lose()
	}
}

func (n *testNet) node(id string) *testNode {
	for _, nd := range n.nodes {
		if nd.id == id {
			return nd
		}
	}
	n.t.Fatalf("no node %s", id)
	return nil
}

// apply carries out nd's Ready in the documented order.
func (n *testNet) apply(nd *testNode) {
	t := n.t
	t.Helper()
	for nd.m.HasReady() {
		rd := nd.m.Ready()
		cp := rd
		cp.Messages = slices.Clone(rd.Messages)
		cp.Events = slices.Clone(rd.Events)
		cp.Record = rd.Record.Clone()
		nd.readies = append(nd.readies, cp)
		if rd.Stop {
			nd.running = false
		}
		if rd.ClearStaging {
			clear(nd.staged)
		}
		for _, c := range rd.Stage {
			nd.staged[c.Index] = c.Data
		}
		if rd.Persist {
			if err := nd.reg.Save(testAgent, rd.Record); err != nil {
				t.Fatalf("%s: persist: %v", nd.id, err)
			}
		}
		if rd.Promote {
			clear(nd.staged)
		}
		for _, msg := range rd.Messages {
			if msg.Type == MsgTransfer {
				msg.Data = fileData(msg.Index)
			}
			n.queue = append(n.queue, msg)
		}
		if rd.Run {
			nd.running = true
		}
		n.events = append(n.events, rd.Events...)
		prepare, promote := rd.Prepare, rd.Promote
		nd.m.Advance()
		if prepare != 0 {
			nd.m.PrepareDone(prepare, nil)
		}
		if promote {
			var err error
			if n.promote != nil {
				err = n.promote(nd)
			}
			nd.m.PromoteDone(err)
		}
		runners := 0
		for _, o := range n.nodes {
			if o.running {
				runners++
			}
		}
		if runners > 1 && !n.restored {
			t.Fatalf("%d nodes run the agent", runners)
		}
	}
}

// deliver delivers every queued message, and those they cause.
func (n *testNet) deliver() {
	n.t.Helper()
	for len(n.queue) > 0 {
		msg := n.queue[0]
		n.queue = n.queue[1:]
		to := n.node(msg.To)
		if !to.up || (n.drop != nil && n.drop(&msg)) {
			continue
		}
		if err := to.m.Step(msg); err != nil {
			n.t.Fatalf("%s: step %s: %v", to.id, &msg, err)
		}
		n.apply(to)
	}
}

// tick delivers everything, then ticks every node that is up once.
func (n *testNet) tick() {
	n.deliver()
	for _, nd := range n.nodes {
		if nd.up {
			nd.m.Tick()
			n.apply(nd)
		}
	}
	n.deliver()
}

// settle ticks until every machine is idle, at most max ticks; it reports
// whether they settled.
func (n *testNet) settle(max int) bool {
	for i := 0; i < max; i++ {
		n.tick()
		idle := true
		for _, nd := range n.nodes {
			if nd.up && !nd.m.Idle() {
				idle = false
			}
		}
		if idle {
			return true
		}
	}
	return false
}

func (n *testNet) migrate(from, to string) {
	n.t.Helper()
	nd := n.node(from)
	if err := nd.m.Migrate(to, testFiles); err != nil {
		n.t.Fatal(err)
	}
	n.apply(nd)
}

// saw reports whether kind happened (on any node) since the net was made.
func (n *testNet) saw(kind EventKind) bool {
	return slices.ContainsFunc(n.events, func(e Event) bool { return e.Kind == kind })
}

func (n *testNet) record(id string) Record {
	rec, _, err := n.node(id).reg.Load(testAgent)
	if err != nil {
		n.t.Fatal(err)
	}
	return rec
}

func (n *testNet) decision(id string, epoch uint64) Decision {
	rec := n.record(id)
	return rec.Decision(epoch)
}

// runner returns the id of the one node that runs the agent, "" if none.
func (n *testNet) runner() string {
	for _, nd := range n.nodes {
		if nd.running {
			return nd.id
		}
	}
	return ""
}

// The capsule the tests move: three files.
func fileData(i int) []byte { return []byte{'f', 'i', 'l', 'e', byte('0' + i)} }

var testFiles = func() []File {
	var fs []File
	for i, name := range []string{"manifest.json", "agent.json", "memory/timeline_events.jsonl"} {
		d := fileData(i)
		fs = append(fs, File{Name: name, Sum: sha256.Sum256(d), Size: int64(len(d))})
	}
	return fs
}()

func dropType(types ...MsgType) func(*Message) bool {
	return func(m *Message) bool { return slices.Contains(types, m.Type) }
}
