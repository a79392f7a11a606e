package simnet

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/flaws"
)

// AgentID is the agent every simulated node holds.
const AgentID = "00000000-0000-4000-8000-000000000001"

// Options configure runs. DefaultOptions is the default workload.
type Options struct {
	Nodes      int    // nodes, at least 2 (default 3)
	Migrations int    // migration commands per run (default 20)
	Faults     Faults // the faults that may be injected
	// Trace, if set, receives one line per step. It slows a run down a
	// lot; use it to replay one seed. It does not change the run.
	Trace io.Writer
	// Flaw runs a deliberately broken protocol (see flaws.Flaw), to show
	// that the checker catches it. Tests and demonstrations only.
	Flaw flaws.Flaw

	withoutSync bool // tests: the fencing side alone, as before the sync layer
}

// DefaultOptions returns the default workload: 3 nodes, 20 migrations,
// every fault.
func DefaultOptions() Options { return Options{Nodes: 3, Migrations: 20, Faults: AllFaults} }

// MaxNodes is the most nodes a run may have.
const MaxNodes = 32

// Check reports what is wrong with o, naming the option.
func (o Options) Check() error {
	switch {
	case o.Nodes != 0 && (o.Nodes < 2 || o.Nodes > MaxNodes):
		return fmt.Errorf("nodes: %d, want 2 to %d", o.Nodes, MaxNodes)
	case o.Migrations < 0:
		return fmt.Errorf("migrations: %d, want at least 1", o.Migrations)
	case o.Faults&^AllFaults != 0:
		return fmt.Errorf("faults: unknown bits %b", o.Faults&^AllFaults)
	case o.Flaw > flaws.Last:
		return fmt.Errorf("flaw: unknown %d", o.Flaw)
	}
	return nil
}

func (o Options) orDefault() Options {
	if o.Nodes < 2 {
		o.Nodes = 3
	}
	if o.Migrations <= 0 {
		o.Migrations = 20
	}
	return o
}

// Result is what one run found.
type Result struct {
	Seed       uint64
	Settings   Settings
	Steps      int   // events handled, node ticks included
	Ticks      int64 // simulated time at the end
	Migrations int   // commands that started a migration
	Operator   int   // operator overrides the run needed
	Coverage   Coverage
	Sync       SyncCounts // what the sync layer did
	Violation  string     // "" if the checker found nothing
	TraceHash  uint64     // a hash of every step; equal seeds give equal hashes
}

// Failed reports whether the checker found a violation.
func (r *Result) Failed() bool { return r.Violation != "" }

// Timing of the model, in ticks.
const (
	migrationGapMin = 10  // between migration commands (a move without faults takes up to 9 with its tail)
	migrationGapMax = 40  //
	longDelayMin    = 20  // a delayed message
	longDelayMax    = 140 //
	pauseMin        = 60  // a paused node
	pauseMax        = 260 //
	downMin         = 4   // a crashed node
	downMax         = 60  //
	partitionMin    = 8   // a partition
	partitionMax    = 90  //
	healMargin      = 30  // after the last command
	settleLimit     = 800 // ticks after healing before the run counts as stuck
	maxOperator     = 4   // operator overrides per run
	maxLost         = 2   // registries lost at once
	historySize     = 64  // old messages kept for replay
	tailMax         = 3   // the tail of a migration lasts 1 to tailMax ticks
)

// timing is the fencing timing the simulated nodes use.
var timing = fencing.Timing{Retry: 4, Abort: 24, Staging: 48, Startup: 8}

// partition is one cut of links, undone by an evRepair.
type partition struct {
	oneWay bool
	group  uint64 // two-way: the nodes on one side
	a, b   int    // one-way: a→b is cut
	active bool
}

