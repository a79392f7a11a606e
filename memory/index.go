package memory

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/tern-dev/tern/journal"
)

// IndexFormat is the format string of memory/vector_index/index.json.
const IndexFormat = "tern.index/1"

// EmptyIndex is the index with no entries, whatever the embedder: the
// bytes every capsule without notes holds.
var EmptyIndex = []byte("{\"entries\":[]}\n")

// Index is the semantic index of a capsule's notes (and, when agent.json
// asks, its workspace's text files): one int8 vector per current version
// of a live note and per text file, built by one embedder.
type Index struct {
	Format   string       `json:"format"`
	Embedder EmbedderSpec `json:"embedder"`
	Entries  []Entry      `json:"entries"` // sorted: notes by note id then version, then files by path

	once sync.Once
	vecs []int8 // the entries' vectors in one slice (see arena)
}

// Entry is one indexed text: a note's version or a workspace file.
type Entry struct {
	Note    string `json:"note,omitempty"`    // a note's id…
	Version string `json:"version,omitempty"` // …and the event id of its version
	File    string `json:"file,omitempty"`    // or a workspace file's path…
	CID     string `json:"cid,omitempty"`     // …and the cid of its content
	Vector  string `json:"vector"`            // standard base64 of Dim signed bytes

	vec  []int8
	norm float32
}

// Item is a text to index and what it is.
type Item struct {
	Note, Version string
	File, CID     string
	Text          string
}

func (it Item) key() string {
	return it.Note + "\x00" + it.Version + "\x00" + it.File + "\x00" + it.CID
}
func (e *Entry) key() string { return e.Note + "\x00" + e.Version + "\x00" + e.File + "\x00" + e.CID }

// NoteItems are the texts of notes to index: every current version of
// every live note (each side of a conflict).
func NoteItems(notes Notes) []Item {
	var out []Item
	for _, n := range notes.Live() {
		for _, h := range n.Heads {
			if !h.Removed {
				out = append(out, Item{Note: n.ID, Version: h.Event, Text: h.Text})
			}
		}
	}
	return out
}

// Build indexes items with emb, reusing the vectors of prev (an index
// built by the same spec) for the items it holds, and embedding the rest
// in batches. The result depends only on the items and the embedder.
func Build(ctx context.Context, items []Item, emb Embedder, prev *Index) (*Index, error) {
	spec := emb.Spec()
	reuse := map[string]*Entry{}
	if prev != nil && sameEmbedder(prev.Embedder, spec) {
		spec.Dim = prev.Embedder.Dim
		for i := range prev.Entries {
			reuse[prev.Entries[i].key()] = &prev.Entries[i]
		}
	}
	idx := &Index{Format: IndexFormat, Embedder: spec, Entries: make([]Entry, len(items))}
	var todo []int
	for i, it := range items {
		if e := reuse[it.key()]; e != nil {
			idx.Entries[i] = *e
			continue
		}
		idx.Entries[i] = Entry{Note: it.Note, Version: it.Version, File: it.File, CID: it.CID}
		todo = append(todo, i)
	}
	const batch = 256
	for len(todo) > 0 {
		n := min(batch, len(todo))
		texts := make([]string, n)
		for j, i := range todo[:n] {
			texts[j] = items[i].Text
		}
		vecs, err := emb.Embed(ctx, texts)
		if err != nil {
			return nil, err
		}
		if len(vecs) != n {
			return nil, fmt.Errorf("embedder %s gave %d vectors for %d texts", spec.Name, len(vecs), n)
		}
		for j, i := range todo[:n] {
			q := quantize(vecs[j])
			if idx.Embedder.Dim == 0 {
				idx.Embedder.Dim = len(q) // learnt from the first answer
			}
			if len(q) != idx.Embedder.Dim {
				return nil, fmt.Errorf("embedder %s gave a vector of %d values, want %d", spec.Name, len(q), idx.Embedder.Dim)
			}
			idx.Entries[i].setVec(q)
		}
		todo = todo[n:]
	}
	idx.sort()
	return idx, nil
}

// Carry is the index Build would make without embedding anything: the
// entries of prev (built by spec) for the items it holds. It is what a
// capsule keeps when its embedder is a provider's that only a node with
// the key can call; Missing says what is left to embed.
func Carry(items []Item, spec EmbedderSpec, prev *Index) *Index {
	idx := &Index{Format: IndexFormat, Embedder: spec}
	if prev == nil || !sameEmbedder(prev.Embedder, spec) {
		return idx
	}
	idx.Embedder = prev.Embedder
	reuse := map[string]*Entry{}
	for i := range prev.Entries {
		reuse[prev.Entries[i].key()] = &prev.Entries[i]
	}
	for _, it := range items {
		if e := reuse[it.key()]; e != nil {
			idx.Entries = append(idx.Entries, *e)
		}
	}
	idx.sort()
	return idx
}

