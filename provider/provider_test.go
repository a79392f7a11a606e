package provider

import (
	"testing"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/providerid"
)

// agent.json accepts exactly the providers this package can talk to.
func TestAgentJSONKnowsEveryProviderAndNoOther(t *testing.T) {
	agent := func(p, model string) error {
		a := capsule.DefaultAgent("a")
		a.Provider, a.Model = p, model
		b, err := a.Encode()
		if err != nil {
			t.Fatal(err)
		}
		_, err = capsule.ParseAgent(b)
		return err
	}
	for _, id := range providerid.All() {
		model := "m"
		if id == providerid.Offline {
			model = providerid.OfflineModel
		}
		if err := agent(string(id), model); err != nil {
			t.Errorf("agent.json refuses %s: %v", id, err)
		}
		if _, err := New(Settings{Provider: string(id), Model: model}); err != nil {
			t.Errorf("New refuses %s: %v", id, err)
		}
	}
	for _, p := range []string{"", "openai", "builtin"} {
		if err := agent(p, "m"); err == nil {
			t.Errorf("agent.json takes provider %q", p)
		}
		if _, err := New(Settings{Provider: p, Model: "m"}); err == nil {
			t.Errorf("New takes provider %q", p)
		}
	}
}
