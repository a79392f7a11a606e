package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/protocol"
)

// MigrateRequest is the body of POST /v1/capsules/{id}/migrate.
type MigrateRequest struct {
	To      string `json:"to"`      // the target's peer ID
	Timeout string `json:"timeout"` // how long to wait for the outcome, e.g. "2m"; default 2m
}

// HolderReport is what GET /v1/capsules/{id}/holder returns and tern
// holder prints: where the agent stands on this node, and on each paired
// peer that answers.
type HolderReport struct {
	Agent string `json:"agent"`
	protocol.HolderState
	Peers []PeerHolder `json:"peers"`
}

// PeerHolder is where the agent stands on one paired peer, or why the peer
// did not say.
type PeerHolder struct {
	Peer  string `json:"peer"`
	Name  string `json:"name,omitempty"`
	State string `json:"state,omitempty"`
	Epoch uint64 `json:"epoch"`
	Error string `json:"error,omitempty"`
}

// ErrNotConnected means a paired peer cannot be reached now.
var ErrNotConnected = errors.New("not connected")

// reach connects to the paired peer p, unless it is connected already,
// within a few seconds. Its error names the peer and says what to do; the
// dial's own words go to the log, at debug level.
func (n *Node) reach(ctx context.Context, p peer.ID) error {
	if n.host.Network().Connectedness(p) == network.Connected {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := n.host.Connect(ctx, peer.AddrInfo{ID: p})
	if err == nil {
		return nil
	}
	n.log.Debug("a paired peer could not be reached", "peer", n.peerName(p), "err", err)
	return fmt.Errorf("%s is %w; start its node, or check tern status", n.peerName(p), ErrNotConnected)
}

// Migrate moves the agent to target (see holders.migrate).
func (n *Node) Migrate(ctx context.Context, agent string, target peer.ID) (Outcome, error) {
	return n.holders.migrate(ctx, agent, target)
}

// Holder reports where the agent stands here and on every paired peer that
// answers within a few seconds.
func (n *Node) Holder(ctx context.Context, agent string) (HolderReport, error) {
	st, err := n.holders.state(agent)
	if err != nil {
		return HolderReport{}, err
	}
	if st.State == "copy" && st.Note == "" && n.foreign(agent) {
		st.Note = foreignError(agent).Error() // read from the journal here only, not at every state asked
	}
	rep := HolderReport{Agent: agent, HolderState: st, Peers: []PeerHolder{}}
	for _, p := range n.peers.List() {
		ph := PeerHolder{Peer: p.ID, Name: p.Name}
		id, err := peer.Decode(p.ID)
		if err == nil {
			qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			var ps protocol.HolderState
			ps, err = protocol.AskHolder(qctx, n.host, id, agent)
			cancel()
			ph.State, ph.Epoch = ps.State, ps.Epoch
		}
		switch {
		case err != nil && id != "" && n.host.Network().Connectedness(id) != network.Connected:
			n.log.Debug("holder: a peer did not answer", "peer", n.peerName(id), "err", err)
			ph.Error = "not connected; start its node, or check tern status"
		case err != nil:
			ph.Error = n.homeRelative(err.Error())
		}
		rep.Peers = append(rep.Peers, ph)
	}
	// A peer that answers that it runs the agent at a newer epoch than
	// the latest activation this node knows of is named instead.
	if rep.State == "retired" {
		for _, p := range rep.Peers {
			if p.State == "active" && p.Epoch > rep.Holder.Epoch {
				rep.Note = fmt.Sprintf("superseded: %s holds it at epoch %d (as it answers now)", n.holders.peerNames([]string{p.Peer}), p.Epoch)
			}
		}
	}
	return rep, nil
}

func (n *Node) handleMigrate(w http.ResponseWriter, r *http.Request) {
	id, ok := n.agentID(w, r)
	if !ok {
		return
	}
	var req MigrateRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		n.httpError(w, http.StatusBadRequest, fmt.Errorf("migrate: the body must be {\"to\": PEERID}: %v", err))
		return
	}
	target, err := peer.Decode(req.To)
	if err != nil {
		n.httpError(w, http.StatusBadRequest, fmt.Errorf("migrate: %q is not a peer ID", req.To))
		return
	}
	timeout := 2 * time.Minute
	if req.Timeout != "" {
		if timeout, err = time.ParseDuration(req.Timeout); err != nil || timeout <= 0 {
			n.httpError(w, http.StatusBadRequest, fmt.Errorf("migrate: timeout %q is not a positive duration such as \"2m\"", req.Timeout))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if n.peers.Allowed(target) {
		if err := n.reach(ctx, target); err != nil {
			n.httpError(w, statusOf(err), fmt.Errorf("migrate %s: %w", id, err))
			return
		}
	}
	out, err := n.Migrate(ctx, id, target)
	if err != nil {
		n.httpError(w, statusOr(err, http.StatusConflict), err) // the agent's state here refuses it
		return
	}
	writeJSON(w, out)
}

func (n *Node) handleHolder(w http.ResponseWriter, r *http.Request) {
	id, ok := n.agentID(w, r)
	if !ok {
		return
	}
	rep, err := n.Holder(r.Context(), id)
	if err != nil {
		n.httpError(w, statusOf(err), err)
		return
	}
	writeJSON(w, rep)
}

// ResolveRequest is the body of POST /v1/capsules/{id}/resolve.
type ResolveRequest struct {
	Action string `json:"action"` // resume or retire
}

// Resolve carries out an operator's override (see holders.resolve).
func (n *Node) Resolve(ctx context.Context, agent, action string) (string, error) {
	return n.holders.resolve(ctx, agent, action)
}

func (n *Node) handleResolve(w http.ResponseWriter, r *http.Request) {
	id, ok := n.agentID(w, r)
	if !ok {
		return
	}
	var req ResolveRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || (req.Action != "resume" && req.Action != "retire") {
		n.httpError(w, http.StatusBadRequest, fmt.Errorf("resolve: the body must be {\"action\": \"resume\"} or {\"action\": \"retire\"}"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	msg, err := n.Resolve(ctx, id, req.Action)
	if err != nil {
		n.httpError(w, statusOr(err, http.StatusConflict), err)
		return
	}
	st, err := n.holders.state(id)
	if err != nil {
		n.httpError(w, statusOf(err), err)
		return
	}
	writeJSON(w, map[string]any{"outcome": msg, "state": st.State, "epoch": st.Epoch})
}
