package turns

import (
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/provider"
)

// ModelSettings returns the model settings of an agent this node holds:
// agent.json's, with the key from the node's secrets.
func (rt *Runtime) ModelSettings(agent string) (provider.Settings, error) {
	var a capsule.Agent
	err := rt.node.With(agent, func(d *capsule.Dir) error {
		var err error
		a, err = d.TrustedAgent(agent, rt.node.Ours)
		return err
	})
	if err != nil {
		return provider.Settings{}, err
	}
	return provider.SettingsFor(a, rt.cfg.Secrets)
}
