package capsule

import (
	"context"
	"fmt"
	"testing"

	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

// BenchmarkAppendANote measures one note appended (durably, its
// working_memory.md and index derived again and committed) to a capsule
// that holds n notes already.
//
//	go test ./capsule -run '^$' -bench AppendANote -benchtime 5x
func BenchmarkAppendANote(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("notes=%d", n), func(b *testing.B) {
			s := newSigner(b)
			dir := emptyCapsule(b, s, "bench")
			d, err := OpenDir(context.Background(), dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			drafts := make([]journal.Draft, n)
			for i := range drafts {
				drafts[i], _, _ = memory.AddDraft(fmt.Sprintf("note %d about the deploy of service %d and its port %d", i, i%97, 8000+i%13), nil)
			}
			for len(drafts) > 0 {
				k := min(len(drafts), 10_000)
				if _, err := d.Append(context.Background(), s, 0, drafts[:k]...); err != nil {
					b.Fatal(err)
				}
				drafts = drafts[k:]
			}
			for b.Loop() {
				dr, _, _ := memory.AddDraft("one more note", nil)
				if _, err := d.Append(context.Background(), s, 0, dr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