// Runner runs seeds one after another, reusing its memory. It is not safe
// for concurrent use; use one Runner per goroutine.
type Runner struct {
	opt Options

	rng      *rand.Rand
	pcg      *rand.PCG
	res      Result
	set      Settings
	now      int64
	seq      uint64
	healed   bool
	healAt   int64
	queue    calendar // what happens as a consequence: deliveries, restarts, wakes, repairs
	script   []event  // what the seed planned: commands and faults, sorted
	scripted int      // script[:scripted] has happened
	slab     []fencing.Message
	free     []int32
	history  [historySize]fencing.Message
	nhist    int
	hosts    []*host
	cut      []int // cut[a*n+b] > 0: a→b drops everything
	parts    []partition
	content  contentTable
	cur      versions // the capsule as the runner last wrote it
	runners  int
	chk      Ledger
	trace    io.Writer
	hash     uint64
	violated bool

	// The sync layer (sync.go); its randomness is a stream of its own, so
	// that the fencing side of a seed runs as it would without it.
	srng      *rand.Rand
	spcg      *rand.PCG
	squeue    calendar // its events: frames, resets, dials, edits
	streams   []stream
	conn      []bool // conn[a*n+b]: a and b are connected
	written   events // how many events each node wrote
	quietFrom int64  // when a copy last changed
	syncDone  bool   // settled and checked
}

// NewRunner returns a Runner for opt, which must pass Check.
func NewRunner(opt Options) *Runner {
	opt = opt.orDefault()
	r := &Runner{opt: opt, pcg: rand.NewPCG(0, 0), spcg: rand.NewPCG(0, 0), trace: opt.Trace}
	r.rng = rand.New(r.pcg)
	r.srng = rand.New(r.spcg)
	n := opt.Nodes
	r.cut = make([]int, n*n)
	r.conn = make([]bool, n*n)
	for i := 0; i < n; i++ {
		r.hosts = append(r.hosts, newHost(r, i, n))
	}
	return r
}

// Run simulates one seed and returns what the checker found.
func (r *Runner) Run(seed uint64) Result {
	r.reset(seed)
	r.start()
	r.loop()
	r.res.Ticks = r.now
	r.res.TraceHash = r.hash
	return r.res
}

func (r *Runner) reset(seed uint64) {
	r.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
	r.spcg.Seed(seed, seed^0x5851f42d4c957f2d)
	r.squeue.reset()
	clear(r.streams)
	r.streams = r.streams[:0]
	clear(r.conn)
	r.written, r.quietFrom, r.syncDone = events{}, 0, r.opt.withoutSync
	r.res = Result{Seed: seed}
	r.set = DeriveSettings(r.rng, r.opt.Faults)
	r.res.Settings = r.set
	r.now, r.seq, r.healed, r.runners, r.violated = 0, 0, false, 0, false
	r.hash = 14695981039346656037
	r.queue.reset()
	r.script, r.scripted = r.script[:0], 0
	clear(r.slab)
	r.slab = r.slab[:0]
	r.free = r.free[:0]
	r.nhist = 0
	clear(r.cut)
	r.parts = r.parts[:0]
	r.content.reset()
	r.cur = versions{}
	names := make([]string, len(r.hosts))
	for i, h := range r.hosts {
		names[i] = h.id
	}
	r.chk.Reset(names)
	for _, h := range r.hosts {
		h.reset()
	}
}

