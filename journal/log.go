package journal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LogOptions configures OpenLog.
type LogOptions struct {
	// Logger receives the warning about a repaired torn tail. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Protected is how many leading bytes of the file the capsule manifest
	// seals. A torn tail that starts before that offset, or a file shorter
	// than it, is damage rather than an interrupted append: OpenLog fails
	// and leaves the file alone.
	Protected int64
	// Now is the wall clock for the time field. Nil means time.Now.
	Now func() time.Time
	// Agent is the id of the agent whose journal this is. With it, the Log
	// takes events only from the agent's members (see MembersOf): Append
	// refuses a signer that is not one, and Add leaves out, logs and
	// counts (Refused) the events of a machine that is not one. Empty: a
	// bare journal, whose events are not judged by their writer.
	Agent string
}

// Log is the durable, append-only journal file of one capsule.
//
// Appends are all-or-nothing and durable (written and fsynced) before they
// return; concurrent appends share one write and one fsync (group commit).
// If a write fails the file is truncated back and the Log stays usable; if
// an fsync fails the file's state is unknown (the kernel may have dropped
// the dirty pages), so the Log refuses every later append with that error
// and must be reopened. After a crash, a torn last line is possible, and so
// is a complete prefix of a group that was never acknowledged; OpenLog
// repairs the first and keeps the second (its events are valid).
//
// One Log per file: the file must not be written by anything else while it
// is open (ExtendFile included: close, rewrite, reopen). A Log runs one
// writer goroutine until Close. All methods are safe for concurrent use.
type Log struct {
	path   string
	f      *os.File
	logger *slog.Logger
	now    func() time.Time

	mu     sync.Mutex
	events []*Event // durable, in file order
	ids    map[string]struct{}
	chains map[string]*chain
	// disorder counts durable events that did not extend their chain's
	// readable line when they were stored (see Disorder).
	disorder uint64
	rules    asideRules // what holder.activated and member.removed events set aside
	// Membership: the membership events durable and queued, and the
	// members they name (see LogOptions.Agent).
	agent       string
	memberEvs   []*Event
	members     Members
	pendMembers []*Event
	refused     map[string]bool // the ids of the events Add refused, each once (at most maxRefused)
	clock       uint64          // highest durable clock
	size        int64           // bytes of durable complete lines
	sum         hash.Hash       // sha256 of the first size bytes, fed as groups land

	// What queued, not yet durable events build on.
	pendHeads map[string]Head
	pendClock uint64
	pendIDs   map[string]*request // the group each queued event is in
	queue     []*request
	wakeup    sync.Cond // signals the flusher: queue not empty, or closing
	gather    int       // how many queued requests the next group waits for (see gatherFollowers)

	// Signer values whose events have read back correctly, with the machine
	// they signed as; their later events are not read back again.
	trusted map[Signer]string

	failed  error // set on an fsync failure: the Log takes no more appends
	closed  bool
	flusher chan struct{} // closed when the flusher goroutine has returned

	syncs atomic.Int64 // fsyncs issued by appends
	hooks logHooks
}

// logHooks let tests watch and break the write path.
type logHooks struct {
	enqueued   func() // with l.mu held, after a request joins the queue
	beforeSync func()
	writeAt    func(b []byte, off int64) (int, error)
	sync       func() error
}

// chain is what a Log knows about one machine's chain.
type chain struct {
	events []*Event // in file order
	head   Head     // the chain's vector entry: its readable head, and its events aside
	clock  uint64   // clock of the head event
	stuck  error    // the chain's first problem; appending to it is refused
	dirty  bool     // head, clock and stuck must be recomputed from events
}