// sameEmbedder reports whether an index built by have serves want: the
// same embedder and model, and the same dimension unless want leaves it to
// the model (0).
func sameEmbedder(have, want EmbedderSpec) bool {
	return have.Name == want.Name && have.Model == want.Model && (want.Dim == 0 || have.Dim == want.Dim) && have.Dim > 0
}

// Missing counts the items the index has no vector for.
func (idx *Index) Missing(items []Item) int {
	have := map[string]bool{}
	for i := range idx.Entries {
		have[idx.Entries[i].key()] = true
	}
	n := 0
	for _, it := range items {
		if !have[it.key()] {
			n++
		}
	}
	return n
}

func (idx *Index) sort() { slices.SortFunc(idx.Entries, entryOrder) }

// entryOrder puts notes (by id, then version) before files (by path).
func entryOrder(a, b Entry) int {
	if (a.File == "") != (b.File == "") {
		if a.File == "" {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.Note, b.Note), cmp.Compare(a.Version, b.Version), cmp.Compare(a.File, b.File), cmp.Compare(a.CID, b.CID))
}

// quantize scales v so its largest magnitude is 127 and rounds each value
// to a signed byte: exact for the built-in embedder's integer values on
// every machine. A zero vector stays zero.
func quantize(v []float32) []int8 {
	var m float64
	for _, x := range v {
		m = max(m, math.Abs(float64(x)))
	}
	q := make([]int8, len(v))
	if m == 0 || math.IsNaN(m) || math.IsInf(m, 0) {
		return q
	}
	for i, x := range v {
		q[i] = int8(math.Round(127 * float64(x) / m))
	}
	return q
}

func (e *Entry) setVec(q []int8) {
	e.vec = q
	b := make([]byte, len(q))
	var n int64
	for i, x := range q {
		b[i] = byte(x)
		n += int64(x) * int64(x)
	}
	e.Vector = base64.StdEncoding.EncodeToString(b)
	e.norm = float32(math.Sqrt(float64(n)))
}

// Encode writes the index as index.json: one entry per line, so that a
// diff shows which notes changed. An index without entries is EmptyIndex.
func (idx *Index) Encode() []byte {
	if len(idx.Entries) == 0 {
		return slices.Clone(EmptyIndex)
	}
	var b bytes.Buffer
	spec, _ := json.Marshal(idx.Embedder)
	b.Grow(len(idx.Entries) * (idx.Embedder.Dim*4/3 + 120))
	fmt.Fprintf(&b, "{\"format\":%q,\"embedder\":%s,\"entries\":[\n", IndexFormat, spec)
	for i := range idx.Entries {
		e := &idx.Entries[i]
		b.WriteByte('{')
		sep := ""
		for _, f := range [4][2]string{{"note", e.Note}, {"version", e.Version}, {"file", e.File}, {"cid", e.CID}} {
			if f[1] != "" {
				b.WriteString(sep + `"` + f[0] + `":`)
				writeJSONString(&b, f[1])
				sep = ","
			}
		}
		b.WriteString(`,"vector":"` + e.Vector + `"}`)
		if i < len(idx.Entries)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]}\n")
	return b.Bytes()
}

// writeJSONString writes s as a JSON string, as encoding/json would.
func writeJSONString(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
			q, _ := json.Marshal(s)
			b.Write(q)
			return
		}
	}
	b.WriteString(`"` + s + `"`)
}

// ErrBadIndex marks an index.json that is not one: a reader rebuilds it.
var ErrBadIndex = errors.New("not a tern index")

// ParseIndex reads index.json. EmptyIndex (and any index without entries)
// parses to an index without embedder.
func ParseIndex(data []byte) (*Index, error) {
	var idx Index
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&idx); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadIndex, err)
	}
	if len(idx.Entries) == 0 {
		return &Index{Format: IndexFormat, Embedder: idx.Embedder}, nil
	}
	if idx.Format != IndexFormat {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrBadIndex, idx.Format, IndexFormat)
	}
	if idx.Embedder.Name == "" || idx.Embedder.Dim <= 0 {
		return nil, fmt.Errorf("%w: the embedder has no name or dimension", ErrBadIndex)
	}
	for i := range idx.Entries {
		e := &idx.Entries[i]
		raw, err := base64.StdEncoding.DecodeString(e.Vector)
		if err != nil || len(raw) != idx.Embedder.Dim {
			return nil, fmt.Errorf("%w: entry %d: the vector is not %d base64 bytes", ErrBadIndex, i, idx.Embedder.Dim)
		}
		if (e.Note == "") == (e.File == "") || e.Note != "" && e.Version == "" || e.File != "" && e.CID == "" {
			return nil, fmt.Errorf("%w: entry %d: an entry is a note with its version, or a file with its cid", ErrBadIndex, i)
		}
		q := make([]int8, len(raw))
		for j, x := range raw {
			q[j] = int8(x)
		}
		e.setVec(q)
	}
	if !slices.IsSortedFunc(idx.Entries, entryOrder) {
		return nil, fmt.Errorf("%w: entries out of order", ErrBadIndex)
	}
	return &idx, nil
}