// start schedules the workload and the faults and boots every node: node 0
// created the agent, the others know of it from its manifest.
func (r *Runner) start() {
	t := int64(0)
	for i := 0; i < r.opt.Migrations; i++ {
		t += int64(migrationGapMin + r.rng.IntN(migrationGapMax-migrationGapMin+1))
		r.plan(t, evCommand, 0, 0)
	}
	end := t
	r.healAt = end + healMargin
	r.plan(r.healAt, evHeal, 0, 0)
	r.planSync(end)
	n := len(r.hosts)
	at := func() int64 { return 1 + r.rng.Int64N(end) }
	for i := 0; i < r.set.Partitions; i++ {
		r.plan(at(), evPartition, 0, 0)
	}
	for i := 0; i < r.set.OneWay; i++ {
		r.plan(at(), evPartition, 0, 1)
	}
	for i := 0; i < r.set.Crashes; i++ {
		r.plan(at(), evCrash, int32(r.rng.IntN(n)), 0)
	}
	for i := 0; i < r.set.LostRegistries; i++ {
		r.plan(at(), evCrash, int32(r.rng.IntN(n)), 1)
	}
	for i := 0; i < r.set.Pauses; i++ {
		r.plan(at(), evPause, int32(r.rng.IntN(n)), 0)
	}
	for i := 0; i < r.set.Restores; i++ {
		node, backup := int32(r.rng.IntN(n)), at()
		r.plan(backup, evBackup, node, 0)
		r.plan(backup+1+r.rng.Int64N(max(1, end-backup)), evCrash, node, 2) // before the heal
	}
	for i, h := range r.hosts {
		rec := fencing.Joined(fencing.Holder{Peer: r.hosts[0].id, Epoch: 1})
		if i == 0 {
			rec = fencing.Created(h.id)
		}
		r.fail(r.chk.Boot(h.idx, &rec, r.now))
		if err := h.reg.Save(AgentID, rec); err != nil {
			r.violation("boot %s: %v", h.id, err)
			return
		}
		h.saved.copyFrom(&rec)
		r.boot(h)
	}
}

// schedule puts an event in the queue.
func (r *Runner) schedule(at int64, kind uint8, node, arg int32) {
	r.seq++
	r.queue.push(event{at: at, seq: r.seq, kind: kind, node: node, arg: arg})
}

// plan adds an event to the script, keeping it sorted (insertion: the
// script is short and mostly planned in order).
func (r *Runner) plan(at int64, kind uint8, node, arg int32) {
	r.seq++
	r.script = append(r.script, event{at: at, seq: r.seq, kind: kind, node: node, arg: arg})
	for i := len(r.script) - 1; i > 0 && r.script[i].less(&r.script[i-1]); i-- {
		r.script[i], r.script[i-1] = r.script[i-1], r.script[i]
	}
}

// next removes and returns the earliest event due at t, from the script
// or the queue.
func (r *Runner) next(t int64) (event, bool) {
	var s *event
	if r.scripted < len(r.script) && r.script[r.scripted].at <= t {
		s = &r.script[r.scripted]
	}
	if q := r.queue.peek(t); q != nil && (s == nil || q.less(s)) {
		e := *q
		r.queue.take(t)
		return e, true
	}
	if s != nil {
		r.scripted++
		return *s, true
	}
	return event{}, false
}

// loop runs events and timers until the system is quiescent after
// healing, or the checker fails. Time jumps from one event or timer to the
// next; within one tick, events go first (in the order scheduled), then the
// timers that are due (in node order). Machines are ticked lazily: each
// host catches up on the ticks it skipped before any input, which changes
// nothing because no timer was due (Machine.Deadline).
//
// The sync layer goes on beside (sync.go): within a tick, its events come
// after the fencing events, its passes after the fencing timers. The
// fencing side is done when nothing of it is left (quiescent); the run
// ends when the sync layer has settled too.
func (r *Runner) loop() {
	operatorAt := r.healAt + settleLimit
	fencingDone := false
	tf, okf, stale := int64(0), false, true // the fencing side's next time; a sync step leaves it as it was
	for !r.violated {
		if stale {
			tf, okf = r.nextTime()
		}
		t, ok := tf, okf
		if !ok && !fencingDone {
			if !r.quiescent() {
				operatorAt = r.now + settleLimit
				stale = true
				continue // the operator acted
			}
			fencingDone = true
		}
		ts, oks := r.nextSyncTime()
		fencingStep := ok && (!oks || t <= ts)
		switch {
		case !ok && !oks:
			return
		case !fencingStep:
			t = ts
		}
		stale = fencingStep
		r.now = t
		r.squeue.advance(t)
		if fencingStep {
			r.queue.advance(t)
		}
		for fencingStep && !r.violated {
			e, ok := r.next(t)
			if !ok {
				break
			}
			r.handle(&e)
			r.check()
		}
		for !r.violated && !r.syncDone {
			e := r.squeue.peek(t)
			if e == nil {
				break
			}
			ev := *e
			r.squeue.take(t)
			r.handleSync(&ev)
		}
		for _, h := range r.hosts {
			if r.violated || !fencingStep {
				break
			}
			if h.up && !h.paused && h.nextTick == t {
				r.res.Steps++
				r.mix(uint64(t), 100, uint64(h.idx), 0)
				r.catchUp(h, t)
				r.apply(h)
				r.check()
			}
		}
		r.syncTimers(t)
		r.settleSync()
		if fencingStep && !fencingDone && r.now >= operatorAt && !r.violated {
			if !r.operate() {
				r.violation("no progress %d ticks after healing: %s", r.now-r.healAt, r.describe())
				return
			}
			operatorAt = r.now + settleLimit
		}
	}
}

