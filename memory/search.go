package memory

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Query is a search of an agent's memory.
type Query struct {
	Text  string
	K     int       // how many results; 0 means 5
	Tags  []string  // a note must carry every one (files carry none)
	Since time.Time // the note's version written at or after it; zero: no bound
	Until time.Time // …and before it; zero: no bound
}

// Result is one note (or workspace file) a search found.
type Result struct {
	Note     string   `json:"note,omitempty"`
	File     string   `json:"file,omitempty"`
	Score    float32  `json:"score"` // cosine similarity of the query and the text
	Text     string   `json:"text"`
	Tags     []string `json:"tags"`
	Time     string   `json:"time,omitempty"`     // when the version found was written
	Conflict bool     `json:"conflict,omitempty"` // the note has versions written apart
}

// Search finds the notes and files most like q.Text. It first embeds with
// emb what idx lacks of items (all of them when idx was built by another
// embedder), and returns that completed index for the caller to keep when
// it differs; nil when idx served as it was. Each note appears once, by
// its best version.
func Search(ctx context.Context, notes Notes, items []Item, idx *Index, emb Embedder, q Query) ([]Result, *Index, error) {
	k := q.K
	if k <= 0 {
		k = 5
	}
	var completed *Index
	if idx == nil || !sameEmbedder(idx.Embedder, emb.Spec()) || idx.Missing(items) > 0 || len(idx.Entries) != len(items) {
		built, err := Build(ctx, items, emb, idx)
		if err != nil {
			return nil, nil, err
		}
		idx, completed = built, built
	}
	qv, err := emb.Embed(ctx, []string{q.Text})
	if err != nil {
		return nil, nil, err
	}
	if len(qv) != 1 {
		return nil, nil, fmt.Errorf("embedder %s gave no vector for the query", emb.Spec().Name)
	}
	type ref struct {
		note *Note
		v    Version
	}
	versions := map[string]ref{}
	for _, n := range notes.Live() {
		for _, h := range n.Heads {
			versions[h.Event] = ref{n, h}
		}
	}
	texts := map[string]string{}
	for _, it := range items {
		if it.File != "" {
			texts[it.File] = it.Text
		}
	}
	keep := func(e *Entry) bool {
		if e.File != "" {
			return len(q.Tags) == 0 && q.Since.IsZero() && q.Until.IsZero()
		}
		r, ok := versions[e.Version]
		if !ok {
			return false
		}
		for _, t := range q.Tags {
			if !slices.Contains(r.v.Tags, t) {
				return false
			}
		}
		if !q.Since.IsZero() || !q.Until.IsZero() {
			at, err := time.Parse(time.RFC3339Nano, r.v.Time)
			if err != nil || !q.Since.IsZero() && at.Before(q.Since) || !q.Until.IsZero() && !at.Before(q.Until) {
				return false
			}
		}
		return true
	}
	var out []Result
	seen := map[string]bool{}
	for _, h := range idx.Search(qv[0], k+len(items)-len(notes.Live()), keep) {
		e := h.Entry
		if e.File != "" {
			out = append(out, Result{File: e.File, Score: h.Score, Text: texts[e.File], Tags: []string{}})
		} else if r := versions[e.Version]; !seen[r.note.ID] {
			seen[r.note.ID] = true
			tags := r.v.Tags
			if tags == nil {
				tags = []string{}
			}
			out = append(out, Result{Note: r.note.ID, Score: h.Score, Text: r.v.Text, Tags: tags, Time: r.v.Time, Conflict: r.note.Conflict()})
		}
		if len(out) == k {
			break
		}
	}
	return out, completed, nil
}
