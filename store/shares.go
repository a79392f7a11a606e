package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/atomicfile"
)

// SharesFile narrows which paired peers get which capsules, inside
// $TERN_HOME: {"unshared": {"<agent id>": ["<peer id>", …]}}. By default
// every capsule a node holds is shared with every paired peer.
const SharesFile = "shares.json"

// Shares records the capsules withheld from particular peers. Safe for
// concurrent use; every change is written (atomically) before it counts.
type Shares struct {
	path string
	mu   sync.RWMutex
	off  map[string][]string // agent → peers it is withheld from, sorted
}

// LoadShares reads home's shares file; a missing file shares everything.
func LoadShares(home string) (*Shares, error) {
	s := &Shares{path: filepath.Join(home, SharesFile), off: map[string][]string{}}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	var f struct {
		Unshared map[string][]string `json:"unshared"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	const todo = `fix it by hand (it holds {"unshared": {AGENT-ID: [PEERID, …]}}), or remove it to share every capsule with every paired peer again`
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s is damaged: %v; %s", s.path, err, todo)
	}
	for agent, peers := range f.Unshared {
		if !capsule.ValidAgentID(agent) {
			return nil, fmt.Errorf("%s is damaged: %v; %s", s.path, fmt.Errorf("%q is not an agent id", agent), todo)
		}
		for _, p := range peers {
			if _, err := peer.Decode(p); err != nil {
				return nil, fmt.Errorf("%s is damaged: %v; %s", s.path, fmt.Errorf("agent %s: %q is not a peer ID", agent, p), todo)
			}
		}
		s.off[agent] = slices.Sorted(slices.Values(peers))
	}
	return s, nil
}

// Shared reports whether agent is shared with peer p.
func (s *Shares) Shared(agent, p string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return !slices.Contains(s.off[agent], p)
}

// Set shares (on) or withholds (off) agent with peer p.
func (s *Shares) Set(agent, p string, on bool) error {
	if !capsule.ValidAgentID(agent) {
		return fmt.Errorf("%q is not an agent id", agent)
	}
	if _, err := api.ParsePeerID(p); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[string][]string{}
	for k, v := range s.off {
		next[k] = slices.Clone(v)
	}
	peers := slices.DeleteFunc(next[agent], func(x string) bool { return x == p })
	if !on {
		peers = append(peers, p)
		slices.Sort(peers)
	}
	if len(peers) == 0 {
		delete(next, agent)
	} else {
		next[agent] = peers
	}
	data, err := json.MarshalIndent(map[string]any{"unshared": next}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(s.path, append(data, '\n'), 0o600); err != nil {
		return err
	}
	s.off = next
	return nil
}

// Reload rereads the file, for a running node after a CLI changed it.
func (s *Shares) Reload() error {
	fresh, err := LoadShares(filepath.Dir(s.path))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.off = fresh.off
	s.mu.Unlock()
	return nil
}