// request is one Append or Add waiting for its group's write.
type request struct {
	buf    []byte
	events []*Event
	done   chan struct{} // closed once the group is durable or failed
	err    error

	// checked is closed once the events have been read back by the
	// appending goroutine, outside l.mu; badErr is the outcome.
	checked chan struct{}
	badErr  error
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func newRequest(buf []byte, events []*Event, checked chan struct{}) *request {
	return &request{buf: buf, events: events, done: make(chan struct{}), checked: checked}
}

// OpenLog opens an existing journal file for appending. It reads and checks
// every line; a bad line is an error naming it (a *LineError inside) and the
// file is left untouched. A torn last line (bytes after the last newline,
// left by a crash during an append that was never acknowledged) is cut off,
// logged at Warn with the path, offset and byte count, and the file fsynced,
// unless it starts inside opt.Protected: then the journal is damaged and
// OpenLog fails without changing it.
func OpenLog(path string, opt LogOptions) (*Log, error) {
	logger := opt.Logger
	if logger == nil {
		logger = slog.Default()
	}
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	l, err := openLog(f, path, opt.Protected, logger, now, opt.Agent)
	if err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

func openLog(f *os.File, path string, protected int64, logger *slog.Logger, now func() time.Time, agent string) (*Log, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("open journal %s: read: %w", path, err)
	}
	events, bad, torn := decodeParallel(data)
	if len(bad) > 0 {
		more := ""
		if len(bad) > 1 {
			more = fmt.Sprintf(" (and %d more bad lines)", len(bad)-1)
		}
		return nil, fmt.Errorf("open journal %s: %w%s; the file was left untouched", path, bad[0], more)
	}
	if int64(len(data)) < protected {
		return nil, fmt.Errorf("open journal %s: the file has %d bytes but the capsule manifest seals the first %d: the journal was truncated; restore it from a peer or a backup", path, len(data), protected)
	}
	complete := int64(len(data) - torn)
	if torn > 0 {
		if complete < protected {
			return nil, fmt.Errorf("open journal %s: the last line is torn at byte %d, inside the %d bytes the capsule manifest seals: the journal is damaged, not interrupted; refusing to repair it", path, complete, protected)
		}
		if err := f.Truncate(complete); err != nil {
			return nil, fmt.Errorf("open journal %s: cut torn last line: %w", path, err)
		}
		logger.Warn("journal: cut a torn last line left by an interrupted append", "path", path, "offset", complete, "bytes", torn)
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("open journal %s: fsync after cutting torn last line: %w", path, err)
		}
	}
	l := &Log{
		path:   path,
		f:      f,
		logger: logger,
		now:    now,
		ids:    make(map[string]struct{}, len(events)),
		chains: make(map[string]*chain),
		size:   complete,
		sum:    sha256.New(),
		events: make([]*Event, 0, len(events)),
		agent:  agent,
	}
	l.members = l.durableMembers()
	l.sum.Write(data[:complete])
	l.wakeup.L = &l.mu
	for _, e := range events {
		l.commitEvent(e)
	}
	l.flusher = make(chan struct{})
	go l.flush()
	return l, nil
}

// decodeParallel is Decode spread over the CPUs for large files.
func decodeParallel(data []byte) ([]*Event, []error, int) {
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 || len(data) < 1<<20 {
		return Decode(data)
	}
	end := bytes.LastIndexByte(data, '\n') + 1
	body := data[:end]
	type part struct {
		data   []byte
		first  int
		events []*Event
		bad    []error
	}
	var parts []*part
	size := len(body)/(workers*4) + 1
	line := 1
	for len(body) > 0 {
		n := min(size, len(body))
		if i := bytes.IndexByte(body[n-1:], '\n'); i >= 0 {
			n += i
		} else {
			n = len(body)
		}
		parts = append(parts, &part{data: body[:n], first: line})
		line += bytes.Count(body[:n], []byte{'\n'})
		body = body[n:]
	}
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(parts) {
					return
				}
				p := parts[i]
				p.events, p.bad = decodeLines(p.data, p.first)
			}
		})
	}
	wg.Wait()
	var events []*Event
	var bad []error
	for _, p := range parts {
		events = append(events, p.events...)
		bad = append(bad, p.bad...)
	}
	return events, bad, len(data) - end
}

