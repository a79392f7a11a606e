// Package allowlist is a node's paired peers, as peers.json in its home
// holds them: only these machines may connect, open a tern protocol or
// join a topic.
package allowlist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/internal/atomicfile"
)

// File is the allowlist of paired peers inside $TERN_HOME.
const File = "peers.json"

// Peer is one paired machine (api.Peer: the API shows it as peers.json
// holds it).
type Peer = api.Peer

// Peers is the allowlist: only these machines may connect, open a tern
// protocol or join a topic. It is safe for concurrent use; every change is
// written to its file (atomically) before it takes effect.
type Peers struct {
	path string
	mu   sync.RWMutex
	byID map[peer.ID]Peer

	// Changed, set by the node before it starts, runs after every change
	// (p.mu not held): the sync policy follows the allowlist.
	Changed func()
}

// notify runs changed, if set.
func (p *Peers) notify() {
	if p.Changed != nil {
		p.Changed()
	}
}

// Load reads home's allowlist; a missing file is an empty list.
func Load(home string) (*Peers, error) {
	p := &Peers{path: filepath.Join(home, File)}
	m, err := Read(p.path)
	if err != nil {
		return nil, err
	}
	p.byID = m
	return p, nil
}

// Reload rereads the file, for a running node after a CLI changed it.
func (p *Peers) Reload() error {
	m, err := Read(p.path)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.byID = m
	p.mu.Unlock()
	p.notify()
	return nil
}

// Read returns the allowlist in the file at path, by peer id; a missing
// file is an empty list, and one that does not parse is refused saying
// what is wrong and what to do.
func Read(path string) (map[peer.ID]Peer, error) {
	byID := map[peer.ID]Peer{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return byID, nil
	}
	if err != nil {
		return nil, err
	}
	var f struct {
		Peers []Peer `json:"peers"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	const todo = `fix it by hand (it holds {"peers": [{"id": PEERID, "name": NAME, "addrs": [MULTIADDR, …]}]}), or remove it and pair again with tern peer add`
	if err := dec.Decode(&f); err != nil {
		return nil, damaged(path, err, todo)
	}
	for i, e := range f.Peers {
		id, err := checkPeer(e)
		if err != nil {
			return nil, damaged(path, fmt.Errorf("peers[%d]: %w", i, err), todo)
		}
		byID[id] = e
	}
	return byID, nil
}

// checkPeer validates a peer entry and returns its ID.
func checkPeer(e Peer) (peer.ID, error) {
	id, err := api.ParsePeerID(e.ID)
	if err != nil {
		return "", err
	}
	for _, a := range e.Addrs {
		if _, err := ma.NewMultiaddr(a); err != nil {
			return "", fmt.Errorf("peer %s: address %q is not a multiaddr: %v", e.ID, a, err)
		}
	}
	return id, nil
}

// Allowed reports whether id is paired.
func (p *Peers) Allowed(id peer.ID) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	_, ok := p.byID[id]
	return ok
}

// List returns the paired peers sorted by ID.
func (p *Peers) List() []Peer {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]Peer, 0, len(p.byID))
	for _, e := range p.byID {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// dialable returns the paired peers that have static addresses, as
// libp2p dials them. (Addresses are checked when added.)
func (p *Peers) Dialable() []peer.AddrInfo {
	var out []peer.AddrInfo
	for _, e := range p.List() {
		id, err := peer.Decode(e.ID)
		if err != nil || len(e.Addrs) == 0 {
			continue
		}
		ai := peer.AddrInfo{ID: id}
		for _, a := range e.Addrs {
			if m, err := ma.NewMultiaddr(a); err == nil {
				ai.Addrs = append(ai.Addrs, m)
			}
		}
		out = append(out, ai)
	}
	return out
}

// Add pairs a peer, or updates its name and addresses.
func (p *Peers) Add(e Peer) error {
	id, err := checkPeer(e)
	if err != nil {
		return err
	}
	if e.Addrs == nil {
		e.Addrs = []string{}
	}
	p.mu.Lock()
	next := clonePeers(p.byID)
	next[id] = e
	if err := p.save(next); err != nil {
		p.mu.Unlock()
		return err
	}
	p.byID = next
	p.mu.Unlock()
	p.notify()
	return nil
}

// Remove unpairs a peer; it reports whether the peer was paired.
func (p *Peers) Remove(idStr string) (bool, error) {
	id, err := api.ParsePeerID(idStr)
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	if _, ok := p.byID[id]; !ok {
		p.mu.Unlock()
		return false, nil
	}
	next := clonePeers(p.byID)
	delete(next, id)
	if err := p.save(next); err != nil {
		p.mu.Unlock()
		return false, err
	}
	p.byID = next
	p.mu.Unlock()
	p.notify()
	return true, nil
}

func clonePeers(m map[peer.ID]Peer) map[peer.ID]Peer {
	out := make(map[peer.ID]Peer, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// save writes the allowlist file atomically. p.mu held.
func (p *Peers) save(m map[peer.ID]Peer) error {
	list := make([]Peer, 0, len(m))
	for _, e := range m {
		list = append(list, e)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	data, err := json.MarshalIndent(struct {
		Peers []Peer `json:"peers"`
	}{list}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(p.path, append(data, '\n'), 0o600)
}

// damaged is the refusal of the file at path: it names the file, what is
// wrong, and what to do.
func damaged(path string, err error, todo string) error {
	return fmt.Errorf("%s is damaged: %v; %s", path, err, todo)
}
