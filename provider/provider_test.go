package provider

import (
	"slices"
	"testing"

	"github.com/tern-dev/tern/capsule"
)

// agent.json accepts exactly the providers this package can talk to.
func TestAgentJSONKnowsEveryProviderAndNoOther(t *testing.T) {
	if !slices.Equal(capsule.Providers, Names()) {
		t.Fatalf("capsule.Providers %v, provider.Names %v", capsule.Providers, Names())
	}
}
