package fencing

import (
	"fmt"
	"sync"
)

// Registry is a node's durable holder registry: one Record per agent id.
// A durable implementation keeps it in one file written atomically, in the
// format of EncodeRegistry, and passes fencing/fencingtest.TestRegistry.
// The node does not persist a registry yet (migration runs only in
// simnet), so MemRegistry, in memory, is the one implementation today.
// Implementations must be safe for concurrent use.
type Registry interface {
	// Load returns the record of agent. ok is false if this registry has
	// never recorded it. It fails with ErrRegistryLost if the registry
	// (or this agent's part of it) is gone: start the machine with
	// NewLost then.
	Load(agent string) (rec Record, ok bool, err error)
	// Save replaces the record of agent, durably and atomically, before it
	// returns: after a crash Load returns the old record or rec, never a
	// mix. An invalid record is refused and nothing is written. The
	// caller may reuse rec's memory after Save returns.
	Save(agent string, rec Record) error
}

// MemRegistry is a Registry in memory, for simulation and tests. Its zero
// value is an empty registry. Lose simulates a lost registry file.
type MemRegistry struct {
	mu   sync.Mutex
	recs map[string]*Record
	lost map[string]bool
	// the agent saved last, for a fast path: a node saves the same agent
	// many times in a row
	lastID  string
	lastRec *Record
}

var _ Registry = (*MemRegistry)(nil)

// Load implements Registry. The record returned shares no memory with the
// registry.
func (g *MemRegistry) Load(agent string) (Record, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lost[agent] {
		return Record{}, false, fmt.Errorf("load %s: %w", agent, ErrRegistryLost)
	}
	r, ok := g.recs[agent]
	if !ok {
		return Record{}, false, nil
	}
	return r.Clone(), true, nil
}

// Save implements Registry. It copies rec, reusing its own memory.
func (g *MemRegistry) Save(agent string, rec Record) error {
	if err := rec.Validate(); err != nil {
		return fmt.Errorf("save %s: %w", agent, err)
	}
	g.mu.Lock()
	r := g.lastRec
	if r == nil || g.lastID != agent {
		if g.recs == nil {
			g.recs = make(map[string]*Record)
		}
		r = g.recs[agent]
		if r == nil {
			r = new(Record)
			g.recs[agent] = r
		}
		g.lastID, g.lastRec = agent, r
	}
	ds := append(r.Decisions[:0], rec.Decisions...)
	*r = rec
	r.Decisions = ds
	if len(g.lost) > 0 {
		delete(g.lost, agent)
	}
	g.mu.Unlock()
	return nil
}

// Lose forgets every record, as if the registry file were deleted: Load
// fails with ErrRegistryLost for each agent it held until that agent's
// record is saved again.
func (g *MemRegistry) Lose() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lost == nil {
		g.lost = make(map[string]bool)
	}
	for a, r := range g.recs {
		g.lost[a] = true
		*r = Record{Decisions: r.Decisions[:0]}
	}
}
