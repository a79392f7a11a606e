package turns

import (
	"context"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
	"github.com/tern-dev/tern/provider"
)

// agentMemory reads what the node's copy of agent holds of its memory.
func (rt *Runtime) agentMemory(agent string) (*capsule.Memory, error) {
	var m *capsule.Memory
	err := rt.node.With(agent, func(d *capsule.Dir) error {
		var err error
		m, err = d.Memory()
		return err
	})
	return m, err
}

// Notes returns the agent's live notes.
func (rt *Runtime) Notes(agent string) (memory.Notes, error) {
	m, err := rt.agentMemory(agent)
	if err != nil {
		return nil, err
	}
	return m.Notes.Live(), nil
}

// Note adds a note to the agent's memory, or revises the note revise
// (settling a conflict), as an append of this node (see Append); it
// returns the note's id.
func (rt *Runtime) Note(ctx context.Context, agent, text string, tags []string, revise string) (string, error) {
	m, err := rt.agentMemory(agent)
	if err != nil {
		return "", err
	}
	d, id, err := memory.NoteDraft(m.Notes, text, tags, revise)
	if err != nil {
		return "", err
	}
	_, err = rt.node.Append(ctx, agent, []journal.Draft{d})
	return id, err
}

// Forget removes a note from the agent's memory.
func (rt *Runtime) Forget(ctx context.Context, agent, note string) error {
	m, err := rt.agentMemory(agent)
	if err != nil {
		return err
	}
	d, err := memory.ForgetDraft(m.Notes, note)
	if err != nil {
		return err
	}
	_, err = rt.node.Append(ctx, agent, []journal.Draft{d})
	return err
}

// SearchMemory searches the agent's notes (and workspace files, when its
// agent.json asks) with the embedder agent.json names, its key from the
// node's secrets. An index a provider's embedder had left incomplete is
// completed and kept.
func (rt *Runtime) SearchMemory(ctx context.Context, agent string, q memory.Query) ([]memory.Result, error) {
	m, err := rt.agentMemory(agent)
	if err != nil {
		return nil, err
	}
	emb, err := rt.embedderFor(agent, m)
	if err != nil {
		return nil, err
	}
	results, completed, err := memory.Search(ctx, m.Notes, m.Items, m.Index, emb, q)
	if err != nil || completed == nil {
		return results, err
	}
	err = rt.node.With(agent, func(d *capsule.Dir) error {
		now, err := d.Memory()
		if err != nil || completed.Missing(now.Items) > 0 || len(completed.Entries) != len(now.Items) {
			return err // notes changed meanwhile: the next search completes it
		}
		return d.WriteIndex(completed)
	})
	if err != nil {
		rt.log.Warn("could not keep the completed memory index", "agent", agent, "err", err)
	}
	return results, nil
}

// embedderFor returns the embedder of the agent's memory settings, with
// its key from the node's secrets, unless it would send that key to a base
// URL that no machine of the person's accepted (capsule.Reach).
func (rt *Runtime) embedderFor(agent string, m *capsule.Memory) (memory.Embedder, error) {
	if s := m.Agent.Memory; s != nil && s.BaseURL != "" && s.KeySecret != "" {
		err := rt.node.With(agent, func(d *capsule.Dir) error { _, err := d.TrustedAgent(agent, rt.node.Ours); return err })
		if err != nil {
			return nil, err
		}
	}
	return provider.EmbedderFor(m.Agent, rt.cfg.Secrets)
}

// ReindexMemory rebuilds the agent's working_memory.md and index from its
// journal, reusing nothing, and returns how many texts it indexed.
func (rt *Runtime) ReindexMemory(ctx context.Context, agent string) (int, error) {
	m, err := rt.agentMemory(agent)
	if err != nil {
		return 0, err
	}
	emb, err := rt.embedderFor(agent, m)
	if err != nil {
		return 0, err
	}
	idx, err := memory.Build(ctx, m.Items, emb, nil)
	if err != nil {
		return 0, err
	}
	err = rt.node.With(agent, func(d *capsule.Dir) error { return d.WriteIndex(idx) })
	return len(idx.Entries), err
}
