package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tern-dev/tern/provider"
)

// handleModelTest is POST /v1/capsules/{id}/model/test. A model that
// answers with an error is 502, with the error's words: the node is fine,
// the model is not.
func (srv *Server) handleModelTest(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	s, err := srv.rt.ModelSettings(id)
	if err != nil {
		srv.httpError(w, statusOr(err, http.StatusUnprocessableEntity), err) // agent.json or its secret
		return
	}
	p, err := provider.RunProbe(ctx, s, provider.Options{})
	var perr *provider.Error
	switch {
	case errors.As(err, &perr):
		srv.httpError(w, http.StatusBadGateway, err)
	case err != nil:
		srv.httpError(w, StatusOf(err), err)
	default:
		writeJSON(w, p)
	}
}
