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
	t.Run("a fork at the head reports the smaller id", func(t *testing.T) {
		v := VectorOf(concat(A[:3], []*Event{A3x}))
		want := min(A[2].ID, A3x.ID)
		if v[a.Machine()].ID != want {
			t.Fatalf("got %v, want %s", v[a.Machine()], want)
		}
	})
	t.Run("since a vector gives what its holder lacks, in order", func(t *testing.T) {
		v := VectorOf(concat(A[:2], B))
		got := Since(concat(A, B), v)
		if !slices.Equal(ids(got), ids(A[2:])) {
			t.Fatalf("got %v", ids(got))
		}
	})
	t.Run("since a vector on the other side of a fork gives our side", func(t *testing.T) {
		v := VectorOf(concat(A[:2], []*Event{A3x}))
		got := Since(A, v)
		if !slices.Equal(ids(got), ids(A[2:])) {
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
