package clock

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Manual is a clock whose timers fire only when its owner calls Fire: the
// earliest due first, timers due at the same instant in the order they
// were set, one at a time. A simulator that fires each and waits for every
// goroutine to block before the next decides in what order the goroutines
// they wake run; a test fires them when it likes. The zero value is ready.
type Manual struct {
	mu     sync.Mutex
	seq    uint64
	timers []*manualTimer // by due time, then seq
}

var _ Clock = (*Manual)(nil)

type manualTimer struct {
	due time.Time
	seq uint64
	f   func()
}

func compareTimers(a, b *manualTimer) int {
	return cmp.Or(a.due.Compare(b.due), cmp.Compare(a.seq, b.seq))
}

// AfterFunc sets a timer due d from now (time.Now) that calls f in its own
// goroutine when it is fired.
func (m *Manual) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	t := &manualTimer{due: time.Now().Add(d), seq: m.seq, f: f}
	i, _ := slices.BinarySearchFunc(m.timers, t, compareTimers)
	m.timers = slices.Insert(m.timers, i, t)
	return func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		i, found := slices.BinarySearchFunc(m.timers, t, compareTimers)
		if !found {
			return false // fired or stopped
		}
		m.timers = slices.Delete(m.timers, i, i+1)
		return true
	}
}

// Next returns when the earliest timer is due; false if none is set.
func (m *Manual) Next() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.timers) == 0 {
		return time.Time{}, false
	}
	return m.timers[0].due, true
}

// Fire fires the earliest timer due by now: it starts its function in a
// goroutine of its own. It returns false if no timer is due by now.
func (m *Manual) Fire(now time.Time) bool {
	m.mu.Lock()
	if len(m.timers) == 0 || m.timers[0].due.After(now) {
		m.mu.Unlock()
		return false
	}
	t := m.timers[0]
	m.timers = m.timers[1:]
	m.mu.Unlock()
	go t.f()
	return true
}