// nextTime returns when the next event or timer is due; false if none is.
func (r *Runner) nextTime() (int64, bool) {
	t, ok := r.queue.earliest(r.now + 1)
	if r.scripted < len(r.script) && (!ok || r.script[r.scripted].at < t) {
		t, ok = r.script[r.scripted].at, true
	}
	for _, h := range r.hosts {
		if h.up && !h.paused && h.nextTick >= 0 && (!ok || h.nextTick < t) {
			t, ok = h.nextTick, true
		}
	}
	return t, ok
}

// catchUp ticks h's machine until its clock reads t. An idle machine's
// ticks change nothing, so they are skipped.
func (r *Runner) catchUp(h *host, t int64) {
	if h.m.Idle() {
		h.tickedTo = max(h.tickedTo, t)
		return
	}
	for h.tickedTo < t {
		h.m.Tick()
		h.tickedTo++
	}
}

// input brings h's clock to just before now, ahead of an input.
func (r *Runner) input(h *host) {
	r.catchUp(h, r.now-1)
	if h.m.HasReady() {
		r.violation("%s acted on a timer it had not announced (Deadline)", h.id)
	}
}

// reschedule sets when h's next timer is due.
func (r *Runner) reschedule(h *host) {
	h.nextTick = -1
	if d := h.m.Deadline(); d > 0 {
		h.nextTick = h.tickedTo + int64(d)
	}
}

func (r *Runner) handle(e *event) {
	r.res.Steps++
	h := r.hosts[e.node]
	r.mix(uint64(e.at), uint64(e.kind), uint64(e.node), uint64(e.arg))
	switch e.kind {
	case evDeliver:
		r.deliver(h, e.arg)
	case evCommand:
		r.command()
	case evCrash:
		r.crash(h, e.arg == 1, e.arg == 2)
	case evRestart:
		r.restart(h)
	case evPause:
		r.pause(h)
	case evWake:
		r.wake(h)
	case evPartition:
		r.partition(e.arg == 1)
	case evRepair:
		r.repair(int(e.arg))
	case evHeal:
		r.heal()
	case evTail:
		r.endTail(h, r.hosts[e.arg])
	case evBackup:
		r.backUp(h)
	}
}

// command is a person asking the machine that runs the agent to migrate it
// to a random other node (what the planned `tern migrate` would do).
func (r *Runner) command() {
	var src *host
	for _, h := range r.hosts {
		if h.running && h.up && !h.paused {
			src = h
		}
	}
	if src == nil {
		if r.trace != nil {
			r.tracef("command: nobody runs the agent; skipped")
		}
		return
	}
	dst := r.hosts[(src.idx+1+r.rng.IntN(len(r.hosts)-1))%len(r.hosts)]
	if src.store != r.cur {
		r.violation("%s runs the agent without its latest capsule: has %v, latest %v", src.id, src.store, r.cur)
		return
	}
	// The agent worked: the journal and the manifest changed, sometimes a blob.
	r.write(src)
	src.store[0]++
	src.store[1]++
	if r.rng.IntN(4) == 0 {
		src.store[3]++
	}
	r.cur = src.store
	src.migVers = src.store
	files := r.content.files(&src.store)
	if r.trace != nil {
		r.tracef("command: migrate %s -> %s", src.id, dst.id)
	}
	r.input(src)
	if err := src.m.Freeze(dst.id); err != nil {
		r.violation("freeze %s for %s: %v", src.id, dst.id, err)
		return
	}
	src.tailFiles = files
	r.res.Migrations++
	r.apply(src)
	// The tail: the target takes what was written during the warm
	// transfer, for a while, while anything may happen.
	r.schedule(r.now+1+int64(r.rng.IntN(tailMax)), evTail, int32(src.idx), int32(dst.idx))
}

