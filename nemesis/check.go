package nemesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/store"
)

// SampleEvery is how often the checker asks every node where the agent
// stands.
const SampleEvery = 100 * time.Millisecond

// sample is one node's answer: whether it runs the agent, at which epoch,
// and the highest epoch it has seen.
type sample struct {
	node    int
	ok      bool // it answered
	runs    bool
	epoch   uint64
	highest uint64
}

// Runners is the pure rule for "two nodes run the agent at once", fed
// samples in the order they were taken. A node sampled running at epoch e
// twice, with another node sampled running between the two, is a
// violation; a handover, in which the old holder stops before (or while)
// the new one starts, never is: the old holder is never seen running at
// its old epoch after the new one was seen running. A node that did not
// answer counts as not running (a paused process cannot be asked).
type Runners struct {
	seq  int
	last []struct {
		at    int // seq of the node's last sample
		runs  bool
		epoch uint64
	}
	runsAt []int // seq of every sample that showed a node running, by node (the latest)
}

// NewRunners is the rule for n nodes.
func NewRunners(n int) *Runners {
	r := &Runners{last: make([]struct {
		at    int
		runs  bool
		epoch uint64
	}, n), runsAt: make([]int, n)}
	for i := range r.runsAt {
		r.runsAt[i] = -1
		r.last[i].at = -1
	}
	return r
}

// Add takes the next sample and returns a description of the violation
// it shows, or "".
func (r *Runners) Add(s sample) string {
	r.seq++
	runs := s.ok && s.runs
	prev := r.last[s.node]
	var v string
	if runs && prev.at >= 0 && prev.runs && prev.epoch == s.epoch {
		for o, at := range r.runsAt {
			if o != s.node && at > prev.at {
				v = fmt.Sprintf("two nodes ran the agent at once: n%d at epoch %d before and after n%d was seen running (at epoch %d)", s.node, s.epoch, o, r.last[o].epoch)
				break
			}
		}
	}
	r.last[s.node].at, r.last[s.node].runs, r.last[s.node].epoch = r.seq, runs, s.epoch
	if runs {
		r.runsAt[s.node] = r.seq
	}
	return v
}

// ack is an append a node acknowledged.
type ack struct {
	node int
	id   string
	text string // unique: found again by its text, even in a copy a heal signed again
}

// checker samples every node of a cluster and keeps what the checks need.
type checker struct {
	c *Cluster

	mu         sync.Mutex
	runners    *Runners
	highest    []uint64 // the highest epoch each node reported, since its last restore
	violations []string // of the trial in progress
	doubles    int      // samples showing two runners, in the trial in progress
	acks       []ack    // of the trial in progress
	last       []sample // each node's latest answer
}

func newChecker(c *Cluster) *checker {
	return &checker{c: c, runners: NewRunners(len(c.Nodes)), highest: make([]uint64, len(c.Nodes)), last: make([]sample, len(c.Nodes))}
}

