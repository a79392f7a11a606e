package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/store"
)

// Status reports the node's state.
func (n *Node) Status() (api.Status, error) {
	st := api.Status{PeerID: n.info.PeerID, Addrs: n.info.Addrs, API: n.info.API, Peers: []api.PeerStatus{}, Capsules: []api.CapsuleStatus{},
		Transfers: n.transfers.List()}
	for _, p := range n.peers.List() {
		id, _ := peer.Decode(p.ID)
		ps := api.PeerStatus{Peer: p, Connected: n.host.Network().Connectedness(id) == network.Connected}
		if !ps.Connected {
			ps.Why = n.whyNotConnected(id, p)
			n.mu.Lock()
			if seen, ok := n.seen[id]; ok {
				ps.DisconnectedAt = &seen
			}
			n.mu.Unlock()
		}
		st.Peers = append(st.Peers, ps)
	}
	ids, err := n.store.List()
	if err != nil {
		return st, err
	}
	for _, id := range ids {
		cs, err := n.capsuleStatus(id)
		if errors.Is(err, store.ErrStoreClosed) {
			return st, err
		}
		if err != nil {
			cs = api.CapsuleStatus{ID: id, Vector: journal.Vector{}, Forks: []journal.Fork{}, Damaged: api.HomeRelative(n.home, err.Error())}
		}
		st.Capsules = append(st.Capsules, cs)
	}
	return st, nil
}

// whyNotConnected says why the paired peer p is not connected.
func (n *Node) whyNotConnected(id peer.ID, p Peer) string {
	n.mu.Lock()
	dialErr, seen := "", n.seen[id]
	if err := n.policy.DialFailure(string(id)); err != nil {
		dialErr = err.Error()
		if len(dialErr) > 200 {
			dialErr = dialErr[:200] + "…"
		}
	}
	n.mu.Unlock()
	switch {
	case dialErr != "" && strings.Contains(dialErr, "gater"):
		return "this node refuses it: pair it again (tern peer add)"
	case dialErr != "":
		return "the last dial failed: " + dialErr + " (if it runs, has it paired this machine? tern peer add on it)"
	case !seen.IsZero():
		return "the connection ended at " + seen.Format(time.DateTime) + "; redialed every sync interval"
	case len(p.Addrs) == 0 && n.cfg.NoMDNS:
		return "never seen: no address to dial and LAN discovery is off; give one: tern peer add " + p.ID + " /ip4/…/tcp/4001"
	case len(p.Addrs) == 0:
		return "never seen: no address to dial, and not found on the LAN yet"
	}
	return "never seen: not dialed yet"
}

// capsuleStatus summarises one held capsule's journal, from what the
// store kept of it when it is closed (opening nothing).
func (n *Node) capsuleStatus(id string) (api.CapsuleStatus, error) {
	sum, err := n.store.Status(id)
	if err != nil {
		return api.CapsuleStatus{}, err
	}
	name := ""
	if data, err := os.ReadFile(filepath.Join(n.store.Path(id), capsule.AgentFile)); err == nil {
		if a, err := capsule.ParseAgent(data); err == nil {
			name = a.Name
		}
	}
	forks := sum.Forks
	if forks == nil {
		forks = []journal.Fork{}
	}
	return api.CapsuleStatus{ID: id, Name: name, Runs: n.runs(id), Events: sum.Events, Vector: sum.Vector, Forks: forks,
		Quarantined: sum.Quarantined, Rejected: n.store.RejectedCount(id), Refused: n.store.Refused(id), Wants: len(sum.Wanted), Incomplete: len(sum.Wanted) > 0}, nil
}

// SyncState says whether p holds the whole of agent's capsule; when it
// does not, it starts a sync round with p.
func (n *Node) SyncState(ctx context.Context, p peer.ID, agent string) (api.SyncState, error) {
	ours, err := n.store.Vector(agent)
	if err != nil {
		return api.SyncState{}, err
	}
	blobs, err := n.store.Blobs(agent)
	if err != nil {
		return api.SyncState{}, err
	}
	st := api.SyncState{Ours: ours, Blobs: len(blobs), PeerLacks: len(blobs), Transfers: []api.Transfer{}}
	n.mu.Lock()
	st.Peer, _ = n.policy.Synced(string(p), agent)
	n.mu.Unlock()
	st.Events = st.Peer != nil && maps.Equal(ours, st.Peer)
	if st.Events && len(blobs) > 0 {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		held, err := protocol.PeerHas(ctx, n.host, p, agent, blobs)
		cancel()
		if err == nil {
			st.PeerLacks = len(blobs) - len(held)
		}
	}
	for _, t := range n.transfers.List() {
		if t.Agent == agent && t.Peer == p.String() {
			st.Transfers = append(st.Transfers, t)
		}
	}
	st.InSync = st.Events && st.PeerLacks == 0
	if !st.Events {
		n.goSync(p)
	}
	return st, nil
}

// ReloadPeers reads peers.json again, after tern peer add or remove
// changed it: connections to peers no longer paired are closed, the
// fencing machines learn the peers, and new ones are dialed.
func (n *Node) ReloadPeers() ([]Peer, error) {
	if err := n.peers.Reload(); err != nil {
		return nil, fmt.Errorf("reload %s: %w", PeersFile, err)
	}
	for _, p := range n.host.Network().Peers() {
		if !n.peers.Allowed(p) {
			n.host.Network().ClosePeer(p)
		}
	}
	n.repeer(true)
	return n.peers.List(), nil
}

// ReloadShares reads shares.json again.
func (n *Node) ReloadShares() error {
	if err := n.store.Shares().Reload(); err != nil {
		return fmt.Errorf("reload %s: %w", store.SharesFile, err)
	}
	return nil
}

// PendingPeers are the unpaired machines that tried to connect, newest
// first.
func (n *Node) PendingPeers() []PendingPeer { return n.gater.Pending() }

// Agents are the agents whose capsules the node holds.
func (n *Node) Agents() ([]string, error) { return n.store.List() }

// Holds reports whether the node holds a capsule of agent.
func (n *Node) Holds(agent string) bool { return n.store.Holds(agent) }

// Events are the agent's events.
func (n *Node) Events(agent string) ([]*journal.Event, error) { return n.store.Events(agent, "") }

// ExportFile writes the agent's capsule as a tar to file.
func (n *Node) ExportFile(agent, file string) error { return n.store.ExportFile(agent, file) }

// Members are the machines that write the agent's history.
func (n *Node) Members(agent string) (journal.Members, error) { return n.store.Members(agent) }