// commitEvent records a durable event in the indexes. l.mu held.
func (l *Log) commitEvent(e *Event) {
	l.events = append(l.events, e)
	if _, dup := l.ids[e.ID]; dup {
		return
	}
	l.ids[e.ID] = struct{}{}
	l.clock = max(l.clock, e.Clock)
	c := l.chains[e.Machine]
	if c == nil {
		c = &chain{}
		l.chains[e.Machine] = c
	}
	c.events = append(c.events, e)
	if m, epoch, end, ok := boundOf(e); ok {
		if l.rules.bounds == nil {
			l.rules.bounds = epochBounds{}
		}
		l.rules.bounds.add(m, epoch, end)
		l.dirty(m) // some of its events may be stale now
	}
	if isMembership(e) {
		l.memberEvs = append(l.memberEvs, e)
		l.members = l.durableMembers()
		removed := l.members.cutOf()
		for m, last := range removed {
			if was, ok := l.rules.removed[m]; !ok || was != last {
				l.dirty(m) // its events above last no longer count
			}
		}
		l.rules.removed = removed
	}
	// An event that extends a sound chain's head moves it; anything else
	// (a fork, a gap, a heal, an event of a branch set aside, one at an
	// epoch an activation ended, which may be stale) makes the chain be
	// analysed again when it is next needed.
	if _, removed := l.rules.removed[e.Machine]; !removed && !c.dirty && c.stuck == nil && e.Type != HealType && !l.rules.bounds.touches(e) && e.Seq == c.head.Seq+1 && e.Prev == c.head.ID && e.Clock > c.clock {
		c.head.Seq, c.head.ID, c.clock = e.Seq, e.ID, e.Clock
	} else {
		c.dirty = true
		l.disorder++
	}
}

// dirty marks a machine's chain to be analysed again. l.mu held.
func (l *Log) dirty(machine string) {
	if c := l.chains[machine]; c != nil && !c.dirty {
		c.dirty = true
		l.disorder++
	}
}

// durableMembers returns the members that the durable membership events
// name. l.mu held.
func (l *Log) durableMembers() Members {
	if l.agent == "" {
		return membersClaimed(l.memberEvs)
	}
	return MembersOf(l.agent, l.memberEvs)
}

// membersWith returns the members that the membership events durable,
// queued and in more name. l.mu held.
func (l *Log) membersWith(more []*Event) Members {
	if len(l.pendMembers) == 0 && len(more) == 0 {
		return l.members
	}
	all := slices.Concat(l.memberEvs, l.pendMembers, more)
	if l.agent == "" {
		return membersClaimed(all)
	}
	return MembersOf(l.agent, all)
}

// admit splits events written elsewhere into those whose writers are
// members of the agent, counting the membership events among them, and
// the rest, with every activation that does not prove its custody (see
// Custody). Of an agent from before members whose first members are
// named, a machine that names itself a founder is taken only if it is a
// member already: the first members a node holds are the ones it trusts.
// l.mu held.
func (l *Log) admit(events []*Event) (in, out []*Event) {
	if l.agent == "" {
		return events, nil
	}
	var ms []*Event
	for _, e := range events {
		if isMembership(e) {
			ms = append(ms, e)
		}
	}
	members := l.membersWith(nil)
	var usurper map[string]bool
	if len(ms) > 0 {
		if !Derived(l.agent) && !members.Open() {
			for _, e := range ms {
				if b, ok := readMember(e); ok && b.Founder && !members.Has(e.Machine) {
					if usurper == nil {
						usurper = map[string]bool{}
					}
					usurper[e.ID] = true
				}
			}
			ms = slices.DeleteFunc(ms, func(e *Event) bool { return usurper[e.ID] })
		}
		members = l.membersWith(ms)
	}
	if members.Open() && usurper == nil {
		return events, nil // Custody passes every event of an open journal too
	}
	for _, e := range events {
		if members.Knows(e) && !usurper[e.ID] && Custody(l.agent, e, members) == nil {
			in = append(in, e)
		} else {
			out = append(out, e)
		}
	}
	return in, out
}

// maxRefused bounds the refused events a Log remembers: a peer that
// offers the same refused events at every round counts them once, and a
// flood of distinct ones costs no more than this.
const maxRefused = 1 << 16

