package node

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/provider"
)

// ModelSettings returns the model settings of an agent this node holds:
// agent.json's, with the key from the node's secrets.
func (n *Node) ModelSettings(agent string) (provider.Settings, error) {
	var a capsule.Agent
	err := n.store.With(agent, func(d *capsule.Dir) error {
		var err error
		a, err = d.TrustedAgent(agent, n.ours)
		return err
	})
	if err != nil {
		return provider.Settings{}, err
	}
	return provider.SettingsFor(a, n.cfg.Secrets)
}

// handleModelTest is POST /v1/capsules/{id}/model/test. A model that
// answers with an error is 502, with the error's words: the node is fine,
// the model is not.
func (n *Node) handleModelTest(w http.ResponseWriter, r *http.Request) {
	id, ok := n.agentID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	s, err := n.ModelSettings(id)
	if err != nil {
		n.httpError(w, statusOr(err, http.StatusUnprocessableEntity), err) // agent.json or its secret
		return
	}
	p, err := provider.RunProbe(ctx, s, provider.Options{})
	var perr *provider.Error
	switch {
	case errors.As(err, &perr):
		n.httpError(w, http.StatusBadGateway, err)
	case err != nil:
		n.httpError(w, statusOf(err), err)
	default:
		writeJSON(w, p)
	}
}
