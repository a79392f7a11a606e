package providerid

import (
	"errors"
	"slices"
	"testing"
)

func TestParseKnowsEveryProviderAndNamesThemWhenItDoesNot(t *testing.T) {
	for _, id := range All() {
		if got, err := Parse(string(id)); err != nil || got != id {
			t.Errorf("Parse(%q) = %q, %v", id, got, err)
		}
	}
	for _, s := range []string{"", "openai", "OpenAI-Chat", "offline ", "builtin"} {
		_, err := Parse(s)
		if !errors.Is(err, ErrUnknown) {
			t.Fatalf("Parse(%q) = %v, want ErrUnknown", s, err)
		}
		want := `provider "` + s + `" is not one of openai-chat, openai-responses, anthropic, gemini, ollama, offline`
		if err.Error() != want {
			t.Errorf("Parse(%q): %v\nwant %s", s, err, want)
		}
	}
}

func TestTheListsAgreeWithWireAndKnown(t *testing.T) {
	if got := All(); !slices.Equal(got[:len(got)-1], Wires()) || got[len(got)-1] != Offline {
		t.Fatalf("All() = %v: want Wires() then Offline", got)
	}
	for _, id := range All() {
		if !id.Known() || id.Wire() != (id != Offline) {
			t.Errorf("%s: Known %v, Wire %v", id, id.Known(), id.Wire())
		}
	}
	for _, id := range []ID{"", "openai", "builtin"} {
		if id.Known() || id.Wire() {
			t.Errorf("%q: Known %v, Wire %v", id, id.Known(), id.Wire())
		}
	}
}

func TestEveryProviderEmbedderCallsAProviderWithAWire(t *testing.T) {
	if got := Embedders(); got[0] != Builtin || !slices.Equal(got[1:], ProviderEmbedders()) {
		t.Fatalf("Embedders() = %v", got)
	}
	for _, e := range ProviderEmbedders() {
		if !e.Provider().Wire() {
			t.Errorf("%s calls %q, which has no wire protocol", e, e.Provider())
		}
	}
	for _, e := range []Embedder{Builtin, "", "openai-chat"} {
		if e.Provider() != "" {
			t.Errorf("%q calls %q, want none", e, e.Provider())
		}
	}
}

func TestNamesSpellsInOrder(t *testing.T) {
	if got := Names(ProviderEmbedders()); !slices.Equal(got, []string{"openai", "ollama", "gemini"}) {
		t.Fatalf("Names = %q", got)
	}
}