// logRefused counts the events Add left out (see admit), each once, and
// logs those not refused before, once per machine. l.mu held.
func (l *Log) logRefused(out []*Event) {
	if len(out) == 0 {
		return
	}
	if l.refused == nil {
		l.refused = map[string]bool{}
	}
	by := map[string][]*Event{}
	for _, e := range out {
		if l.refused[e.ID] {
			continue
		}
		if len(l.refused) < maxRefused {
			l.refused[e.ID] = true
		}
		by[e.Machine] = append(by[e.Machine], e)
	}
	for m, es := range by {
		l.logger.Warn("journal: refused events of a machine that is not a member of the agent, or activations without the old holder's handover", "agent", l.agent, "machine", m, "events", len(es), "first", es[0].ID)
	}
}

// Members returns the agent's members as the log's durable events name
// them (see LogOptions.Agent; without an agent, as they claim).
func (l *Log) Members() Members {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.members
}

// Refused returns how many distinct events Add has left out because their
// writer never was a member of the agent, or an activation lacked its
// handover.
func (l *Log) Refused() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(len(l.refused))
}

// chainHead returns a machine's chain as a vector entry (its readable head
// and its events aside), or the chain's first problem if it cannot be
// extended. l.mu held.
func (l *Log) chainHead(machine string) (Head, error) {
	c := l.chains[machine]
	if c == nil {
		return Head{}, nil
	}
	if c.dirty {
		s := slices.Clone(c.events)
		slices.SortFunc(s, bySeq)
		mc := analyseMachine(dedupeSorted(s), l.rules)
		c.stuck, c.dirty = nil, false
		if len(mc.problems) > 0 {
			c.stuck = mc.problems[0]
		}
		c.head, c.clock = mc.head(), 0
		if n := len(mc.line); n > 0 {
			c.clock = mc.line[n-1].Clock
		}
	}
	return c.head, c.stuck
}

// usable reports why the Log takes no appends, if it does not. l.mu held.
func (l *Log) usable() error {
	if l.closed {
		return fmt.Errorf("append to %s: %w", l.path, ErrClosed)
	}
	return l.failed
}