// arena returns every entry's vector, one after another in one slice, so
// that a search reads memory in order; made once per index.
func (idx *Index) arena() []int8 {
	idx.once.Do(func() {
		dim := idx.Embedder.Dim
		idx.vecs = make([]int8, len(idx.Entries)*dim)
		for i := range idx.Entries {
			copy(idx.vecs[i*dim:], idx.Entries[i].vec)
		}
	})
	return idx.vecs
}

// dot is the dot product of two vectors of one length, four lanes at a time.
func dot(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += int32(a[i]) * int32(b[i])
		s1 += int32(a[i+1]) * int32(b[i+1])
		s2 += int32(a[i+2]) * int32(b[i+2])
		s3 += int32(a[i+3]) * int32(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// Hit is one search result.
type Hit struct {
	Entry *Entry
	Score float32 // cosine similarity, -1 to 1
}

// Search returns the k entries most similar to query (a vector of the
// index's embedder), best first, among those keep accepts (nil: all) and
// that share something with it (a cosine above 0); ties go to the entry
// that sorts first.
func (idx *Index) Search(query []float32, k int, keep func(*Entry) bool) []Hit {
	q := quantize(query)
	if len(q) != idx.Embedder.Dim || k <= 0 {
		return nil
	}
	var qn int64
	for _, x := range q {
		qn += int64(x) * int64(x)
	}
	if qn == 0 {
		return nil
	}
	qnorm := float32(math.Sqrt(float64(qn)))
	// Brute force, on every core for a large index: each part keeps its own
	// best k, and the parts' lists, in entry order, merge stably.
	n := len(idx.Entries)
	parts := min(runtime.GOMAXPROCS(0), max(1, n/20_000))
	lists := make([][]Hit, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { lists[p] = idx.searchRange(q, qnorm, k, keep, p*n/parts, (p+1)*n/parts) })
	}
	wg.Wait()
	hits := slices.Concat(lists...)
	slices.SortStableFunc(hits, func(a, b Hit) int { return cmp.Compare(b.Score, a.Score) })
	return hits[:min(k, len(hits))]
}

// searchRange is Search over the entries from lo to hi.
func (idx *Index) searchRange(q []int8, qnorm float32, k int, keep func(*Entry) bool, lo, hi int) []Hit {
	hits := make([]Hit, 0, k+1)
	dim := idx.Embedder.Dim
	arena := idx.arena()
	for i := lo; i < hi; i++ {
		e := &idx.Entries[i]
		if e.norm == 0 || keep != nil && !keep(e) {
			continue
		}
		s := float32(dot(arena[i*dim:(i+1)*dim], q)) / (e.norm * qnorm)
		if s <= 0 || len(hits) == k && s <= hits[k-1].Score {
			continue
		}
		at, _ := slices.BinarySearchFunc(hits, s, func(h Hit, s float32) int { return cmp.Compare(s, h.Score) })
		for at < len(hits) && hits[at].Score == s {
			at++
		}
		hits = slices.Insert(hits, at, Hit{e, s})
		if len(hits) > k {
			hits = hits[:k]
		}
	}
	return hits
}

// Derive returns the working memory file and the index for a readable
// view: the notes rendered, and their index (plus files, the workspace's
// text files to index) by the embedder spec names. The built-in embedder
// is run here, reusing prev's vectors (prev may be nil); a provider's
// cannot be (it needs a key and the network), so its index carries prev's
// vectors for what is still current and leaves the rest for Build, when a
// node with the key searches.
func Derive(ctx context.Context, view []*journal.Event, spec EmbedderSpec, files []Item, prev *Index) (md []byte, idx *Index, err error) {
	notes := Fold(view)
	items := append(NoteItems(notes), files...)
	if spec == BuiltinSpec {
		if idx, err = Build(ctx, items, Builtin{}, prev); err != nil {
			return nil, nil, err
		}
	} else {
		idx = Carry(items, spec, prev)
	}
	return Render(notes), idx, nil
}

// MergeIndexes is the union of two indexes built by one spec; where both
// hold a vector for one text (a provider may answer with slightly different
// values twice), the one whose base64 sorts first, so the merge order does
// not matter. With different specs, nil.
func MergeIndexes(a, b *Index) *Index {
	switch {
	case a == nil || len(a.Entries) == 0:
		return b
	case b == nil || len(b.Entries) == 0:
		return a
	case a.Embedder != b.Embedder:
		return nil
	}
	out := &Index{Format: IndexFormat, Embedder: a.Embedder, Entries: slices.Clone(a.Entries)}
	at := map[string]int{}
	for i := range out.Entries {
		at[out.Entries[i].key()] = i
	}
	for _, e := range b.Entries {
		i, ok := at[e.key()]
		switch {
		case !ok:
			out.Entries = append(out.Entries, e)
		case e.Vector < out.Entries[i].Vector:
			out.Entries[i] = e
		}
	}
	out.sort()
	return out
}
