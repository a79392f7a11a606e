// Package fencingtest holds conformance suites for the interfaces package
// fencing defines: run TestRegistry against any fencing.Registry (today
// fencing.MemRegistry; a durable registry must pass it too). It imports
// testing and is for tests only.
package fencingtest

import (
	"errors"
	"testing"

	"github.com/tern-dev/tern/fencing"
)

// Agent is the agent id the suite uses.
const Agent = "01234567-89ab-4def-8123-456789abcdef"

// TestRegistry checks that a registry made by open keeps records exactly,
// replaces them whole, refuses invalid ones without writing, and shares no
// memory with its callers. If reopen is not nil, it must return a registry
// over the same durable state (the node restarted), and the suite checks
// that saved records survive it.
func TestRegistry(t *testing.T, open func(t *testing.T) fencing.Registry, reopen func(t *testing.T, old fencing.Registry) fencing.Registry) {
	frozen := fencing.Record{Highest: 4, State: fencing.Frozen, Epoch: 3, Peer: "peer-b", Next: 4, Committing: true,
		Holder: fencing.Holder{Peer: "peer-a", Epoch: 3}, Decisions: []fencing.Decided{{Epoch: 2, Decision: fencing.Refused}, {Epoch: 3, Decision: fencing.Activated}}}

	t.Run("an agent never saved is not found", func(t *testing.T) {
		g := open(t)
		if _, ok, err := g.Load(Agent); ok || err != nil {
			t.Fatalf("Load = ok %v, err %v; want not found", ok, err)
		}
	})
	t.Run("a saved record loads back exactly", func(t *testing.T) {
		g := open(t)
		if err := g.Save(Agent, frozen); err != nil {
			t.Fatal(err)
		}
		got, ok, err := g.Load(Agent)
		if err != nil || !ok || !got.Equal(&frozen) {
			t.Fatalf("Load = %+v, %v, %v; want %+v", got, ok, err, frozen)
		}
	})
	t.Run("a save replaces the record whole", func(t *testing.T) {
		g := open(t)
		g.Save(Agent, frozen)
		retired := frozen.Clone()
		retired.State, retired.Next, retired.Committing = fencing.Retired, 0, false
		if err := g.Save(Agent, retired); err != nil {
			t.Fatal(err)
		}
		got, _, _ := g.Load(Agent)
		if !got.Equal(&retired) {
			t.Fatalf("Load = %+v; want %+v", got, retired)
		}
	})
	t.Run("an invalid record is refused and nothing is written", func(t *testing.T) {
		g := open(t)
		g.Save(Agent, frozen)
		bad := frozen.Clone()
		bad.Next = 1 // frozen on an epoch not newer than the held one
		if err := g.Save(Agent, bad); err == nil {
			t.Fatal("an invalid record was saved")
		}
		got, _, _ := g.Load(Agent)
		if !got.Equal(&frozen) {
			t.Fatalf("after a refused save Load = %+v; want the old record", got)
		}
	})
	t.Run("records share no memory with the caller", func(t *testing.T) {
		g := open(t)
		rec := frozen.Clone()
		g.Save(Agent, rec)
		rec.Decisions[0].Decision = fencing.Activated
		got, _, _ := g.Load(Agent)
		got.Decisions[1].Decision = fencing.Refused
		again, _, _ := g.Load(Agent)
		if !again.Equal(&frozen) {
			t.Fatalf("a caller's change reached the registry: %+v", again)
		}
	})
	if reopen != nil {
		t.Run("a saved record survives a restart", func(t *testing.T) {
			g := open(t)
			g.Save(Agent, frozen)
			g = reopen(t, g)
			got, ok, err := g.Load(Agent)
			if err != nil || !ok || !got.Equal(&frozen) {
				t.Fatalf("after restart Load = %+v, %v, %v", got, ok, err)
			}
		})
	}
}

// TestLostRegistry checks that after lose (the registry file is gone) Load
// fails with fencing.ErrRegistryLost for a saved agent until it is saved
// again.
func TestLostRegistry(t *testing.T, open func(t *testing.T) fencing.Registry, lose func(t *testing.T, g fencing.Registry) fencing.Registry) {
	g := open(t)
	if err := g.Save(Agent, fencing.Created("peer-a")); err != nil {
		t.Fatal(err)
	}
	g = lose(t, g)
	if _, _, err := g.Load(Agent); !errors.Is(err, fencing.ErrRegistryLost) {
		t.Fatalf("Load after loss: %v, want ErrRegistryLost", err)
	}
	relearnt := fencing.Record{Highest: 5, Floor: 5, Holder: fencing.Holder{Peer: "peer-b", Epoch: 5}}
	if err := g.Save(Agent, relearnt); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := g.Load(Agent); err != nil || !ok || !got.Equal(&relearnt) {
		t.Fatalf("Load after relearning = %+v, %v, %v", got, ok, err)
	}
}