// Append signs the drafts as machine s.Machine() and appends them, in
// order, as one all-or-nothing group. They continue the signer's chain in
// this log (seq, prev), take the next Lamport clocks after the highest clock
// in the log (one per event), the given epoch and the current time. Append
// returns only once the events are durable (fsynced); concurrent callers
// share one fsync. ctx is checked before anything is queued; once queued,
// an append is carried through.
//
// The first events a Signer value writes are read back (ParseLine) before
// they are written, so a signer whose key is not its machine's is refused
// and nothing is written; later events from the same Signer value (when it
// is comparable, e.g. a pointer) are trusted to the builder.
//
// Errors: ErrInvalidDraft (nothing written), ErrFork or ErrBrokenChain if
// the signer's own chain in this log is forked or broken (nothing written),
// ErrBadSignature (a signer that does not sign as its machine), ErrClosed,
// the signer's error, or a write or fsync error (see Log). When a group
// fails, every append in it fails with the same error.
func (l *Log) Append(ctx context.Context, s Signer, epoch uint64, drafts ...Draft) ([]*Event, error) {
	if len(drafts) == 0 {
		return nil, nil
	}
	if s == nil {
		return nil, fmt.Errorf("append to %s: no signer", l.path)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("append to %s: %w", l.path, err)
	}
	bodies := make([][]byte, len(drafts))
	for i, d := range drafts {
		b, err := d.canonicalBody()
		if err != nil {
			return nil, fmt.Errorf("append to %s: draft %d: %w", l.path, i+1, err)
		}
		bodies[i] = b
	}
	machine := s.Machine()
	now := l.now()

	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	head, err := l.chainHead(machine)
	if err != nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("append to %s as machine %s: its chain cannot be extended: %w", l.path, machine, err)
	}
	if h, ok := l.pendHeads[machine]; ok {
		head = h
	}
	// Building and signing is serial (each event's prev is the id of the
	// one before, which covers its signature), so it happens under the
	// lock; reading the events back, the costly check, happens outside it,
	// in parallel with other appends and with the group being written.
	clock := max(l.clock, l.pendClock)
	events := make([]*Event, len(drafts))
	n := 0
	for i, d := range drafts {
		clock++
		e, err := buildEvent(s, Stamp{Seq: head.Seq + 1, Prev: head.ID, Clock: clock, Epoch: epoch, Time: now}, d, bodies[i], nil)
		if err != nil {
			l.mu.Unlock()
			return nil, fmt.Errorf("append to %s: draft %d: %w", l.path, i+1, err)
		}
		events[i] = e
		head = Head{Seq: e.Seq, ID: e.ID}
		n += len(e.line) + 1
	}
	if l.agent != "" {
		var ms []*Event
		for _, e := range events {
			if isMembership(e) {
				ms = append(ms, e)
			}
		}
		members := l.membersWith(ms)
		for _, e := range events {
			if !members.Admits(e) {
				l.mu.Unlock()
				return nil, &NotMemberError{Agent: l.agent, Machine: machine, Removed: members.removed(machine)}
			}
			if err := Custody(l.agent, e, members); err != nil {
				l.mu.Unlock()
				return nil, fmt.Errorf("append to %s: %w", l.path, &CustodyError{Agent: l.agent, Machine: machine, Event: e.ID, Err: err})
			}
		}
	}
	buf := make([]byte, 0, n)
	for _, e := range events {
		buf = append(append(buf, e.line...), '\n')
	}
	checked := closedChan
	trusted := l.isTrusted(s, machine)
	if !trusted {
		checked = make(chan struct{})
	}
	req := newRequest(buf, events, checked)
	for _, e := range events {
		l.pend(e, req)
	}
	l.pendHeads[machine] = Head{Seq: head.Seq, ID: head.ID}
	l.enqueue(req)
	l.mu.Unlock()

	if !trusted {
		for i, e := range events {
			if err := e.verifyBuilt(); err != nil {
				req.badErr = fmt.Errorf("append to %s: draft %d: %w", l.path, i+1, err)
				break
			}
		}
		close(checked)
		if req.badErr == nil {
			l.mu.Lock()
			l.trust(s, machine)
			l.mu.Unlock()
		}
	}
	<-req.done
	if req.err != nil {
		return nil, req.err
	}
	return events, nil
}

// isTrusted reports whether s has signed events in this log that read back
// correctly as machine. l.mu held.
func (l *Log) isTrusted(s Signer, machine string) bool {
	if !reflect.ValueOf(s).Comparable() {
		return false
	}
	m, ok := l.trusted[s]
	return ok && m == machine
}

// trust remembers that s signs correctly as machine. l.mu held.
func (l *Log) trust(s Signer, machine string) {
	if !reflect.ValueOf(s).Comparable() {
		return
	}
	if l.trusted == nil || len(l.trusted) >= 64 {
		l.trusted = make(map[Signer]string)
	}
	l.trusted[s] = machine
}

// Add appends events written elsewhere (received from a peer or read from
// another copy of the journal) that the log does not hold yet, keyed by id,
// in total order, durably, as one all-or-nothing group. Forked or broken
// chains are kept: they are the readers' to quarantine. It returns the
// events it added. An event another call is adding at the same time is
// not added again, but Add returns only once that call's group is durable
// too (or with its error): on return without error, every event passed is
// durable. Events must come from ParseLine, Decode, NewEvent or a Log.
func (l *Log) Add(ctx context.Context, events ...*Event) ([]*Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("add to %s: %w", l.path, err)
	}
	for _, e := range events {
		if len(e.line) == 0 {
			return nil, fmt.Errorf("add to %s: event %q has no canonical line: events must come from ParseLine, Decode, NewEvent or a Log", l.path, e.ID)
		}
	}
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	var add []*Event
	// Events queued by another call are not added again, but they are not
	// durable yet either: this call waits for their groups too.
	var queued []*request
	for _, e := range Merge(events, nil) {
		if _, have := l.ids[e.ID]; have {
			continue
		}
		if r, ok := l.pendIDs[e.ID]; ok {
			if !slices.Contains(queued, r) {
				queued = append(queued, r)
			}
			continue
		}
		add = append(add, e)
	}
	add, refused := l.admit(add)
	l.logRefused(refused)
	if len(add) == 0 {
		l.mu.Unlock()
		return nil, waitGroups(queued)
	}
	n := 0
	for _, e := range add {
		n += len(e.line) + 1
	}
	buf := make([]byte, 0, n)
	req := newRequest(nil, add, closedChan) // parsed events are checked already
	for _, e := range add {
		buf = append(append(buf, e.line...), '\n')
		l.pend(e, req)
		// Keep the speculative head in step when the event extends it, so
		// that an Append queued behind this group does not fork the chain.
		h, ok := l.pendHeads[e.Machine]
		if !ok {
			h, _ = l.chainHead(e.Machine)
		}
		if e.Seq == h.Seq+1 && e.Prev == h.ID {
			l.pendHeads[e.Machine] = Head{Seq: e.Seq, ID: e.ID}
		}
	}
	req.buf = buf
	l.enqueue(req)
	l.mu.Unlock()
	if err := waitGroups(append(queued, req)); err != nil {
		return nil, err
	}
	return add, nil
}

