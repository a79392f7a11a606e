package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/render"
)

// Secrets gives the value of a named secret (internal/secrets.Store does,
// from the keyring, then TERN_SECRET_<NAME>).
type Secrets interface {
	Get(name string) (string, error)
}

// SettingsFor returns what agent.json says about the model, with the key
// read from secrets when agent.json names a key_secret.
func SettingsFor(a capsule.Agent, secrets Secrets) (Settings, error) {
	s := Settings{Provider: a.Provider, Model: a.Model, BaseURL: a.BaseURL, KeySecret: a.KeySecret}
	if err := s.Check(); err != nil {
		return s, fmt.Errorf("agent.json: %w", err)
	}
	if a.KeySecret != "" {
		if secrets == nil {
			return s, fmt.Errorf("agent.json names the secret %s, and no secret store is open", a.KeySecret)
		}
		key, err := secrets.Get(a.KeySecret)
		if err != nil {
			return s, err
		}
		s.Key = key
		if err := s.Check(); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Probe is what a one-step test of a model found (tern model test).
type Probe struct {
	Reply        string  `json:"reply"`
	FirstDeltaMS float64 `json:"first_delta_ms"`
	Usage        Usage   `json:"usage"`
}

// ProbeMessage is what a probe asks the model.
const ProbeMessage = "Say OK."

// RunProbe sends one tiny request (ProbeMessage, no instructions, no
// tools) with s and reports the reply, the time from sending to the first
// delta, and the usage; or the model's error.
func RunProbe(ctx context.Context, s Settings, opt Options) (Probe, error) {
	m, err := NewWith(s, opt)
	if err != nil {
		return Probe{}, err
	}
	body, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": ProbeMessage}}})
	ev := &journal.Event{ID: "probe", V: 1, Type: "message", Session: "probe", Body: body}
	r, err := render.Render(render.Request{Events: []*journal.Event{ev}, Agent: capsule.Agent{Name: "probe"},
		Target: render.Target{Provider: s.Wire(), Model: s.Model, Host: s.Host(), MaxTokens: 64, Stream: true}})
	if err != nil {
		return Probe{}, err
	}
	var p Probe
	start := time.Now()
	res, err := m.Step(ctx, r.Body, func(d Delta) {
		if p.FirstDeltaMS == 0 {
			p.FirstDeltaMS = float64(time.Since(start).Microseconds()) / 1000
		}
		if d.Kind == DeltaText {
			p.Reply += d.Text
		}
	})
	if err != nil {
		return Probe{}, err
	}
	p.Usage = res.Usage
	return p, nil
}
