package simnet

import (
	"fmt"

	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/syncpolicy"
)

// host is one simulated node: its machine, its durable registry, its
// capsule store and staging area, and whether it is up, paused, running.
type host struct {
	r       *Runner
	idx     int
	id      string
	peers   []string
	have    func(fencing.File) bool
	m       *fencing.Machine
	reg     fencing.MemRegistry
	saved   savedRecord // what the registry holds, for the checker
	up      bool
	paused  bool
	running bool
	lost    bool  // registry lost and not yet relearnt
	lostAt  int64 // when it last lost its registry (-1 never)

	store    versions // the capsule this node holds
	staged   versions // the staging area: versions of the files in it
	stagedOK uint8    // bit i: file i is in the staging area
	migVers  versions // the capsule of the migration it started last

	tailFiles []fencing.File // what the migration in its tail will propose
	backup    savedRecord    // an old copy of its registry (evBackup)
	hasBackup bool
	// restored: it came back from a crash with its old backup, and may run
	// the agent under an epoch that had ended (the one fault epochs cannot
	// see while it is alone) until it meets a peer that knows better;
	// staleRun: it does so now. Neither counts as a second runner.
	restored, staleRun bool
	// signed is the newest epoch it ran the agent under: what its journal
	// says (events signed under it), which peers give back to a restored
	// home.
	signed uint64

	deferred []int32         // messages that arrived while paused
	lastProp fencing.Message // the last propose it sent, for a stale wake-up
	lastAct  fencing.Message // the last activate it sent

	tickedTo int64 // the machine has been ticked through this time
	nextTick int64 // when its next timer is due, -1 if none

	// The sync layer (sync.go).
	sp           *syncpolicy.Machine[events]
	spPeers      []syncpolicy.Peer
	events       events // the agent's events it holds: its journal, durable
	backupEvents events // those its backup holds (evBackup)
	life         uint32 // its starts: what a stream or dial of an earlier life is for
	linked       []bool // linked[j]: its machine was told it is connected to node j
	spTickedTo   int64  // its sync machine has been ticked through this time
	spNext       int64  // when its next anti-entropy pass is due
	spDeferred   []event
	spRounds     []syncpolicy.Round // what applySync carries out
	spDials      []string
	applying     bool // applySync runs
}

func newHost(r *Runner, i, n int) *host {
	h := &host{r: r, idx: i, id: fmt.Sprintf("n%d", i)}
	for j := 0; j < n; j++ {
		if j != i {
			h.peers = append(h.peers, fmt.Sprintf("n%d", j))
			h.spPeers = append(h.spPeers, syncpolicy.Peer{ID: fmt.Sprintf("n%d", j), Dialable: true})
		}
	}
	h.linked = make([]bool, n)
	h.have = func(f fencing.File) bool {
		i := fileIndex(f.Name)
		if i < 0 {
			return false
		}
		_, sum := h.r.content.get(i, h.store[i])
		return sum == f.Sum
	}
	return h
}

func (h *host) reset() {
	h.saved.reset()
	h.nextTick = -1
	h.up, h.paused, h.running, h.lost = true, false, false, false
	h.tailFiles, h.hasBackup, h.restored, h.staleRun = nil, false, false, false
	h.signed = 0
	h.backup.reset()
	h.lostAt = -1
	h.store, h.staged, h.stagedOK, h.migVers = versions{}, versions{}, 0, versions{}
	h.deferred = h.deferred[:0]
	h.lastProp, h.lastAct = fencing.Message{}, fencing.Message{}
	h.events, h.backupEvents, h.life = events{}, events{}, 0
	clear(h.linked)
	h.spDeferred = h.spDeferred[:0]
}

