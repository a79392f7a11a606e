package journal

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// at builds machine s's event at seq with the given prev and clock.
func at(tb testing.TB, s Signer, seq uint64, prev string, clock uint64, body string) *Event {
	tb.Helper()
	e, err := NewEvent(s, Stamp{Seq: seq, Prev: prev, Clock: clock, Time: testTime}, draft("test", body))
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func ids(events []*Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

func TestCheckAndReadable(t *testing.T) {
	a, b := newSigner(t), newSigner(t)
	if a.Machine() > b.Machine() {
		a, b = b, a
	}
	A := chainOf(t, a, 5) // clocks 1..5
	B := chainOf(t, b, 3)
	A3x := at(t, a, 3, A[1].ID, 3, `{"other":"side"}`) // fork of A at seq 3
	A3bad := at(t, a, 3, A[0].ID, 3, `{}`)             // prev skips seq 2
	A2slow := at(t, a, 2, A[0].ID, 1, `{}`)            // clock does not grow
	forkIDs := []string{A[2].ID, A3x.ID}
	slices.Sort(forkIDs)

	type problem struct {
		sentinel error
		machine  string
		seq      uint64
		says     string
	}
	tests := []struct {
		name        string
		events      []*Event
		problems    []problem
		quarantined []*Event
		why         string // what Quarantined says of each, when one reason covers all
	}{
		{"sound chains have no problems", concat(A, B), nil, nil, ""},
		{"repeated events are one event", concat(A, B, A, B[:1]), nil, nil, ""},
		{"a missing seq is a gap that quarantines the rest of the chain",
			concat(A[:2], A[3:], B),
			[]problem{{ErrBrokenChain, a.Machine(), 4, "seq 3 is missing"}},
			A[3:], AsideBrokenChain},
		{"a chain that starts above seq 1 is a gap",
			concat(A[2:], B),
			[]problem{{ErrBrokenChain, a.Machine(), 3, "seqs 1 to 2 are missing"}},
			A[2:], AsideBrokenChain},
		{"a prev that is not the previous event breaks the chain",
			concat(A[:2], []*Event{A3bad}, B),
			[]problem{{ErrBrokenChain, a.Machine(), 3, "not the id of seq 2"}},
			[]*Event{A3bad}, AsideBrokenChain},
		{"a clock that does not grow breaks the chain",
			[]*Event{A[0], A2slow},
			[]problem{{ErrBrokenChain, a.Machine(), 2, "not above clock 1"}},
			[]*Event{A2slow}, AsideBrokenChain},
		{"two events at one seq are a fork that quarantines both sides and what follows",
			concat(A, []*Event{A3x}, B),
			[]problem{{ErrFork, a.Machine(), 3, strings.Join(forkIDs, ", ")}},
			concat(A[2:], []*Event{A3x}), AsideFork},
		{"problems of several machines come in machine then seq order",
			concat(B[1:], A[:1], A[2:], []*Event{A3x}),
			[]problem{
				{ErrBrokenChain, a.Machine(), 3, "seq 2 is missing"},
				{ErrFork, a.Machine(), 3, "fork"},
				{ErrBrokenChain, b.Machine(), 2, "seq 1 is missing"},
			},
			concat(A[2:], []*Event{A3x}, B[1:]), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.events)
			if len(got) != len(tt.problems) {
				t.Fatalf("got %d problems %v, want %d", len(got), got, len(tt.problems))
			}
			for i, p := range tt.problems {
				err := got[i]
				if !errors.Is(err, p.sentinel) {
					t.Fatalf("problem %d = %v, want %v", i, err, p.sentinel)
				}
				for _, s := range []string{"machine " + p.machine, fmt.Sprintf("seq %d", p.seq), p.says} {
					if !strings.Contains(err.Error(), s) {
						t.Fatalf("problem %d %q does not say %q", i, err, s)
					}
				}
			}
			view, quarantined := Readable(tt.events)
			wantQ := Merge(tt.quarantined, nil)
			if !slices.Equal(ids(quarantined), ids(wantQ)) {
				t.Fatalf("quarantined %d events, want %d", len(quarantined), len(wantQ))
			}
			all := Merge(tt.events, nil)
			if len(view)+len(quarantined) != len(all) || !slices.IsSortedFunc(view, Compare) {
				t.Fatalf("view %d + quarantined %d != %d events, or view not in order", len(view), len(quarantined), len(all))
			}
			for _, e := range view {
				if slices.Contains(ids(quarantined), e.ID) {
					t.Fatalf("%s both in view and quarantined", e)
				}
			}
			why := Quarantined(tt.events)
			if len(why) != len(quarantined) {
				t.Fatalf("Quarantined gives %d reasons for %d events aside", len(why), len(quarantined))
			}
			for _, e := range quarantined {
				if w, ok := why[e.ID]; !ok || tt.why != "" && w != tt.why {
					t.Fatalf("Quarantined says %q of %s, want %q", w, e, tt.why)
				}
			}
		})
	}
	t.Run("forks are listed with sorted ids", func(t *testing.T) {
		got := Forks(concat(A, []*Event{A3x}, B))
		want := []Fork{{Machine: a.Machine(), Seq: 3, IDs: forkIDs}}
		if len(got) != 1 || got[0].Machine != want[0].Machine || got[0].Seq != 3 || !slices.Equal(got[0].IDs, forkIDs) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		var fe *ForkError
		if !errors.As(Check(concat(A, []*Event{A3x}))[0], &fe) || fe.Seq != 3 {
			t.Fatalf("not a *ForkError")
		}
	})
	t.Run("a set without forks has none", func(t *testing.T) {
		if f := Forks(concat(A, B)); f != nil {
			t.Fatalf("got %v", f)
		}
	})
}

func concat(parts ...[]*Event) []*Event {
	var out []*Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
