package simnet

// What an event does.
const (
	evDeliver   = iota // deliver message arg to node
	evCommand          // the user asks the runner to migrate
	evCrash            // crash node; arg 1: it loses its registry; arg 2: it comes back with its backup
	evRestart          // restart node
	evPause            // pause node
	evWake             // wake node
	evPartition        // start a partition; arg 1: one way
	evRepair           // end partition arg
	evHeal             // end every fault
	evTail             // the tail of node's migration to arg ends: propose, or give up
	evBackup           // back node's registry up (a later crash with arg 2 restores it)
)

// event is one thing that happens in a run, ordered by time, then by the
// order it was scheduled in.
type event struct {
	at   int64
	seq  uint64
	kind uint8
	node int32
	arg  int32
}

func (a *event) less(b *event) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

// eventHeap is a binary min-heap of events (the calendar's far future).
type eventHeap []event

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(&s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && s[r].less(&s[l]) {
			c = r
		}
		if !s[c].less(&s[i]) {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return top
}

// ringSize is the window of the calendar queue, in ticks: events due
// sooner than that go into a bucket of the ring, later ones into a heap.
const ringSize = 256

// calendar is the queue of events that happen as a consequence of others
// (deliveries, restarts, wakes, repairs). Almost all are due within a few
// ticks, so they go into a ring of buckets, one per tick, in the order
// they are scheduled; the few due later wait in a heap and move into the
// ring as soon as their tick enters the window, which is before anything
// else can be scheduled for that tick. So events come out in the order of
// (time, sequence), exactly as from a heap.
type calendar struct {
	ring  [ringSize][]event
	head  [ringSize]int // ring[i][:head[i]] has been taken
	count int           // events in the ring
	far   eventHeap
	now   int64 // the window is [now, now+ringSize)
}

func (c *calendar) reset() {
	for i := range c.ring {
		c.ring[i] = c.ring[i][:0]
		c.head[i] = 0
	}
	c.count, c.now = 0, 0
	c.far = c.far[:0]
}

func (c *calendar) push(e event) {
	if e.at < c.now+ringSize {
		i := e.at & (ringSize - 1)
		c.ring[i] = append(c.ring[i], e)
		c.count++
		return
	}
	c.far.push(e)
}

// advance moves the window to start at t, pulling in the far events it
// now covers.
func (c *calendar) advance(t int64) {
	c.now = t
	for len(c.far) > 0 && c.far[0].at < t+ringSize {
		e := c.far.pop()
		i := e.at & (ringSize - 1)
		c.ring[i] = append(c.ring[i], e)
		c.count++
	}
}

// peek returns the earliest event due at t, or nil.
func (c *calendar) peek(t int64) *event {
	i := t & (ringSize - 1)
	if c.head[i] < len(c.ring[i]) {
		return &c.ring[i][c.head[i]]
	}
	return nil
}

// take removes the event peek returned.
func (c *calendar) take(t int64) {
	i := t & (ringSize - 1)
	c.head[i]++
	c.count--
	if c.head[i] == len(c.ring[i]) {
		c.ring[i], c.head[i] = c.ring[i][:0], 0
	}
}

// earliest returns the time of the next event at or after from.
func (c *calendar) earliest(from int64) (int64, bool) {
	if c.count > 0 {
		for t := from; t < c.now+ringSize; t++ {
			i := t & (ringSize - 1)
			if c.head[i] < len(c.ring[i]) {
				return t, true
			}
		}
	}
	if len(c.far) > 0 {
		return c.far[0].at, true
	}
	return 0, false
}