func (h *host) String() string {
	s := fmt.Sprintf("%s %v e%d highest %d", h.id, h.saved.State, h.saved.Epoch, h.saved.Highest)
	if h.saved.State == fencing.Frozen {
		s += fmt.Sprintf(" next %d to %s committing=%v", h.saved.Next, h.saved.Peer, h.saved.Committing)
	}
	if h.saved.Floor > 0 {
		s += fmt.Sprintf(" floor %d", h.saved.Floor)
	}
	switch {
	case !h.up:
		s += " down"
	case h.paused:
		s += " paused"
	case h.lost:
		s += " lost"
	}
	if h.running {
		s += " running"
	}
	if h.staleRun {
		s += " (stale, restored from a backup)"
	}
	if h.m != nil && h.m.Tailing() {
		s += " tailing"
	}
	return s
}

func (h *host) config() fencing.Config {
	return fencing.Config{Self: h.id, Agent: AgentID, Peers: h.peers, Incarnation: h.r.rng.Uint64() | 1,
		Timing: timing, Have: h.have, Flaw: h.r.opt.Flaw}
}

// boot starts the node's machine from its registry.
func (r *Runner) boot(h *host) {
	if h.m == nil {
		h.m = new(fencing.Machine)
	}
	rec, ok, err := h.reg.Load(AgentID)
	switch {
	case err != nil:
		err = h.m.RestartLost(h.config())
	case !ok:
		err = fmt.Errorf("no record")
	default:
		err = h.m.Restart(h.config(), rec)
	}
	if err != nil {
		r.violation("boot %s: %v", h.id, err)
		return
	}
	h.up, h.tickedTo = true, r.now-1
	if r.trace != nil {
		r.tracef("%s boots as %v", h.id, h.saved.State)
	}
	h.m.Signed(h.signed)
	r.apply(h)
	if !r.syncDone {
		r.bootSync(h)
	}
}

// apply carries out a machine's Ready in the documented order, checking
// every durable change and every start of the runtime.
func (r *Runner) apply(h *host) {
	for h.m.HasReady() && !r.violated {
		rd := h.m.Ready()
		if rd.Stop {
			r.setRunning(h, false)
		}
		if rd.ClearStaging {
			h.stagedOK = 0
		}
		for _, c := range rd.Stage {
			f, v := versionOf(c.Data)
			if f != c.Index || fileIndex(c.File.Name) != f {
				r.violation("%s staged %q from bytes of file %d", h.id, c.File.Name, f)
				return
			}
			h.staged[f] = v
			h.stagedOK |= 1 << f
		}
		if rd.Persist {
			r.fail(r.chk.Persist(h.idx, &h.saved.Record, &rd.Record, r.now))
			if err := h.reg.Save(AgentID, rd.Record); err != nil {
				r.violation("%s persist: %v", h.id, err)
				return
			}
			h.saved.copyFrom(&rd.Record)
		}
		if rd.Promote {
			r.promote(h, rd.Files)
		}
		for i := range rd.Messages {
			r.send(h, &rd.Messages[i])
		}
		if rd.Run {
			r.setRunning(h, true)
		}
		for _, ev := range rd.Events {
			r.res.Coverage[ev.Kind]++
			r.mix(uint64(ev.Kind), ev.Epoch, uint64(h.idx), 200)
			if r.trace != nil {
				r.tracef("%s event %v", h.id, ev)
			}
			switch ev.Kind {
			case fencing.EvRegistryLost:
				// At a start without its registry, or once a peer showed that
				// its registry was restored from an older copy: it relearns,
				// and its next record replaces what the file holds.
				h.lost = true
				h.saved.reset()
			case fencing.EvRelearned:
				h.lost, h.restored = false, false
			case fencing.EvSteppedDown, fencing.EvActivated:
				h.restored = false
			case fencing.EvOverride:
				if h.saved.State == fencing.Active {
					// The operator restarts the agent from this node's copy
					// (a real node has synced the journal by gossip).
					r.cur = h.store
				}
			}
		}
		prepare, promoted := rd.Prepare, rd.Promote
		h.m.Advance()
		if prepare != 0 {
			h.m.PrepareDone(prepare, nil)
		}
		if promoted {
			h.m.PromoteDone(nil)
		}
	}
	r.reschedule(h)
	r.checkHost(h)
}

