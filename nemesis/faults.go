package nemesis

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Faults is what one direction of the wire does to the packets it
// carries. The zero value delivers every packet once, at once.
type Faults struct {
	Delay  time.Duration // every packet waits this long
	Jitter time.Duration // and a further uniform [0, Jitter)
	// Loss, Dup and Reorder are probabilities in [0, 1]: a packet is
	// dropped; a packet delivered is delivered twice (the copy up to
	// Delay+Jitter later); a packet is held back by Hold more, so the
	// packets after it overtake it.
	Loss, Dup, Reorder float64
	Hold               time.Duration // how long a reordered packet is held back; 0 means 4×Delay + Jitter, at least 20 ms
}

// Check says what is wrong with f, if anything.
func (f Faults) Check() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss", f.Loss}, {"dup", f.Dup}, {"reorder", f.Reorder}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("faults: %s %v: want a probability from 0 to 1", p.name, p.v)
		}
	}
	if f.Delay < 0 || f.Jitter < 0 || f.Hold < 0 {
		return fmt.Errorf("faults: delay %v, jitter %v, hold %v: none may be negative", f.Delay, f.Jitter, f.Hold)
	}
	return nil
}

func (f Faults) hold() time.Duration {
	if f.Hold > 0 {
		return f.Hold
	}
	return max(4*f.Delay+f.Jitter, 20*time.Millisecond)
}

// Direction is an ordered pair of nodes: packets from From to To.
type Direction struct{ From, To int }

func (d Direction) String() string { return fmt.Sprintf("%d→%d", d.From, d.To) }

// Plan is the seeded state of every direction of a wire between n nodes:
// its faults, whether it is cut, and its random stream. It decides what
// happens to each packet (Decide) and does no I/O; the wire carries out
// its decisions. Each direction draws from a stream of its own, so what
// one direction carries does not change what another decides. A Plan is
// not safe for concurrent use.
type Plan struct {
	n    int
	dirs []direction // by From*n + To
}

type direction struct {
	faults Faults
	cut    bool
	rng    *rand.Rand
}

// NewPlan is a plan for n nodes whose every direction has faults f,
// drawing from seed.
func NewPlan(seed uint64, n int, f Faults) (*Plan, error) {
	if n < 2 {
		return nil, fmt.Errorf("plan: %d nodes: a wire joins at least 2", n)
	}
	if err := f.Check(); err != nil {
		return nil, err
	}
	p := &Plan{n: n, dirs: make([]direction, n*n)}
	for i := range p.dirs {
		p.dirs[i] = direction{faults: f, rng: rand.New(rand.NewPCG(seed, uint64(i)+1))}
	}
	return p, nil
}

func (p *Plan) dir(d Direction) *direction {
	if d.From < 0 || d.To < 0 || d.From >= p.n || d.To >= p.n || d.From == d.To {
		panic(fmt.Sprintf("nemesis: direction %v of a wire of %d nodes", d, p.n)) // the wire's own bug, never input
	}
	return &p.dirs[d.From*p.n+d.To]
}

// Set gives direction d the faults f.
func (p *Plan) Set(d Direction, f Faults) error {
	if err := f.Check(); err != nil {
		return err
	}
	p.dir(d).faults = f
	return nil
}

// Cut makes d drop everything, what is in flight on it included, until
// Heal.
func (p *Plan) Cut(d Direction) { p.dir(d).cut = true }

// Heal ends a cut of d.
func (p *Plan) Heal(d Direction) { p.dir(d).cut = false }

// HealAll ends every cut.
func (p *Plan) HealAll() {
	for i := range p.dirs {
		p.dirs[i].cut = false
	}
}

// IsCut reports whether d is cut now. The wire asks it again when a
// packet falls due: a cut drops what was in flight too.
func (p *Plan) IsCut(d Direction) bool { return p.dir(d).cut }

// Decide says what happens to a packet that arrives on d: after how long
// each copy of it is delivered, in order; none means it is dropped. A cut
// direction draws nothing from its stream.
func (p *Plan) Decide(d Direction) []time.Duration {
	s := p.dir(d)
	if s.cut {
		return nil
	}
	f := s.faults
	// Every draw is made whatever the faults, so that changing one rate
	// does not shift the stream the others read.
	loss, dup, reorder := s.rng.Float64(), s.rng.Float64(), s.rng.Float64()
	jitter, dupJitter := s.rng.Float64(), s.rng.Float64()
	if loss < f.Loss {
		return nil
	}
	at := f.Delay + time.Duration(jitter*float64(f.Jitter))
	if reorder < f.Reorder {
		at += f.hold()
	}
	if dup < f.Dup {
		return []time.Duration{at, at + f.Delay + time.Duration(dupJitter*float64(f.Jitter))}
	}
	return []time.Duration{at}
}

// setAll gives every direction the faults f.
func (p *Plan) setAll(f Faults) {
	for i := range p.dirs {
		p.dirs[i].faults = f
	}
}
