package memory

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
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
	Time     string   `json:"time,omitempty"` // when the version found was written
	Conflict bool     `json:"conflict"`       // the note has versions written apart
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
	qv, err := emb.Embed(ctx, []string{q.Text})
	if err != nil {
		return nil, nil, err
	}
	if len(qv) != 1 {
		return nil, nil, fmt.Errorf("embedder %s gave no vector for the query", emb.Spec().Name)
	}
	var completed *Index
	if idx == nil || !sameEmbedder(idx.Embedder, emb.Spec()) || idx.Missing(items) > 0 || len(idx.Entries) != len(items) || len(qv[0]) != idx.Embedder.Dim {
		if idx != nil && len(qv[0]) != idx.Embedder.Dim {
			idx = nil // the model now answers in another dimension: nothing to reuse
		}
		built, err := Build(ctx, items, emb, idx)
		if err != nil {
			return nil, nil, err
		}
		idx, completed = built, built
	}
	tags := make([]string, len(q.Tags)) // the caller's slice stays as it was
	for i, t := range q.Tags {
		tags[i] = strings.ToLower(strings.TrimSpace(t))
	}
	q.Tags = tags
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
	hits := idx.Search(qv[0], k+len(items)-len(notes.Live()), keep)
	if _, ok := emb.(Builtin); ok {
		hits = rerank(hits, q.Text, func(e *Entry) string {
			if e.File != "" {
				return texts[e.File]
			}
			return versions[e.Version].v.Text
		})
	}
	var out []Result
	seen := map[string]bool{}
	for _, h := range hits {
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

// rerank scores the built-in embedder's hits again by the exact overlap of
// their features with the query's, without the collisions of hashing 384
// buckets (where "print" and "fold" may share one), and drops those that
// share no feature: the vectors find candidates, the features judge them.
func rerank(hits []Hit, query string, text func(*Entry) string) []Hit {
	qf := builtinFeatures(query)
	out := hits[:0]
	for _, h := range hits {
		if s := featureCosine(qf, builtinFeatures(text(h.Entry))); s > 0 {
			out = append(out, Hit{h.Entry, s})
		}
	}
	slices.SortStableFunc(out, func(a, b Hit) int { return cmp.Compare(b.Score, a.Score) })
	return out
}

func featureCosine(a, b map[uint32]float32) float32 {
	var dot, na, nb float64
	for h, w := range a {
		na += float64(w * w)
		if v, ok := b[h]; ok {
			dot += float64(w * v)
		}
	}
	for _, w := range b {
		nb += float64(w * w)
	}
	if dot == 0 {
		return 0
	}
	return float32(dot / math.Sqrt(na*nb))
}
