package nemesis

import (
	"slices"
	"testing"
	"time"
)

func TestPlanDecidesEachPacketsFate(t *testing.T) {
	ab := Direction{0, 1}
	for _, tc := range []struct {
		name   string
		faults Faults
		cut    bool
		// check is told the copies of each of 1,000 packets.
		check func(t *testing.T, fates [][]time.Duration)
	}{
		{name: "no faults deliver every packet once at once", check: func(t *testing.T, fates [][]time.Duration) {
			for _, f := range fates {
				if !slices.Equal(f, []time.Duration{0}) {
					t.Fatalf("a packet delivered %v, want once at 0", f)
				}
			}
		}},
		{name: "a delay with jitter stays within delay and delay plus jitter", faults: Faults{Delay: 5 * time.Millisecond, Jitter: 3 * time.Millisecond}, check: func(t *testing.T, fates [][]time.Duration) {
			var spread bool
			for _, f := range fates {
				if len(f) != 1 || f[0] < 5*time.Millisecond || f[0] >= 8*time.Millisecond {
					t.Fatalf("a packet delivered %v, want once in [5ms, 8ms)", f)
				}
				spread = spread || f[0] != fates[0][0]
			}
			if !spread {
				t.Fatal("every packet got the same delay: no jitter")
			}
		}},
		{name: "a loss of 1 drops every packet", faults: Faults{Loss: 1}, check: func(t *testing.T, fates [][]time.Duration) {
			for _, f := range fates {
				if len(f) != 0 {
					t.Fatalf("a packet delivered %v under a loss of 1", f)
				}
			}
		}},
		{name: "a loss of 0.3 drops some packets and not others", faults: Faults{Loss: 0.3}, check: func(t *testing.T, fates [][]time.Duration) {
			lost := 0
			for _, f := range fates {
				if len(f) == 0 {
					lost++
				}
			}
			if lost == 0 || lost == len(fates) {
				t.Fatalf("%d of %d lost under a loss of 0.3", lost, len(fates))
			}
		}},
		{name: "a dup of 1 delivers every packet twice, the copy no sooner", faults: Faults{Delay: time.Millisecond, Dup: 1}, check: func(t *testing.T, fates [][]time.Duration) {
			for _, f := range fates {
				if len(f) != 2 || f[1] < f[0] {
					t.Fatalf("a packet delivered %v, want twice in order", f)
				}
			}
		}},
		{name: "a reorder of 1 holds every packet back by Hold", faults: Faults{Delay: time.Millisecond, Reorder: 1, Hold: 50 * time.Millisecond}, check: func(t *testing.T, fates [][]time.Duration) {
			for _, f := range fates {
				if !slices.Equal(f, []time.Duration{51 * time.Millisecond}) {
					t.Fatalf("a packet delivered %v, want once at 51ms", f)
				}
			}
		}},
		{name: "a reorder of 0.5 lets later packets overtake earlier ones", faults: Faults{Delay: time.Millisecond, Reorder: 0.5}, check: func(t *testing.T, fates [][]time.Duration) {
			overtaken := false
			for i := 1; i < len(fates); i++ {
				// Packets arrive a millisecond apart.
				if len(fates[i]) > 0 && len(fates[i-1]) > 0 && time.Millisecond+fates[i][0] < fates[i-1][0] {
					overtaken = true
				}
			}
			if !overtaken {
				t.Fatal("no packet overtook the one before it")
			}
		}},
		{name: "a cut direction drops everything whatever its faults", faults: Faults{Dup: 1}, cut: true, check: func(t *testing.T, fates [][]time.Duration) {
			for _, f := range fates {
				if len(f) != 0 {
					t.Fatalf("a cut direction delivered %v", f)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(7, 3, Faults{})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Set(ab, tc.faults); err != nil {
				t.Fatal(err)
			}
			if tc.cut {
				p.Cut(ab)
			}
			fates := make([][]time.Duration, 1000)
			for i := range fates {
				fates[i] = p.Decide(ab)
			}
			tc.check(t, fates)
		})
	}
}

func TestTheSameSeedDecidesTheSameAndDirectionsDoNotDisturbEachOther(t *testing.T) {
	f := Faults{Delay: time.Millisecond, Jitter: 4 * time.Millisecond, Loss: 0.1, Dup: 0.1, Reorder: 0.1}
	run := func(seed uint64, alsoOther bool) [][]time.Duration {
		p, err := NewPlan(seed, 3, f)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]time.Duration
		for range 200 {
			out = append(out, p.Decide(Direction{0, 1}))
			if alsoOther {
				p.Decide(Direction{1, 0})
				p.Decide(Direction{2, 1})
			}
		}
		return out
	}
	a, b := run(42, false), run(42, true)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Fatal("the same seed decided differently once other directions carried packets too")
	}
	if c := run(43, false); slices.EqualFunc(a, c, slices.Equal) {
		t.Fatal("seeds 42 and 43 decided the same 200 packets alike")
	}
}

func TestACutEndsWithItsHeal(t *testing.T) {
	p, err := NewPlan(1, 2, Faults{})
	if err != nil {
		t.Fatal(err)
	}
	ab, ba := Direction{0, 1}, Direction{1, 0}
	p.Cut(ab)
	if !p.IsCut(ab) || p.IsCut(ba) {
		t.Fatal("a cut of 0→1 is not one way")
	}
	if p.Decide(ba) == nil {
		t.Fatal("the direction not cut dropped a packet")
	}
	p.Heal(ab)
	if p.IsCut(ab) || p.Decide(ab) == nil {
		t.Fatal("the healed direction still drops")
	}
	p.Cut(ab)
	p.Cut(ba)
	p.HealAll()
	if p.IsCut(ab) || p.IsCut(ba) {
		t.Fatal("HealAll left a cut")
	}
}

func TestBadFaultsAreRefusedWithWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Faults
	}{
		{"a loss above 1", Faults{Loss: 1.5}},
		{"a negative dup", Faults{Dup: -0.1}},
		{"a reorder that is not a number", Faults{Reorder: nan()}},
		{"a negative delay", Faults{Delay: -time.Millisecond}},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			if err := tc.f.Check(); err == nil {
				t.Fatalf("%+v passed", tc.f)
			}
			if _, err := NewPlan(1, 2, tc.f); err == nil {
				t.Fatalf("NewPlan took %+v", tc.f)
			}
		})
	}
	if _, err := NewPlan(1, 1, Faults{}); err == nil {
		t.Fatal("a wire of one node was made")
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}
