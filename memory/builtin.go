package memory

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"unicode"

	"github.com/tern-dev/tern/internal/providerid"
)

// BuiltinDim is the dimension of the built-in embedder's vectors.
const BuiltinDim = 384

// Builtin is the embedder that needs no download and no network: feature
// hashing of a text's words (lowercased, lightly stemmed, stop words left
// out), their first five letters, its word pairs and its words' character
// trigrams into BuiltinDim signed buckets (FNV-1a; the hash's top bit picks
// the sign). Each feature counts once: words weigh 6, five-letter stems 3,
// pairs 2, trigrams 1. The values are integers, so every machine computes
// the same vector exactly. It finds notes that share words or word stems
// with the query, not synonyms; a provider embedder does that.
type Builtin struct{}

// BuiltinSpec is the spec an index built by Builtin records.
var BuiltinSpec = EmbedderSpec{Name: string(providerid.Builtin), Model: "tern-hash-v1", Dim: BuiltinDim}

// Spec returns BuiltinSpec.
func (Builtin) Spec() EmbedderSpec { return BuiltinSpec }

// Embed returns the vector of each text.
func (Builtin) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = builtinVector(t)
	}
	return out, nil
}

// feature is one hashed feature of a text and its weight.
type feature struct {
	hash   uint32
	weight float32
}

func builtinVector(text string) []float32 {
	v := make([]float32, BuiltinDim)
	for _, f := range featuresOf(text) {
		w := f.weight
		if f.hash&0x80000000 != 0 {
			w = -w
		}
		v[f.hash%BuiltinDim] += w
	}
	return v
}

// builtinFeatures are a text's features as a set: hash → weight.
func builtinFeatures(text string) map[uint32]float32 {
	fs := featuresOf(text)
	m := make(map[uint32]float32, len(fs))
	for _, f := range fs {
		m[f.hash] += f.weight
	}
	return m
}

// featuresOf lists a text's features, each once.
func featuresOf(text string) []feature {
	words := terms(text)
	fs := make([]feature, 0, len(words)*10)
	for i, w := range words {
		fs = append(fs, feature{fnv1a("w:", w, "", ""), 6})
		if r := []rune(w); len(r) > 5 {
			fs = append(fs, feature{fnv1a("f:", string(r[:5]), "", ""), 3}) // a crude stem: indent·ation, rotat·ion
		}
		if i > 0 {
			fs = append(fs, feature{fnv1a("p:", words[i-1], " ", w), 2})
		}
		r := []rune("^" + w + "$")
		for j := 0; j+3 <= len(r); j++ {
			fs = append(fs, feature{fnv1a("t:", string(r[j:j+3]), "", ""), 1})
		}
	}
	// Presence, not counts: a feature said twice is no closer.
	slices.SortFunc(fs, func(a, b feature) int { return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.weight, b.weight)) })
	return slices.Compact(fs)
}

// fnv1a is the 32-bit FNV-1a hash of the concatenation of a, b, c and d.
func fnv1a(a, b, c, d string) uint32 {
	h := uint32(2166136261)
	for _, s := range [4]string{a, b, c, d} {
		for i := 0; i < len(s); i++ {
			h ^= uint32(s[i])
			h *= 16777619
		}
	}
	return h
}

// terms are the stemmed words of text, stop words left out.
func terms(text string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if stopWords[f] {
			continue
		}
		out = append(out, stem(f))
	}
	return out
}

// stem takes common English endings off a word, so that "deploys",
// "deployed", "deploying" and "deployment" meet "deploy".
func stem(w string) string {
	for _, suf := range []string{"ments", "ment", "ings", "ing", "ied", "ies", "ers", "er", "ed", "es", "s"} {
		if len(w) > len(suf)+2 && strings.HasSuffix(w, suf) {
			w = strings.TrimSuffix(w, suf)
			if suf == "ied" || suf == "ies" {
				w += "y"
			}
			if n := len(w); n > 3 && w[n-1] == w[n-2] && strings.IndexByte("bdgklmnprt", w[n-1]) >= 0 {
				w = w[:n-1] // logg·ing, plann·ed
			}
			break
		}
	}
	return w
}

var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be but by can do does for from has have how i in
		is it its me my of on or our so that the their them then there these they this to was we
		were what when where which who why will with you your`) {
		stopWords[w] = true
	}
}
