package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
	"github.com/tern-dev/tern/provider"
)

// agentMemory reads what the node's copy of agent holds of its memory.
func (n *Node) agentMemory(agent string) (*capsule.Memory, error) {
	var m *capsule.Memory
	err := n.store.With(agent, func(d *capsule.Dir) error {
		var err error
		m, err = d.Memory()
		return err
	})
	return m, err
}

// Notes returns the agent's live notes.
func (n *Node) Notes(agent string) (memory.Notes, error) {
	m, err := n.agentMemory(agent)
	if err != nil {
		return nil, err
	}
	return m.Notes.Live(), nil
}

// Note adds a note to the agent's memory, or revises the note revise
// (settling a conflict), as an append of this node (see Append); it
// returns the note's id.
func (n *Node) Note(ctx context.Context, agent, text string, tags []string, revise string) (string, error) {
	m, err := n.agentMemory(agent)
	if err != nil {
		return "", err
	}
	d, id, err := memory.NoteDraft(m.Notes, text, tags, revise)
	if err != nil {
		return "", err
	}
	_, err = n.Append(ctx, agent, []journal.Draft{d})
	return id, err
}

// Forget removes a note from the agent's memory.
func (n *Node) Forget(ctx context.Context, agent, note string) error {
	m, err := n.agentMemory(agent)
	if err != nil {
		return err
	}
	d, err := memory.ForgetDraft(m.Notes, note)
	if err != nil {
		return err
	}
	_, err = n.Append(ctx, agent, []journal.Draft{d})
	return err
}

// SearchMemory searches the agent's notes (and workspace files, when its
// agent.json asks) with the embedder agent.json names, its key from the
// node's secrets. An index a provider's embedder had left incomplete is
// completed and kept.
func (n *Node) SearchMemory(ctx context.Context, agent string, q memory.Query) ([]memory.Result, error) {
	m, err := n.agentMemory(agent)
	if err != nil {
		return nil, err
	}
	emb, err := n.embedderFor(agent, m)
	if err != nil {
		return nil, err
	}
	results, completed, err := memory.Search(ctx, m.Notes, m.Items, m.Index, emb, q)
	if err != nil || completed == nil {
		return results, err
	}
	err = n.store.With(agent, func(d *capsule.Dir) error {
		now, err := d.Memory()
		if err != nil || completed.Missing(now.Items) > 0 || len(completed.Entries) != len(now.Items) {
			return err // notes changed meanwhile: the next search completes it
		}
		return d.WriteIndex(completed)
	})
	if err != nil {
		n.log.Warn("could not keep the completed memory index", "agent", agent, "err", err)
	}
	return results, nil
}

// embedderFor returns the embedder of the agent's memory settings, with
// its key from the node's secrets, unless it would send that key to a base
// URL that no machine of the person's accepted (capsule.Reach).
func (n *Node) embedderFor(agent string, m *capsule.Memory) (memory.Embedder, error) {
	if s := m.Agent.Memory; s != nil && s.BaseURL != "" && s.KeySecret != "" {
		err := n.store.With(agent, func(d *capsule.Dir) error { _, err := d.TrustedAgent(agent, n.ours); return err })
		if err != nil {
			return nil, err
		}
	}
	return provider.EmbedderFor(m.Agent, n.cfg.Secrets)
}

// ReindexMemory rebuilds the agent's working_memory.md and index from its
// journal, reusing nothing, and returns how many texts it indexed.
func (n *Node) ReindexMemory(ctx context.Context, agent string) (int, error) {
	m, err := n.agentMemory(agent)
	if err != nil {
		return 0, err
	}
	emb, err := n.embedderFor(agent, m)
	if err != nil {
		return 0, err
	}
	idx, err := memory.Build(ctx, m.Items, emb, nil)
	if err != nil {
		return 0, err
	}
	err = n.store.With(agent, func(d *capsule.Dir) error { return d.WriteIndex(idx) })
	return len(idx.Entries), err
}

func (n *Node) handleReindex(w http.ResponseWriter, r *http.Request) {
	agent, ok := n.pathAgent(w, r)
	if !ok {
		return
	}
	count, err := n.ReindexMemory(r.Context(), agent)
	if err != nil {
		n.httpError(w, statusOf(err), err)
		return
	}
	writeJSON(w, map[string]int{"texts": count})
}

// noteRequest is the body of POST /v1/agents/{agent}/memory.
type noteRequest struct {
	Text   string   `json:"text"`
	Tags   []string `json:"tags"`
	Revise string   `json:"revise"` // a note id: revise it instead of adding one
}

func (n *Node) handleNotes(w http.ResponseWriter, r *http.Request) {
	agent, ok := n.pathAgent(w, r)
	if !ok {
		return
	}
	notes, err := n.Notes(agent)
	if err != nil {
		n.httpError(w, statusOf(err), err)
		return
	}
	writeJSON(w, map[string]any{"notes": notes.Views()})
}

func (n *Node) handleNote(w http.ResponseWriter, r *http.Request) {
	agent, ok := n.pathAgent(w, r)
	if !ok {
		return
	}
	var req noteRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		n.httpError(w, http.StatusBadRequest, fmt.Errorf("the request body: %v (want {\"text\": …, \"tags\": […], \"revise\": \"note_…\"})", err))
		return
	}
	id, err := n.Note(r.Context(), agent, req.Text, req.Tags, req.Revise)
	if err != nil {
		n.httpError(w, statusOf(err), err)
		return
	}
	w.Header().Set("Location", "/v1/agents/"+agent+"/memory/"+id)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]string{"note": id})
}

func (n *Node) handleForget(w http.ResponseWriter, r *http.Request) {
	agent, ok := n.pathAgent(w, r)
	if !ok {
		return
	}
	note := r.PathValue("note")
	if err := n.Forget(r.Context(), agent, note); err != nil {
		n.httpError(w, statusOf(err), err)
		return
	}
	writeJSON(w, map[string]string{"note": note, "status": "removed"})
}

// handleSearch is GET /v1/agents/{agent}/memory/search?q=…&k=…&tag=…&since=…&until=….
func (n *Node) handleSearch(w http.ResponseWriter, r *http.Request) {
	agent, ok := n.pathAgent(w, r)
	if !ok {
		return
	}
	q, err := queryOf(r)
	if err != nil {
		n.httpError(w, http.StatusBadRequest, err)
		return
	}
	results, err := n.SearchMemory(r.Context(), agent, q)
	if err != nil {
		n.httpError(w, statusOf(err), err)
		return
	}
	if results == nil {
		results = []memory.Result{}
	}
	writeJSON(w, map[string]any{"results": results})
}

// queryOf reads a search from the URL's query.
func queryOf(r *http.Request) (memory.Query, error) {
	v := r.URL.Query()
	q := memory.Query{Text: v.Get("q"), Tags: v["tag"]}
	if q.Text == "" {
		return q, fmt.Errorf("q is empty: give the text to search for")
	}
	if s := v.Get("k"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 || k > 1000 {
			return q, fmt.Errorf("k %q: give a number from 1 to 1000", s)
		}
		q.K = k
	}
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(b.name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return q, fmt.Errorf("%s %q: give a time like 2026-12-01T00:00:00Z", b.name, s)
			}
			*b.t = t
		}
	}
	return q, nil
}
