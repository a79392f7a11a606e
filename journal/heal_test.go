package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// forkedCopies returns a machine's chain as two copies wrote it: both
// share seqs 1 and 2; then copy A wrote 2 more events and copy B 3 more.
func forkedCopies(t *testing.T, s Signer) (A, B []*Event) {
	t.Helper()
	w := &writer{s: s}
	shared := []*Event{w.next(t, 1, "note", `{"n":1}`), w.next(t, 2, "note", `{"n":2}`)}
	wa, wb := *w, *w
	A = append(slices.Clone(shared), wa.next(t, 3, "note", `{"a":3}`), wa.next(t, 4, "note", `{"a":4}`))
	B = append(slices.Clone(shared), wb.next(t, 3, "note", `{"b":3}`), wb.next(t, 4, "note", `{"b":4}`), wb.next(t, 5, "note", `{"b":5}`))
	return A, B
}

func TestHealKeepsTheLongestBranchAndReappendsTheOther(t *testing.T) {
	s := newSigner(t)
	A, B := forkedCopies(t, s)
	merged := Merge(A, B)
	if len(Forks(merged)) == 0 {
		t.Fatal("the copies did not fork")
	}
	healed, err := Heal(merged, s, testTime)
	if err != nil {
		t.Fatal(err)
	}
	if len(healed) != 3 || healed[2].Type != HealType {
		t.Fatalf("heal wrote %d events (%v), want the 2 of branch A again and a heal", len(healed), healed)
	}
	all := Merge(merged, healed)
	if problems := Check(all); len(problems) > 0 {
		t.Fatalf("after the heal: %v", problems)
	}
	view, aside := Readable(all)
	if !slices.Equal(ids(aside), ids(A[2:])) {
		t.Fatalf("set aside %v, want branch A's own events %v", ids(aside), ids(A[2:]))
	}
	var bodies []string
	for _, e := range view {
		bodies = append(bodies, string(e.Body))
	}
	for _, want := range []string{`{"a":3}`, `{"a":4}`, `{"b":3}`, `{"b":4}`, `{"b":5}`} {
		if !slices.Contains(bodies, want) {
			t.Errorf("the readable journal lost %s: %v", want, bodies)
		}
	}
	h := VectorOf(all)[s.Machine()]
	if h.Seq != 8 || h.ID != healed[2].ID || h.Aside == "" {
		t.Fatalf("head %+v, want the heal at seq 8 with a digest", h)
	}
	// The heal names what it replaced, and by what.
	var body HealBody
	if err := json.Unmarshal(healed[2].Body, &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Replaced) != 2 || body.Replaced[0].By == "" {
		t.Fatalf("heal body %+v", body)
	}
	// Appending after a heal continues its chain.
	path := newJournal(t)
	if err := ExtendFile(path, all); err != nil {
		t.Fatal(err)
	}
	l := mustOpen(t, path)
	more, err := l.Append(t.Context(), s, 0, draft("note", `{"after":1}`))
	if err != nil {
		t.Fatalf("append after the heal: %v", err)
	}
	if more[0].Seq != 9 || more[0].Prev != healed[2].ID {
		t.Fatalf("appended at seq %d after %s", more[0].Seq, more[0].Prev)
	}
	before := l.Disorder()
	if _, err := l.Append(t.Context(), s, 0, draft("note", `{"after":2}`)); err != nil || l.Disorder() != before {
		t.Fatalf("an append extending a healed chain moved Disorder (%v)", err)
	}
}

func TestHealRefusesWhatItCannotHeal(t *testing.T) {
	s, other := newSigner(t), newSigner(t)
	A, B := forkedCopies(t, s)
	t.Run("a whole chain", func(t *testing.T) {
		if _, err := Heal(A, s, testTime); !errors.Is(err, ErrNothingToHeal) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("another machine's fork", func(t *testing.T) {
		if _, err := Heal(Merge(A, B), other, testTime); !errors.Is(err, ErrNothingToHeal) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a missing seq", func(t *testing.T) {
		gapped := concat(A[:1], A[2:], B[2:])
		_, err := Heal(gapped, s, testTime)
		if err == nil || !strings.Contains(err.Error(), "seq 2 is missing") {
			t.Fatalf("got %v", err)
		}
	})
}

// A heal replicates like any event: a copy that still holds the fork,
// merged with the healed one, reads the healed chain.
func TestAHealedForkStaysHealedWhateverCopiesMerge(t *testing.T) {
	s := newSigner(t)
	A, B := forkedCopies(t, s)
	healed, err := Heal(Merge(A, B), s, testTime)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		events []*Event
	}{
		{"branch A and the heal", concat(A, healed)},
		{"everything, in another order", concat(healed, B, A)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Merge(Merge(A, B), tc.events)
			if p := Check(got); len(p) > 0 {
				t.Fatalf("%v", p)
			}
		})
	}
}

