package api

import (
	"fmt"
	"html"
	"net/http"
)

// MCPCallbackPath is where an authorization server sends the person's
// browser back to, with the code: the node finishes the authorization
// itself, so that nothing needs pasting when the browser runs on the
// node's machine.
const MCPCallbackPath = "/v1/mcp/callback"

// handleMCP is GET /v1/agents/{agent}/mcp.
func (srv *Server) handleMCP(w http.ResponseWriter, r *http.Request) {
	agent, ok := srv.pathAgent(w, r)
	if !ok {
		return
	}
	states, err := srv.rt.MCPServers(r.Context(), agent)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	writeJSON(w, map[string]any{"servers": states})
}

// handleMCPCallback is GET /v1/mcp/callback: an authorization server
// sent the person's browser back with a code (or an error). The node
// finds the authorization that waits for it by its state, finishes it,
// and continues the paused turn when nothing else of it waits for an
// answer. It needs no bearer token: the state, unguessable and known only
// to the authorization URL, is what admits the request.
func (srv *Server) handleMCPCallback(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	page := func(code int, msg string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		fmt.Fprintf(w, "<!doctype html><title>tern</title><p>%s</p>\n", html.EscapeString(msg))
	}
	if state == "" {
		page(http.StatusBadRequest, "This address is where an authorization server sends your browser back to tern; it came without a state.")
		return
	}
	agent, sessionID, act, ok := srv.rt.ActionByState(state)
	if !ok {
		page(http.StatusNotFound, "No authorization waits for this answer on this node (it was answered, or the node restarted). Run the turn again to be asked anew.")
		return
	}
	redirect := "http://127.0.0.1" + MCPCallbackPath + "?" + r.URL.RawQuery
	if err := srv.rt.AuthorizeMCP(r.Context(), agent, act.Server, redirect); err != nil {
		srv.log.Warn("an MCP server's authorization failed", "agent", agent, "server", act.Server, "err", err)
		page(http.StatusUnprocessableEntity, fmt.Sprintf("The authorization of %s failed: %v", act.Server, err))
		return
	}
	srv.log.Info("an MCP server was authorized", "agent", agent, "server", act.Server)
	turn, err := srv.rt.ContinueAuthorized(r.Context(), agent, sessionID)
	switch {
	case err != nil:
		page(http.StatusOK, fmt.Sprintf("%s is authorized. The paused turn did not continue (%v): answer action %s with tern respond %s --authorization done.", act.Server, err, act.ID, act.ID))
	case turn == "":
		page(http.StatusOK, fmt.Sprintf("%s is authorized. The paused turn waits for other answers too: tern actions lists them; answer %s with --authorization done.", act.Server, act.ID))
	default:
		page(http.StatusOK, fmt.Sprintf("%s is authorized; turn %s continues. You can close this page.", act.Server, turn))
	}
}