// run samples every node, one after the other, every SampleEvery until
// ctx ends.
func (k *checker) run(ctx context.Context) {
	t := time.NewTicker(SampleEvery)
	defer t.Stop()
	for {
		for _, n := range k.c.Nodes {
			k.sample(ctx, n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (k *checker) sample(ctx context.Context, n *Node) {
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // a paused node does not answer
	defer cancel()
	r, err := n.Holder(ctx)
	k.record(sample{node: n.I, ok: err == nil, runs: running(r), epoch: r.Epoch, highest: r.Highest})
}

// record checks one sample against the ones before it.
func (k *checker) record(s sample) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if v := k.runners.Add(s); v != "" {
		k.doubles++
		k.violate(v)
	}
	if s.ok {
		if s.highest < k.highest[s.node] {
			k.violate(fmt.Sprintf("n%d's highest epoch went down from %d to %d", s.node, k.highest[s.node], s.highest))
		}
		k.highest[s.node] = max(k.highest[s.node], s.highest)
		k.last[s.node] = s
	}
}

// violate records v (once per trial). k.mu held.
func (k *checker) violate(v string) {
	for _, seen := range k.violations {
		if seen == v {
			return
		}
	}
	k.violations = append(k.violations, v)
}

// restored says that node i's home came back from a backup: the highest
// epoch it reports may go down once, to what the backup held.
func (k *checker) restored(i int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.highest[i] = 0
}

// acked records an acknowledged append.
func (k *checker) acked(a ack) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.acks = append(k.acks, a)
}

// runner is the node last seen running the agent, or nil.
func (k *checker) runner() *Node {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, s := range k.last {
		if s.ok && s.runs {
			return k.c.Nodes[i]
		}
	}
	return nil
}

// endTrial returns what the trial in progress found and starts the next.
func (k *checker) endTrial() (violations []string, doubles int, acks []ack) {
	k.mu.Lock()
	defer k.mu.Unlock()
	violations, doubles, acks = k.violations, k.doubles, k.acks
	k.violations, k.doubles, k.acks = nil, 0, nil
	return violations, doubles, acks
}

// converged says why the copies are not the same yet, or nil: exactly one
// node runs the agent, none is frozen or staging, and every node holds
// the same events (the same vector).
func converged(ctx context.Context, c *Cluster) error {
	var vec0 []byte
	runners := 0
	for _, n := range c.Nodes {
		r, err := n.Holder(ctx)
		if err != nil {
			return err
		}
		switch {
		case running(r):
			runners++
		case r.State == "frozen" || r.State == "staging" || r.State == "unknown" || r.State == "active":
			return fmt.Errorf("%s is %s at epoch %d (%s)", n.Name, r.State, r.Epoch, r.Note)
		}
		cs, err := n.capsule(ctx)
		if err != nil {
			return err
		}
		vec, _ := json.Marshal(cs.Vector)
		if vec0 == nil {
			vec0 = vec
		} else if string(vec) != string(vec0) {
			return fmt.Errorf("%s's copy differs from n0's: vector %s against %s", n.Name, vec, vec0)
		}
	}
	if runners != 1 {
		return fmt.Errorf("%d nodes run the agent, want 1", runners)
	}
	return nil
}

// lostAcks returns the acknowledged appends that the journal of the node
// that runs the agent does not hold readable: lost, or set aside.
func lostAcks(ctx context.Context, c *Cluster, acks []ack) ([]string, error) {
	var holder *Node
	for _, n := range c.Nodes {
		if n.Runs(ctx) {
			holder = n
		}
	}
	if holder == nil {
		return nil, fmt.Errorf("no node runs the agent")
	}
	data, err := os.ReadFile(filepath.Join(holder.Home, store.CapsulesDir, c.Agent, filepath.FromSlash(capsule.JournalFile)))
	if err != nil {
		return nil, err
	}
	events, _, _ := journal.Decode(data)
	return unreadable(c.Agent, events, acks, holder.Name), nil
}

// unreadable returns, of acks, a description of each that events (the
// journal of the node named holder) do not hold readable for agent: lost,
// or set aside.
func unreadable(agent string, events []*journal.Event, acks []ack, holder string) []string {
	view, _ := journal.ReadableOf(agent, events)
	readable := map[string]bool{}
	for _, e := range view {
		readable[e.ID] = true
		if e.Type == "message" {
			readable[string(e.Body)] = true
		}
	}
	all := map[string]bool{}
	for _, e := range events {
		all[e.ID] = true
	}
	var lost []string
	for _, a := range acks {
		if readable[a.id] || bodyHolds(readable, a.text) {
			continue
		}
		how := "lost"
		if all[a.id] {
			how = "set aside"
		}
		lost = append(lost, fmt.Sprintf("an append n%d acknowledged (%s, %q) is %s in %s's journal", a.node, a.id, a.text, how, holder))
	}
	return lost
}

// bodyHolds reports whether a readable message body holds text (a heal
// signs an event again under a new id; its body stays).
func bodyHolds(readable map[string]bool, text string) bool {
	for k := range readable {
		if strings.Contains(k, `"`+text+`"`) {
			return true
		}
	}
	return false
}

// errViolated ends a wait for convergence once the trial found a
// violation: it failed already, and the cluster may never come to rest.
var errViolated = errors.New("the trial found a violation")

// unlessViolated is check, but ends the wait with errViolated once the
// trial in progress found a violation.
func (k *checker) unlessViolated(check func() error) func() error {
	return func() error {
		k.mu.Lock()
		violated := len(k.violations) > 0
		k.mu.Unlock()
		if violated {
			return errViolated
		}
		return check()
	}
}