// Holders that exchange Since both ways, as the sync protocol does, end
// up with the same events, whatever forks and heals they hold.
func TestExchangingSinceConverges(t *testing.T) {
	s, o := newSigner(t), newSigner(t)
	A, B := forkedCopies(t, s)
	healed, err := Heal(Merge(A, B), s, testTime)
	if err != nil {
		t.Fatal(err)
	}
	O := chainOf(t, o, 3)
	all := Merge(Merge(A, B), concat(healed, O))
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		holders := make([][]*Event, 2+rng.IntN(3))
		pick := func() []*Event {
			switch rng.IntN(5) {
			case 0:
				return A
			case 1:
				return B
			case 2:
				return all
			case 3:
				return concat(A, healed)
			}
			var some []*Event
			for _, e := range all {
				if rng.IntN(2) == 0 {
					some = append(some, e)
				}
			}
			return some
		}
		var union []*Event
		for i := range holders {
			holders[i] = Merge(pick(), O[:rng.IntN(4)])
			union = Merge(union, holders[i])
		}
		for round := 0; ; round++ {
			changed := false
			for i := range holders {
				for j := range holders {
					if i == j {
						continue
					}
					// i starts: j sends what i lacks, then i sends what j lacks.
					before := len(holders[i]) + len(holders[j])
					holders[i] = Merge(holders[i], Since(holders[j], VectorOf(holders[i])))
					holders[j] = Merge(holders[j], Since(holders[i], VectorOf(holders[j])))
					changed = changed || len(holders[i])+len(holders[j]) != before
				}
			}
			if !changed {
				break
			}
			if round > 10 {
				t.Fatalf("seed %d: no fixpoint after %d rounds", seed, round)
			}
		}
		want := ids(union)
		for i, h := range holders {
			if !slices.Equal(ids(h), want) {
				t.Fatalf("seed %d: holder %d has %d events, the union %d", seed, i, len(h), len(want))
			}
			if !slices.Equal(vecString(VectorOf(h)), vecString(VectorOf(holders[0]))) {
				t.Fatalf("seed %d: vectors differ", seed)
			}
		}
	}
}

func vecString(v Vector) []string {
	var out []string
	for m, h := range v {
		out = append(out, fmt.Sprintf("%s %d %s %s", m, h.Seq, h.ID, h.Aside))
	}
	slices.Sort(out)
	return out
}

// Two copies that healed one fork each their own way (written apart
// under one key: one copy's branch A grew longer first), merged: both
// sides of the fork are set aside, the line ends below it, and a third
// heal signs again, once each, what is live above it.
func TestTwoHealsOfOneForkMadeApartHealAgain(t *testing.T) {
	s := newSigner(t)
	A, B := forkedCopies(t, s)
	h1, err := Heal(Merge(A, B), s, testTime) // keeps B, the longer
	if err != nil {
		t.Fatal(err)
	}
	w := &writer{s: s, head: Head{Seq: A[3].Seq, ID: A[3].ID}}
	longerA := append(slices.Clone(A), w.next(t, 5, "note", `{"a":5}`), w.next(t, 6, "note", `{"a":6}`))
	h2, err := Heal(Merge(longerA, B), s, testTime) // keeps A, now the longer
	if err != nil {
		t.Fatal(err)
	}
	both := Merge(Merge(Merge(A, B), h1), Merge(longerA, h2))
	if len(Check(both)) == 0 {
		t.Fatal("two heals that chose differently read as whole")
	}
	h3, err := Heal(both, s, testTime)
	if err != nil {
		t.Fatalf("a third heal: %v", err)
	}
	all := Merge(both, h3)
	if p := Check(all); len(p) > 0 {
		t.Fatalf("after the third heal: %v", p)
	}
	view, _ := Readable(all)
	count := map[string]int{}
	for _, e := range view {
		count[string(e.Body)]++
	}
	for _, body := range []string{`{"a":3}`, `{"a":4}`, `{"a":5}`, `{"a":6}`, `{"b":3}`, `{"b":4}`, `{"b":5}`} {
		if count[body] != 1 {
			t.Errorf("%s is read %d times, want once", body, count[body])
		}
	}
}

func TestAHealBodyIsReadStrictly(t *testing.T) {
	for body, want := range map[string]bool{
		`{"replaced":[{"id":"x","by":"y"}]}`:       true,
		`{"replaced":[{"id":"x"}],"note":"newer"}`: true,
		`{"replaced":[]}`:                          true,
		`{"Replaced":[{"id":"x"}]}`:                false,
		`{"replaced":[{"ID":"x"}]}`:                false,
		`{"replaced":[null]}`:                      false,
		`{"replaced":[{"id":null}]}`:               false,
		`{"replaced":[{"id":"x","by":null}]}`:      false,
		`{"replaced":"x"}`:                         false,
		`["x"]`:                                    false,
	} {
		if _, ok := readHeal([]byte(body)); ok != want {
			t.Errorf("%s: read %v, want %v", body, ok, want)
		}
	}
}

// Two copies that healed one fork the same way, apart (each signed the
// other branch's content again, at other times), merged and healed again:
// each content is read once.
func TestTwoHealsOfOneForkTheSameWayKeepEachContentOnce(t *testing.T) {
	s := newSigner(t)
	A, B := forkedCopies(t, s)
	forked := Merge(A, B)
	h1, err := Heal(forked, s, testTime)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := Heal(forked, s, testTime.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	both := Merge(Merge(forked, h1), h2)
	h3, err := Heal(both, s, testTime.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	all := Merge(both, h3)
	if p := Check(all); len(p) > 0 {
		t.Fatalf("after the third heal: %v", p)
	}
	view, _ := Readable(all)
	count := map[string]int{}
	for _, e := range view {
		count[string(e.Body)]++
	}
	for _, body := range []string{`{"a":3}`, `{"a":4}`, `{"b":3}`, `{"b":4}`, `{"b":5}`} {
		if count[body] != 1 {
			t.Errorf("%s is read %d times, want once", body, count[body])
		}
	}
}
