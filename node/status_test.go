package node

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/store"
)

// newTestStore opens a store in a new home, and the home's identity.
func newTestStore(t *testing.T) (home string, id *Identity, s *store.Store) {
	t.Helper()
	home = t.TempDir()
	id, err := LoadIdentity(home)
	if err != nil {
		t.Fatal(err)
	}
	if s, err = store.Open(home, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return home, id, s
}

// importNew imports into s a new, empty capsule held by id, and returns
// its agent id and the folder it was imported from.
func importNew(t *testing.T, s *store.Store, id *Identity, name string) (agent, dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "c")
	c, err := capsule.New(dir, name, id)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if agent, _, err = s.Import(dir); err != nil {
		t.Fatal(err)
	}
	return agent, dir
}

// tern status answers from what the store kept of each closed capsule:
// it opens none of them, also after the node restarts, and says what it
// said while they were open.
func TestStatusOpensNoClosedCapsule(t *testing.T) {
	home := t.TempDir()
	n := startNode(t, home)
	for range 4 {
		id := heldBy(t, n, nil)
		say(t, n, id, "hello")
	}
	want, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.store.CloseIdle(0); err != nil {
		t.Fatal(err)
	}
	opens := n.store.Opens()
	got, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	if n.store.Opens() != opens || n.store.StatusOpens() != 0 {
		t.Fatalf("status opened %d closed capsules", n.store.Opens()-opens)
	}
	sameCapsules(t, want.Capsules, got.Capsules)
	n.Close()
	leftover := filepath.Join(home, store.SummariesDir, got.Capsules[0].ID+".json"+store.SummaryTemp+"123") // a write kill -9 cut short
	if err := os.WriteFile(leftover, []byte(`{"vec`), 0o600); err != nil {
		t.Fatal(err)
	}

	again := startNode(t, home) // its own work opens capsules meanwhile; status must open none
	got, err = again.Status()
	if err != nil {
		t.Fatal(err)
	}
	if opened := again.store.StatusOpens(); opened != 0 {
		t.Fatalf("status after a restart opened %d capsules", opened)
	}
	sameCapsules(t, want.Capsules, got.Capsules)
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("a half-written summary was left: %v", err)
	}
}

func sameCapsules(t *testing.T, want, got []api.CapsuleStatus) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%d capsules, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.ID != g.ID || w.Events != g.Events || w.Wants != g.Wants || w.Quarantined != g.Quarantined || !maps.Equal(w.Vector, g.Vector) || len(w.Forks) != len(g.Forks) || w.Name != g.Name {
			t.Fatalf("capsule %d: %+v, want %+v", i, g, w)
		}
	}
}
