package custody

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/atomicfile"
)

// RegistryFile is the node's holder registry inside $TERN_HOME
// (tern.registry/1, docs/MIGRATION.md): for every agent the node knows,
// the highest epoch seen, its state here and the decisions it made.
const RegistryFile = "registry.json"

// fileRegistry is the node's durable fencing.Registry: one file, rewritten
// whole and atomically (temp file, fsync, rename, fsync the folder) on
// every Save, before Save returns. Safe for concurrent use.
type fileRegistry struct {
	path string

	mu   sync.Mutex
	recs map[string]fencing.Record
	// lost are agents whose records the registry should hold but does
	// not: the file was gone when the node holding their capsules
	// started. Load answers ErrRegistryLost for them until saved.
	lost map[string]bool

	// saving, in the simulator, is shown every record before it is
	// saved, with the one it replaces.
	saving func(agent string, old, rec *fencing.Record)
}

var _ fencing.Registry = (*fileRegistry)(nil)

// openRegistry reads home's registry file. held are the agents whose
// capsules the node holds: if the file is missing while held is not empty,
// the registry was lost (deleted, or a home restored without it), and
// their records are lost until relearnt. A file that does not parse is
// refused, saying what to do.
func openRegistry(home string, held []string) (*fileRegistry, error) {
	g := &fileRegistry{path: filepath.Join(home, RegistryFile), recs: map[string]fencing.Record{}, lost: map[string]bool{}}
	data, err := os.ReadFile(g.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		for _, id := range held {
			g.lost[id] = true
		}
		return g, nil
	case err != nil:
		return nil, err
	}
	recs, err := fencing.DecodeRegistry(data)
	if err != nil {
		return nil, fmt.Errorf("%s is damaged: %v; %s", g.path, err, "restore it from a backup of this home; or move it away, and the node relearns every agent's epochs from its peers before it runs any (it runs nothing until every paired peer has answered)")
	}
	g.recs = recs
	return g, nil
}

// Load implements fencing.Registry.
func (g *fileRegistry) Load(agent string) (fencing.Record, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lost[agent] {
		return fencing.Record{}, false, fmt.Errorf("load %s: %w", agent, fencing.ErrRegistryLost)
	}
	r, ok := g.recs[agent]
	return r.Clone(), ok, nil
}

// Save implements fencing.Registry: the file is rewritten with rec before
// Save returns; on any error the registry is as it was.
func (g *fileRegistry) Save(agent string, rec fencing.Record) error {
	if err := rec.Validate(); err != nil {
		return fmt.Errorf("save %s: %w", agent, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.saving != nil {
		old := g.recs[agent]
		if g.lost[agent] {
			old = fencing.Record{}
		}
		g.saving(agent, &old, &rec)
	}
	next := make(map[string]fencing.Record, len(g.recs)+1)
	for k, v := range g.recs {
		next[k] = v
	}
	next[agent] = rec.Clone()
	data, err := fencing.EncodeRegistry(next)
	if err != nil {
		return fmt.Errorf("save %s: %w", agent, err)
	}
	if err := atomicfile.WriteFile(g.path, data, 0o600); err != nil {
		if full := atomicfile.DiskFull(g.path, err); full != err {
			return full
		}
		return fmt.Errorf("save the holder registry %s: %w", g.path, err)
	}
	g.recs = next
	delete(g.lost, agent)
	return nil
}
