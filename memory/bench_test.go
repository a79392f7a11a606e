package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// syntheticNotes makes n notes of 8 to 30 words drawn from a vocabulary of
// 5,000 made-up words (Zipf-distributed, as words in notes are).
func syntheticNotes(n int) []Item {
	r := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 5000)
	for i := range vocab {
		var b strings.Builder
		for j := 0; j < 3+r.IntN(6); j++ {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
		vocab[i] = b.String()
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, uint64(len(vocab)-1))
	items := make([]Item, n)
	for i := range items {
		words := make([]string, 8+r.IntN(23))
		for j := range words {
			words[j] = vocab[z.Uint64()]
		}
		items[i] = Item{Note: fmt.Sprintf("note_%016x", i), Version: fmt.Sprintf("v%d", i), Text: strings.Join(words, " ")}
	}
	return items
}

// BenchmarkMemory100k builds the built-in index of 100,000 notes and
// searches it: build time per op, the index's size, what a capsule spends
// on its index at each note appended (parse the old index, rebuild reusing
// its vectors, encode), and the latency of a query (embedding it and
// ranking every note) at the median and p99.
//
//	go test ./memory -run '^$' -bench Memory100k -benchtime 1x
func BenchmarkMemory100k(b *testing.B) {
	items := syntheticNotes(100_000)
	ctx := context.Background()
	var idx *Index
	for b.Loop() {
		var err error
		if idx, err = Build(ctx, items, Builtin{}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	start := time.Now()
	enc := idx.Encode()
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "encode-ms")
	b.ReportMetric(float64(len(enc))/(1<<20), "index-MiB")

	start = time.Now()
	if _, err := ParseIndex(enc); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "parse-ms")
	start = time.Now()
	if _, err := Build(ctx, items, Builtin{}, idx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "rebuild-reusing-ms")

	var lat []time.Duration
	for i := 0; i < 300; i++ {
		q := items[(i*7919)%len(items)].Text
		q = strings.Join(strings.Fields(q)[:4], " ")
		t0 := time.Now()
		v, _ := Builtin{}.Embed(ctx, []string{q})
		idx.Search(v[0], 10, nil)
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "query-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "query-p99-ms")
}
