package custody

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/fencing/fencingtest"
)

func TestTheFileRegistryPassesTheConformanceSuite(t *testing.T) {
	open := func(t *testing.T) fencing.Registry {
		g, err := openRegistry(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	reopen := func(t *testing.T, old fencing.Registry) fencing.Registry {
		g, err := openRegistry(filepath.Dir(old.(*fileRegistry).path), nil)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	fencingtest.TestRegistry(t, open, reopen)
	fencingtest.TestLostRegistry(t, open, func(t *testing.T, g fencing.Registry) fencing.Registry {
		home := filepath.Dir(g.(*fileRegistry).path)
		if err := os.Remove(filepath.Join(home, RegistryFile)); err != nil {
			t.Fatal(err)
		}
		lost, err := openRegistry(home, []string{fencingtest.Agent})
		if err != nil {
			t.Fatal(err)
		}
		return lost
	})
}

func TestADamagedRegistryIsRefusedSayingWhatToDo(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, RegistryFile), []byte(`{"format":"tern.registry/1","agents":{"x":{}}}`), 0o600)
	_, err := openRegistry(home, nil)
	if err == nil || !strings.Contains(err.Error(), "relearns") {
		t.Fatalf("got %v", err)
	}
}