// waitGroups waits until every one of reqs is durable or failed, and
// returns the first failure.
func waitGroups(reqs []*request) error {
	var first error
	for _, r := range reqs {
		<-r.done
		if first == nil {
			first = r.err
		}
	}
	return first
}

// pend records a queued event in the speculative state. l.mu held.
func (l *Log) pend(e *Event, req *request) {
	if l.pendIDs == nil {
		l.pendIDs = make(map[string]*request)
		l.pendHeads = make(map[string]Head)
	}
	l.pendIDs[e.ID] = req
	l.pendClock = max(l.pendClock, e.Clock)
	if isMembership(e) {
		l.pendMembers = append(l.pendMembers, e)
	}
}

// enqueue puts req in the queue of the next group. l.mu held.
func (l *Log) enqueue(req *request) {
	l.queue = append(l.queue, req)
	if l.hooks.enqueued != nil {
		l.hooks.enqueued()
	}
	if len(l.queue) == 1 || len(l.queue) >= l.gather {
		l.wakeup.Signal()
	}
}

// flush is the Log's one writer goroutine. It takes every queued request
// as one group, writes and fsyncs it, commits its events to the indexes and
// releases its callers, until the Log is closed and the queue drained.
func (l *Log) flush() {
	defer close(l.flusher)
	l.mu.Lock()
	defer l.mu.Unlock()
	var lastSync time.Duration
	for {
		for len(l.queue) == 0 && !l.closed {
			l.wakeup.Wait()
		}
		if len(l.queue) == 0 {
			return
		}
		l.gatherFollowers(lastSync)
		batch, off := l.queue, l.size
		l.queue = nil
		l.mu.Unlock()

		start := time.Now()
		written, fatal, err := l.writeGroup(batch, off)
		lastSync = time.Since(start)

		l.mu.Lock()
		if err == nil {
			for _, r := range batch {
				for _, e := range r.events {
					l.commitEvent(e)
				}
			}
			l.size += int64(len(written))
			l.sum.Write(written)
		} else {
			if fatal {
				l.failed = err
			}
			// Everything queued behind this group was built on it.
			batch = append(batch, l.queue...)
			l.queue = nil
		}
		for _, r := range batch {
			r.err = err
			close(r.done)
		}
		// The callers just released are likely to append again at once
		// (a busy stream); the next group waits briefly for them.
		l.gather = len(batch) + len(l.queue)
		if len(l.queue) == 0 {
			l.pendHeads, l.pendClock, l.pendIDs, l.pendMembers = nil, 0, nil, nil
		}
	}
}

