package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/tern-dev/tern/journal"
)

// MembersReport is what GET /v1/capsules/{id}/members returns and tern
// member list prints: the machines that write the agent's history.
type MembersReport struct {
	Agent string `json:"agent"`
	// Open: the agent is from before members and no node has named its
	// first members yet; every machine's events count until one does.
	Open    bool             `json:"open"`
	Members []journal.Member `json:"members"`
}

// MemberChange is the body of POST /v1/capsules/{id}/members and the
// answer of it and of DELETE /v1/capsules/{id}/members/{peer}: the event
// that changed the members, "" when nothing had to.
type MemberChange struct {
	Peer  string `json:"peer"`
	Event string `json:"event,omitempty"`
}

// MembersReportOf reads a members report from a journal's members.
func MembersReportOf(agent string, m journal.Members) MembersReport {
	return MembersReport{Agent: agent, Open: m.Open(), Members: m.List()}
}

func (srv *Server) handleMembers(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	m, err := srv.node.Members(id)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	writeJSON(w, MembersReportOf(id, m))
}

func (srv *Server) handleAddMember(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	var req MemberChange
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("the body is not {\"peer\": PEER-ID}: %w", err))
		return
	}
	e, err := srv.node.AddMember(r.Context(), id, req.Peer)
	srv.memberChanged(w, req.Peer, e, err)
}

func (srv *Server) handleRemoveMember(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	p := r.PathValue("peer")
	e, err := srv.node.RemoveMember(r.Context(), id, p)
	srv.memberChanged(w, p, e, err)
}

// memberChanged answers a change of members: a peer that is not a peer ID
// or a change the members forbid (a removed machine added again, the last
// member removed, this node not a member) is the client's 400 or 409.
func (srv *Server) memberChanged(w http.ResponseWriter, p string, e *journal.Event, err error) {
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	out := MemberChange{Peer: p}
	if e != nil {
		out.Event = e.ID
	}
	writeJSON(w, out)
}