// endTail ends the tail of src's migration to dst: it proposes, or gives
// up if the target cannot take the last events (down, cut off, or a tail
// fault). Nothing happens if src is no longer in that tail (it crashed,
// or the machine gave the tail up on its own).
func (r *Runner) endTail(src, dst *host) {
	if !src.up || src.paused || !src.m.Tailing() {
		return
	}
	n := len(r.hosts)
	why := ""
	switch {
	case !dst.up || dst.paused:
		why = "the target is not there"
	case r.cut[src.idx*n+dst.idx] > 0 || r.cut[dst.idx*n+src.idx] > 0:
		why = "the link to the target is cut"
	case r.rng.Float64() < r.set.TailFail:
		why = "the target could not take the last events"
	}
	if r.trace != nil {
		r.tracef("tail %s -> %s ends: %s", src.id, dst.id, map[bool]string{true: "propose", false: "give up: " + why}[why == ""])
	}
	r.input(src)
	if why != "" {
		src.m.Unfreeze(errors.New(why))
	} else if err := src.m.Migrate(dst.id, src.tailFiles); err != nil {
		r.violation("migrate %s -> %s after the tail: %v", src.id, dst.id, err)
		return
	}
	r.apply(src)
}

// backUp copies h's registry aside, as a backup of its home would.
func (r *Runner) backUp(h *host) {
	if !h.up || h.lost {
		return
	}
	h.backup.copyFrom(&h.saved.Record)
	h.backupEvents = h.events
	h.hasBackup = true
	if r.trace != nil {
		r.tracef("%s's registry is backed up: %v e%d highest %d", h.id, h.saved.State, h.saved.Epoch, h.saved.Highest)
	}
}

// connect tells a and b that they reach each other again (a link or a
// node came back): each machine that holds the agent asks the other
// what it knows (fencing.Machine.Connected).
func (r *Runner) connect(a, b *host) {
	n := len(r.hosts)
	if a == b || !a.up || !b.up || a.paused || b.paused || r.cut[a.idx*n+b.idx] > 0 || r.cut[b.idx*n+a.idx] > 0 {
		return
	}
	for _, h := range [2]*host{a, b} {
		o := a
		if h == a {
			o = b
		}
		r.input(h)
		h.m.Connected(o.id)
		r.apply(h)
		if r.violated {
			return
		}
	}
}

// connectAll connects h with every other node it reaches.
func (r *Runner) connectAll(h *host) {
	for _, o := range r.hosts {
		r.connect(h, o)
	}
}

// mix folds one step into the trace hash.
func (r *Runner) mix(a, b, c, d uint64) {
	const prime = 1099511628211
	h := r.hash
	h = (h ^ a) * prime
	h = (h ^ b) * prime
	h = (h ^ c) * prime
	h = (h ^ d) * prime
	r.hash = h
}

func (r *Runner) tracef(format string, args ...any) {
	if r.trace != nil {
		fmt.Fprintf(r.trace, "t=%d %s\n", r.now, fmt.Sprintf(format, args...))
	}
}

func (r *Runner) violation(format string, args ...any) {
	if r.violated {
		return
	}
	r.violated = true
	r.res.Violation = fmt.Sprintf("t=%d: ", r.now) + fmt.Sprintf(format, args...)
	if r.trace != nil {
		r.tracef("VIOLATION %s", r.res.Violation)
	}
}

// describe summarises every node, for a violation message.
func (r *Runner) describe() string {
	s := ""
	for i, h := range r.hosts {
		if i > 0 {
			s += "; "
		}
		s += h.String()
	}
	return s
}
