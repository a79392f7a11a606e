package journal

import (
	"slices"
	"testing"
)

func TestVector(t *testing.T) {
	a, b := newSigner(t), newSigner(t)
	A, B := chainOf(t, a, 4), chainOf(t, b, 2)
	A3x := at(t, a, 3, A[1].ID, 3, `{"x":1}`)

	t.Run("the zero vector is empty and readable", func(t *testing.T) {
		var v Vector
		if h := v[a.Machine()]; h != (Head{}) {
			t.Fatalf("got %v", h)
		}
		if got := Since(A, v); len(got) != 4 {
			t.Fatalf("got %d events", len(got))
		}
	})
	t.Run("a vector holds each machine's highest seq", func(t *testing.T) {
		v := VectorOf(concat(B, A[:3]))
		if v[a.Machine()] != (Head{Seq: 3, ID: A[2].ID}) || v[b.Machine()] != (Head{Seq: 2, ID: B[1].ID}) || len(v) != 2 {
			t.Fatalf("got %v", v)
		}
	})
	t.Run("a fork stops the readable line and shows in the digest of the events aside", func(t *testing.T) {
		v := VectorOf(concat(A[:3], []*Event{A3x}))
		h := v[a.Machine()]
		if h.Seq != 2 || h.ID != A[1].ID || h.Aside == "" {
			t.Fatalf("got %+v, want seq 2 %s and a digest", h, A[1].ID)
		}
		if again := VectorOf([]*Event{A3x, A[2], A[1], A[0]}); again[a.Machine()] != h {
			t.Fatalf("the vector depends on the order of the events: %+v", again)
		}
	})
	t.Run("since a vector gives what its holder lacks, in order", func(t *testing.T) {
		v := VectorOf(concat(A[:2], B))
		got := Since(concat(A, B), v)
		if !slices.Equal(ids(got), ids(A[2:])) {
			t.Fatalf("got %v", ids(got))
		}
	})
	t.Run("since a vector on a branch we have never seen gives all our chain", func(t *testing.T) {
		v := VectorOf(concat(A[:2], []*Event{A3x}))
		got := Since(A, v)
		if !slices.Equal(ids(got), ids(A)) {
			t.Fatalf("got %v", ids(got))
		}
	})
	t.Run("since a vector of a holder that knows the fork gives our side from the fork", func(t *testing.T) {
		v := VectorOf(concat(A[:2], []*Event{A3x}, A[2:3]))
		got := Since(A, v)
		if !slices.Equal(ids(got), ids(A[2:])) {
			t.Fatalf("got %v, want %v", ids(got), ids(A[2:]))
		}
	})
	t.Run("since the vector we hold gives nothing", func(t *testing.T) {
		all := concat(A, []*Event{A3x}, B)
		if got := Since(all, VectorOf(all)); len(got) != 0 {
			t.Fatalf("got %v", ids(got))
		}
	})
	t.Run("a clone is independent", func(t *testing.T) {
		v := VectorOf(A)
		c := v.Clone()
		c[a.Machine()] = Head{}
		if v[a.Machine()].Seq != 4 {
			t.Fatal("clone shares storage")
		}
	})
}
