package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

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

func (srv *Server) handleMigrate(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	var req MigrateRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("migrate: the body must be {\"to\": PEERID}: %v", err))
		return
	}
	target, err := peer.Decode(req.To)
	if err != nil {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("migrate: %q is not a peer ID", req.To))
		return
	}
	timeout := 2 * time.Minute
	if req.Timeout != "" {
		if timeout, err = time.ParseDuration(req.Timeout); err != nil || timeout <= 0 {
			srv.httpError(w, http.StatusBadRequest, fmt.Errorf("migrate: timeout %q is not a positive duration such as \"2m\"", req.Timeout))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	if err := srv.node.Reach(ctx, target); err != nil {
		srv.httpError(w, StatusOf(err), fmt.Errorf("migrate %s: %w", id, err))
		return
	}
	out, err := srv.node.Migrate(ctx, id, target)
	if err != nil {
		srv.httpError(w, statusOr(err, http.StatusConflict), err) // the agent's state here refuses it
		return
	}
	writeJSON(w, out)
}

func (srv *Server) handleHolder(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("peers") == "none" {
		// This node's state alone, at once: a sampler polling every
		// node many times a second must not wait on peers a cut hides.
		st, err := srv.node.HolderState(id)
		if err != nil {
			srv.httpError(w, StatusOf(err), err)
			return
		}
		writeJSON(w, HolderReport{Agent: id, HolderState: st, Peers: []PeerHolder{}})
		return
	}
	rep, err := srv.node.Holder(r.Context(), id)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	writeJSON(w, rep)
}

// ResolveRequest is the body of POST /v1/capsules/{id}/resolve.
type ResolveRequest struct {
	Action string `json:"action"` // resume or retire
}

func (srv *Server) handleResolve(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	var req ResolveRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || (req.Action != "resume" && req.Action != "retire") {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("resolve: the body must be {\"action\": \"resume\"} or {\"action\": \"retire\"}"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	msg, err := srv.node.Resolve(ctx, id, req.Action)
	if err != nil {
		srv.httpError(w, statusOr(err, http.StatusConflict), err)
		return
	}
	st, err := srv.node.HolderState(id)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	writeJSON(w, map[string]any{"outcome": msg, "state": st.State, "epoch": st.Epoch})
}
