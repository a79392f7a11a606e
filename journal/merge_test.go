package journal

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// replica is one machine's copy of the journal in a simulation.
type replica struct {
	w      *writer
	events map[string]*Event
	clock  uint64
}

func (r *replica) list() []*Event {
	out := make([]*Event, 0, len(r.events))
	for _, e := range r.events {
		out = append(out, e)
	}
	return out
}

// simulate lets machines write and sync at random, so that their chains
// interleave in Lamport order. It returns every machine's copy.
func simulate(tb testing.TB, rng *rand.Rand, machines, steps int) ([][]*Event, []Signer) {
	tb.Helper()
	rs := make([]*replica, machines)
	for i := range rs {
		rs[i] = &replica{w: &writer{s: newSigner(tb)}, events: map[string]*Event{}}
	}
	for step := range steps {
		r := rs[rng.IntN(machines)]
		if rng.IntN(10) < 7 {
			r.clock++
			e := r.w.next(tb, r.clock, "test", fmt.Sprintf(`{"step":%d}`, step))
			r.events[e.ID] = e
			continue
		}
		from := rs[rng.IntN(machines)]
		for id, e := range from.events {
			r.events[id] = e
			r.clock = max(r.clock, e.Clock)
		}
	}
	out := make([][]*Event, machines)
	signers := make([]Signer, machines)
	for i, r := range rs {
		out[i], signers[i] = r.list(), r.w.s
	}
	return out, signers
}

// subset picks a random subset, in random order, with some events repeated.
func subset(rng *rand.Rand, events []*Event) []*Event {
	var out []*Event
	for _, e := range events {
		if rng.IntN(2) == 0 {
			out = append(out, e)
			if rng.IntN(10) == 0 {
				out = append(out, e)
			}
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func shuffled(rng *rand.Rand, events []*Event) []*Event {
	out := slices.Clone(events)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func sameLines(tb testing.TB, what string, got, want []*Event) {
	tb.Helper()
	if !slices.Equal(lines(got), lines(want)) {
		tb.Fatalf("%s: %d events differ from %d", what, len(got), len(want))
	}
}

func TestMergeIsASetUnionInTotalOrder(t *testing.T) {
	for _, machines := range []int{2, 3} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%d machines, seed %d", machines, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(machines)))
				reps, signers := simulate(t, rng, machines, 120)
				all := Merge(nil, nil)
				for _, r := range reps {
					all = Merge(all, r)
				}
				if problems := Check(all); problems != nil {
					t.Fatalf("honest machines made chain problems: %v", problems)
				}
				// A fork that ties with its other side on (clock, machine,
				// seq): only the id orders the two.
				i := slices.IndexFunc(all, func(e *Event) bool { return e.Seq == 2 && e.Machine == signers[0].Machine() })
				all = Merge(all, []*Event{at(t, signers[0], 2, all[i].Prev, all[i].Clock, `{"fork":true}`)})
				for round := range 30 {
					var a, b, c []*Event
					if round%2 == 0 { // whole replicas, as peers hold them
						a, b, c = shuffled(rng, reps[rng.IntN(machines)]), shuffled(rng, reps[rng.IntN(machines)]), shuffled(rng, reps[rng.IntN(machines)])
					} else { // arbitrary subsets, repeats included
						a, b, c = subset(rng, all), subset(rng, all), subset(rng, all)
					}
					ab := Merge(a, b)
					sameLines(t, "commutative", Merge(b, a), ab)
					sameLines(t, "idempotent", Merge(a, a), Merge(a, nil))
					sameLines(t, "absorbs what it holds", Merge(ab, b), ab)
					sameLines(t, "associative", Merge(ab, c), Merge(a, Merge(b, c)))
					sameLines(t, "sorted inputs merge the same", Merge(Merge(a, nil), Merge(b, nil)), ab)
					want := map[string]bool{}
					for _, e := range concat(a, b) {
						want[e.ID] = true
					}
					if len(ab) != len(want) {
						t.Fatalf("union has %d events, want %d", len(ab), len(want))
					}
					for i := 1; i < len(ab); i++ {
						if Compare(ab[i-1], ab[i]) >= 0 {
							t.Fatalf("not in strict total order at %d", i)
						}
					}
				}
			})
		}
	}
}

func TestMergeKeepsBothSidesOfAFork(t *testing.T) {
	s := newSigner(t)
	A := chainOf(t, s, 2)
	x := at(t, s, 2, A[0].ID, 2, `{"side":"x"}`)
	got := Merge(A, []*Event{x})
	if len(got) != 3 || len(Forks(got)) != 1 {
		t.Fatalf("got %d events, forks %v", len(got), Forks(got))
	}
}

func TestUnknownFieldsSurviveMergeAndAFileRoundTrip(t *testing.T) {
	s := newSigner(t)
	extra, err := rawMember("zz_from_the_future", []byte(`{"k":[1,"two",null]}`))
	if err != nil {
		t.Fatal(err)
	}
	odd, err := newEvent(s, Stamp{Seq: 1, Clock: 1, Time: testTime}, draft("vendor.custom", ``), []byte(`{"opaque":"\u0000x"}`), []member{extra})
	if err != nil {
		t.Fatal(err)
	}
	plain := chainOf(t, newSigner(t), 2)
	merged := Merge(plain, []*Event{odd})
	path := newJournal(t)
	if err := ExtendFile(path, merged); err != nil {
		t.Fatal(err)
	}
	events, bad, torn := Decode(readFile(t, path))
	if bad != nil || torn != 0 || len(events) != 3 {
		t.Fatalf("read back %d events, bad %v, torn %d", len(events), bad, torn)
	}
	i := slices.IndexFunc(events, func(e *Event) bool { return e.ID == odd.ID })
	if i < 0 || string(events[i].Line()) != string(odd.Line()) || events[i].Type != "vendor.custom" {
		t.Fatalf("the event with unknown fields changed")
	}
}