// promote makes the staging area the node's capsule and checks that every
// file of it is the one the proposal declared: the model's verify.
func (r *Runner) promote(h *host, files []fencing.File) {
	for i, f := range files {
		j := fileIndex(f.Name)
		if j != i {
			r.violation("%s promoted an unknown file %q", h.id, f.Name)
			return
		}
		if h.stagedOK&(1<<i) != 0 {
			h.store[i] = h.staged[i]
		}
		if _, sum := r.content.get(i, h.store[i]); sum != f.Sum {
			r.violation("%s promoted a capsule that does not verify: %s is version %d, not the one proposed", h.id, f.Name, h.store[i])
			return
		}
	}
	h.stagedOK = 0
}

func (r *Runner) setRunning(h *host, on bool) {
	if h.running == on {
		return
	}
	h.running = on
	if !on && h.staleRun {
		h.staleRun = false
		if r.trace != nil {
			r.tracef("%s stops running its stale epoch", h.id)
		}
		return
	}
	if on && h.restored && h.saved.Epoch < r.chk.MaxActivated() {
		// Restored from a backup and alone: the one fault epochs cannot
		// see. It must stop once it meets a peer that knows better; at
		// quiescence it may not run.
		h.staleRun = true
		if r.trace != nil {
			r.tracef("%s, restored from a backup, runs epoch %d alone (newest activated %d)", h.id, h.saved.Epoch, r.chk.MaxActivated())
		}
		return
	}
	if !on {
		r.runners--
		if r.trace != nil {
			r.tracef("%s stops running", h.id)
		}
		return
	}
	r.runners++
	h.signed = max(h.signed, h.saved.Epoch)
	if r.trace != nil {
		r.tracef("%s runs at epoch %d", h.id, h.saved.Epoch)
	}
	if r.runners > 1 {
		r.violation("%d nodes run the agent: %s", r.runners, r.describe())
		return
	}
	r.fail(r.chk.Run(h.idx, &h.saved.Record))
}

// deliver hands message i of the slab to h.
func (r *Runner) deliver(h *host, i int32) {
	if !h.up {
		r.release(i)
		return
	}
	if h.paused {
		h.deferred = append(h.deferred, i)
		return
	}
	msg := &r.slab[i]
	r.mix(uint64(msg.Type), msg.Epoch, uint64(msg.Decision), uint64(msg.Index))
	if r.trace != nil {
		r.tracef("deliver %s", msg)
	}
	r.input(h)
	err := h.m.Step(*msg)
	r.release(i)
	if err != nil {
		r.violation("%s step: %v", h.id, err)
		return
	}
	r.apply(h)
}

func (r *Runner) crash(h *host, loseRegistry, restore bool) {
	if !h.up {
		return
	}
	restore = restore && h.hasBackup
	if loseRegistry || restore {
		// A restored registry lost what it decided since its backup:
		// it counts among the registries lost at once.
		lost, restored := 0, false
		for _, o := range r.hosts {
			if o != h && (o.lost || o.restored) {
				lost++
			}
			restored = restored || o != h && o.restored
		}
		loseRegistry = loseRegistry && lost < maxLost && !restored
		restore = restore && lost == 0 // one loss of knowledge at a time: see MIGRATION.md
	}
	if r.trace != nil {
		r.tracef("%s crashes (registry lost: %v)", h.id, loseRegistry)
	}
	r.setRunning(h, false)
	h.up, h.paused, h.nextTick = false, false, -1
	r.relink()
	for _, i := range h.deferred {
		r.release(i)
	}
	h.deferred = h.deferred[:0]
	if loseRegistry {
		// The checker keeps every decision h ever wrote and holds it to them.
		h.reg.Lose()
		h.saved.reset()
		h.lost, h.lostAt = true, r.now
	}
	if restore {
		// Its home comes back from the backup: the registry forgets what
		// it decided since, and so does the checker (no registry holds
		// it any more); an epoch activated anywhere stays activated.
		if err := h.reg.Save(AgentID, h.backup.Record); err != nil {
			r.violation("restore %s: %v", h.id, err)
			return
		}
		h.saved.copyFrom(&h.backup.Record)
		h.events = h.backupEvents // its journal comes back from the backup too
		r.quietFrom = r.now
		h.lost, h.restored = false, true
		h.lostAt = r.now // what it decided since its backup is lost, as with a lost registry
		h.stagedOK = 0   // the staging area is the backup's: empty at the epochs it knows
		r.chk.Forget(h.idx)
		r.fail(r.chk.Boot(h.idx, &h.saved.Record, r.now))
		if r.trace != nil {
			r.tracef("%s's home is restored from its backup: %v e%d highest %d", h.id, h.saved.State, h.saved.Epoch, h.saved.Highest)
		}
	}
	if !r.healed && !restore {
		r.schedule(r.now+int64(downMin+r.rng.IntN(downMax-downMin+1)), evRestart, int32(h.idx), 0)
	}
	// A restored home comes back when the faults end: the person restored
	// it, then reconnected it (docs/MIGRATION.md: alone, a restored node
	// runs under its old epoch, the one fault epochs cannot see).
}