// gatherFollowers lets a group form from more than the callers that
// queued while the previous group was syncing: with k writers appending in
// a loop, groups would otherwise alternate between two halves and each
// fsync would carry k/2 appends. It waits, l.mu held, until l.gather
// requests are queued, the Log closes, or half the previous write+fsync
// time has passed (so a lone writer never waits: its gather is 1).
func (l *Log) gatherFollowers(lastSync time.Duration) {
	if len(l.queue) >= l.gather || lastSync <= 0 {
		return
	}
	expired := false
	t := time.AfterFunc(lastSync/2, func() {
		l.mu.Lock()
		expired = true
		l.wakeup.Broadcast()
		l.mu.Unlock()
	})
	for len(l.queue) < l.gather && !expired && !l.closed {
		l.wakeup.Wait()
	}
	t.Stop()
}

// writeGroup waits until every request of the group has been read back,
// then writes the group at off and fsyncs; it returns the bytes written. A
// request that did not read back fails the group before anything is
// written. A failed write is cut back (fatal only if that fails too); a
// failed fsync is always fatal.
func (l *Log) writeGroup(batch []*request, off int64) (written []byte, fatal bool, err error) {
	for _, r := range batch {
		<-r.checked
		if r.badErr != nil {
			return nil, false, r.badErr
		}
	}
	buf := batch[0].buf
	if len(batch) > 1 {
		size := 0
		for _, r := range batch {
			size += len(r.buf)
		}
		buf = make([]byte, 0, size)
		for _, r := range batch {
			buf = append(buf, r.buf...)
		}
	}
	writeAt := l.f.WriteAt
	if l.hooks.writeAt != nil {
		writeAt = l.hooks.writeAt
	}
	w, err := writeAt(buf, off)
	if err == nil && w != len(buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		err = fmt.Errorf("append to %s: write at byte %d: %w", l.path, off, err)
		if terr := l.f.Truncate(off); terr != nil {
			return nil, true, fmt.Errorf("%w; cutting the file back to %d bytes failed too (%v): reopen the journal to repair it", err, off, terr)
		}
		return nil, false, err
	}
	if l.hooks.beforeSync != nil {
		l.hooks.beforeSync()
	}
	l.syncs.Add(1)
	sync := l.f.Sync
	if l.hooks.sync != nil {
		sync = l.hooks.sync
	}
	if err := sync(); err != nil {
		_ = l.f.Truncate(off) // best effort; these bytes were never acknowledged
		return nil, true, fmt.Errorf("append to %s: fsync: %w; the file's state is unknown, so this log takes no more appends: reopen the journal", l.path, err)
	}
	return buf, false, nil
}

// Events returns all durable events in file order (a new slice; the events
// are shared and immutable).
func (l *Log) Events() []*Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// Vector returns the version vector of the durable events (see VectorOf).
func (l *Log) Vector() Vector {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := make(Vector, len(l.chains))
	for m := range l.chains {
		v[m], _ = l.chainHead(m)
	}
	return v
}

// ChainProblem returns the first problem of machine's chain among the
// durable events (a *ForkError or a *ChainError: a fork, a gap, a broken
// link), or nil when its readable line holds all of its events that are
// not set aside.
func (l *Log) ChainProblem(machine string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.chainHead(machine)
	return err
}

// Size returns the length in bytes of the durable complete lines.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Sealed returns the length in bytes of the durable complete lines and
// the sha256 of exactly those bytes, as one consistent pair: what a
// capsule manifest records for the journal, without reading the file again.
func (l *Log) Sealed() (size int64, sum [sha256.Size]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sum.Sum(sum[:0])
	return l.size, sum
}

// Disorder counts the durable events that did not extend their chain's
// readable line when they were stored: a fork, a gap or a gap filled, a
// heal, an event of a branch set aside. While it does not move, the
// readable view (see Readable) has only grown by the events stored, in
// their chains' order; a caller that derives something from the view
// compares it before and after an Add to know whether the view did more.
func (l *Log) Disorder() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	for m, c := range l.chains {
		if c.dirty {
			l.chainHead(m) // so that the next events extend it cleanly
		}
	}
	return l.disorder
}

// Path returns the journal file's path.
func (l *Log) Path() string { return l.path }

// Close waits for appends in flight, then closes the file. Later appends
// return ErrClosed; closing again returns nil.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.wakeup.Signal()
	l.mu.Unlock()
	<-l.flusher
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("close journal %s: %w", l.path, err)
	}
	return nil
}
