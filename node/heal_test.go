package node

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

// forkOwnChain gives n's copy of a fresh shared capsule a fork of n's own
// chain, as two copies written apart under n's key leave it, and returns
// the agent id.
func forkOwnChain(t *testing.T, n *Node, others ...*Node) string {
	t.Helper()
	ctx := context.Background()
	agent := sharedCapsule(t, append([]*Node{n}, others...)...)
	appendN(t, n, agent, 2)
	tarPath := filepath.Join(t.TempDir(), "a.tar")
	if err := n.store.ExportFile(agent, tarPath); err != nil {
		t.Fatal(err)
	}
	var copies []string
	for i, text := range []string{"written in one copy", "written in the other"} {
		dir := filepath.Join(t.TempDir(), "copy")
		if err := capsule.Unpack(tarPath, dir, capsule.Limits{}); err != nil {
			t.Fatal(err)
		}
		d, err := capsule.OpenDir(ctx, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"role":"user","content":[{"type":"text","text":"` + text + `"}]}`)
		drafts := []journal.Draft{{Type: "message", Session: "s", Body: body}}
		if i == 1 {
			drafts = append(drafts, drafts[0], drafts[0]) // the longer branch
		}
		if _, err := d.Append(ctx, n.id, 0, drafts...); err != nil {
			t.Fatal(err)
		}
		d.Close()
		copies = append(copies, dir)
	}
	a, b := mustOpenCapsule(t, copies[0]), mustOpenCapsule(t, copies[1])
	merged := filepath.Join(t.TempDir(), "merged")
	if _, err := capsule.Merge(a, b, merged); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Import(merged); err != nil {
		t.Fatal(err)
	}
	return agent
}

func mustOpenCapsule(t *testing.T, path string) *capsule.Capsule {
	t.Helper()
	c, err := capsule.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A node heals a fork of its own chain by itself once an import brings
// the other branch, with no command: its appends go on, every event of
// both branches reads (the shorter branch signed again), and a paired
// peer reads the same healed chain.
func TestANodeHealsItsOwnForkByItselfAndItsPeerConverges(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		pair(t, a, b)
		agent := forkOwnChain(t, a, b)
		ctx := context.Background()
		eventually(t, "a heals its chain", func() bool {
			var problem error
			a.store.With(agent, func(d *capsule.Dir) error { problem = d.ChainProblem(a.id.Machine()); return nil })
			return problem == nil
		})
		if _, err := a.Append(ctx, agent, []journal.Draft{{Type: "note"}}); err != nil {
			t.Fatalf("append after the heal: %v", err)
		}
		eventually(t, "b reads the same healed chain", func() bool {
			va, _ := a.store.Vector(agent)
			vb, _ := b.store.Vector(agent)
			evs, _ := b.store.Events(agent, "")
			return len(journal.Check(evs)) == 0 && vecEqual(va, vb)
		})
		ea, _ := a.store.Events(agent, "")
		eb, _ := b.store.Events(agent, "")
		va, _ := journal.Readable(ea)
		vb, _ := journal.Readable(eb)
		if !slices.Equal(idsOf(va), idsOf(vb)) || len(ea) != len(eb) {
			t.Fatalf("a reads %d of %d events, b %d of %d", len(va), len(ea), len(vb), len(eb))
		}
		var texts []string
		for _, e := range va {
			texts = append(texts, string(e.Body))
		}
		for _, want := range []string{"written in one copy", "written in the other"} {
			if !slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, want) }) {
				t.Fatalf("%q is not read after the heal", want)
			}
		}
		if _, err := a.Heal(ctx, agent); !errors.Is(err, journal.ErrNothingToHeal) {
			t.Fatalf("a heal asked for after the node healed: %v, want ErrNothingToHeal", err)
		}
	})
}

func vecEqual(a, b journal.Vector) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func idsOf(events []*journal.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}