func (r *Runner) restart(h *host) {
	if h.up {
		return
	}
	if r.trace != nil {
		r.tracef("%s restarts", h.id)
	}
	r.boot(h)
	r.connectAll(h)
}

func (r *Runner) pause(h *host) {
	if !h.up || h.paused || r.healed {
		return
	}
	if r.trace != nil {
		r.tracef("%s pauses", h.id)
	}
	r.input(h)
	h.paused = true
	r.relink()
	r.schedule(r.now+int64(pauseMin+r.rng.IntN(pauseMax-pauseMin+1)), evWake, int32(h.idx), 0)
}

// wake ends a pause: the node handles what queued up meanwhile and, stale,
// sends again the last propose and activate it had sent.
func (r *Runner) wake(h *host) {
	if !h.up || !h.paused {
		return
	}
	if r.trace != nil {
		r.tracef("%s wakes", h.id)
	}
	h.paused = false
	h.tickedTo = r.now - 1 // asleep, its clock did not move
	r.reschedule(h)
	r.checkHost(h)
	if h.lastProp.Type != 0 {
		if r.trace != nil {
			r.tracef("%s wakes stale and proposes epoch %d again", h.id, h.lastProp.Epoch)
		}
		r.transmit(&h.lastProp)
	}
	if h.lastAct.Type != 0 {
		if r.trace != nil {
			r.tracef("%s wakes stale and activates epoch %d again", h.id, h.lastAct.Epoch)
		}
		r.transmit(&h.lastAct)
	}
	q := h.deferred
	h.deferred = nil
	for _, i := range q {
		if r.violated || !h.up {
			r.release(i)
			continue
		}
		r.deliver(h, i)
	}
	h.deferred = q[:0]
	r.connectAll(h)
	r.wakeSync(h)
}

func (r *Runner) heal() {
	if r.trace != nil {
		r.tracef("heal: links repaired, nodes restarted and woken, message faults off")
	}
	r.healed = true
	clear(r.cut)
	for i := range r.parts {
		r.parts[i].active = false
	}
	for _, h := range r.hosts {
		if !h.up {
			r.restart(h)
		}
	}
	for _, h := range r.hosts {
		if h.paused {
			r.wake(h)
		}
	}
	for _, h := range r.hosts {
		r.connectAll(h)
	}
}

// savedRecord is a copy of a persisted record with its own memory.
type savedRecord struct{ fencing.Record }

func (s *savedRecord) reset() {
	ds := s.Decisions[:0]
	s.Record = fencing.Record{Decisions: ds}
}

func (s *savedRecord) copyFrom(r *fencing.Record) {
	ds := append(s.Decisions[:0], r.Decisions...)
	s.Record = *r
	s.Decisions = ds
}
