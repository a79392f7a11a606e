package simnet

import (
	"errors"
	"fmt"

	"github.com/tern-dev/tern/syncpolicy"
)

// The sync layer of the model: beside its fencing machine, every node runs
// a syncpolicy.Machine and holds a copy of the agent's events. Connections
// form only when a node dials (the machine says when) and the link allows
// it, and end when a node crashes or pauses or a cut falls between them.
// The rounds the machines ask for run over the faulty network as streams:
// the capsule list (the peer's vector, to see a copy held alike), then the
// sync exchange (hello with the initiator's vector, offer of the
// responder's events, done with the initiator's). A frame lost or corrupt
// breaks its stream, as a reset does; a stream never duplicates or replays.
// The initiator counts an exchange done only once the responder has
// stored what it sent and ended the stream (protocol.Finish).
// Once the faults have ended and nothing has moved for a while, every
// node must be connected to every other and every copy must be the same.

// Timing of the sync layer, in ticks.
const (
	syncInterval = 48                // between anti-entropy passes (the fencing retry is 4)
	syncSettle   = 3 * syncInterval  // quiet after healing before the copies are compared
	syncLimit    = 40 * syncInterval // after healing, by which the sync layer must have settled
)

// events is a copy of the agent's events: of each node, how many of the
// events it wrote the copy holds (a chain, held from its start).
type events [MaxNodes]uint32

// merge adds what o holds to e and reports whether e changed.
func (e *events) merge(o *events) bool {
	changed := false
	for i, n := range o {
		if n > e[i] {
			e[i], changed = n, true
		}
	}
	return changed
}

func (e *events) String() string {
	s := "{"
	for i, n := range e {
		if n > 0 {
			if len(s) > 1 {
				s += " "
			}
			s += fmt.Sprintf("n%d:%d", i, n)
		}
	}
	return s + "}"
}

func sameEvents(a, b events) bool { return a == b }

// What a sync event does.
const (
	sevFrame = iota // the frame in flight on stream arg reaches node
	sevReset        // node learns that stream arg broke
	sevDial         // node's dial of peer arg&63 (in its life arg>>6) ends
	sevEdit         // node writes an event (an offline edit)
)

// The frames of the streams.
const (
	frameListAsk   = iota + 1 // initiator → responder: which capsules do you share?
	frameListReply            // responder → initiator: this one, at this vector
	frameHello                // initiator → responder: the agent, my vector
	frameOffer                // responder → initiator: the events you lack, my vector
	frameDone                 // initiator → responder: the events you lack, my vector
	frameFin                  // responder → initiator: stored; the stream ends (protocol.Finish)
)

var frameNames = [...]string{"?", "list", "list reply", "hello", "offer", "done", "fin"}

// stream is one libp2p stream of a round: a capsule list or an exchange.
type stream struct {
	from, to         int32  // initiator, responder
	fromLife, toLife uint32 // the life of each end it belongs to
	exchange         bool   // an exchange, not a list
	scope            syncpolicy.Scope
	frame            uint8 // the frame in flight, if any
	data             events
	broken           bool
	// waiting: each end still has something to do when the stream ends:
	// the initiator its round, the responder its exchange.
	fromWaiting, toWaiting bool
}

// SyncCounts count what the sync layer did.
type SyncCounts struct {
	Writes            int // events written (by the runner, and offline edits)
	Passes            int // anti-entropy passes
	Rounds            int
	Alike             int // capsules a list showed held alike
	Exchanges         int // exchanges that ended well
	SkippedHeld       int // capsules skipped: the peer holds them (syncpolicy.SkipHeld)
	SkippedResponding int // capsules left to the peer's exchange (syncpolicy.SkipResponding)
	Broken            int // streams broken by a lost frame, a cut, a crash or a pause
	Dials             int
	FailedDials       int
}

// Add adds o's counts to c.
func (c *SyncCounts) Add(o *SyncCounts) {
	c.Writes += o.Writes
	c.Passes += o.Passes
	c.Rounds += o.Rounds
	c.Alike += o.Alike
	c.Exchanges += o.Exchanges
	c.SkippedHeld += o.SkippedHeld
	c.SkippedResponding += o.SkippedResponding
	c.Broken += o.Broken
	c.Dials += o.Dials
	c.FailedDials += o.FailedDials
}

var errUnreachable = errors.New("unreachable")

// planSync plans the offline edits of the run, before end.
func (r *Runner) planSync(end int64) {
	n := len(r.hosts)
	for range r.srng.IntN(r.opt.Migrations/2 + 1) {
		r.scheduleSync(1+r.srng.Int64N(end), sevEdit, int32(r.srng.IntN(n)), 0)
	}
}

func (r *Runner) scheduleSync(at int64, kind uint8, node, arg int32) {
	r.seq++
	r.squeue.push(event{at: at, seq: r.seq, kind: kind, node: node, arg: arg})
}

// bootSync starts h's sync machine anew, as its node starts: it knows no
// one; its copy of the events is what its journal held.
func (r *Runner) bootSync(h *host) {
	h.life++
	clear(h.linked)
	h.spDeferred = h.spDeferred[:0]
	cfg := syncpolicy.Config{Self: h.id, Peers: h.spPeers, Interval: syncInterval, Flaw: r.opt.Flaw}
	if h.sp == nil {
		h.sp = new(syncpolicy.Machine[events])
	}
	if err := h.sp.Restart(cfg, sameEvents); err != nil {
		r.violation("boot the sync policy of %s: %v", h.id, err)
		return
	}
	h.spTickedTo = r.now - 1
	h.sp.DialAll() // as a node does when it starts
	r.applySync(h)
}

// write makes h write one event of the agent. A node goes on from the
// newest event of its own chain (a node takes it from its peers first).
func (r *Runner) write(h *host) {
	r.written[h.idx]++
	h.events[h.idx] = r.written[h.idx]
	r.res.Sync.Writes++
	r.quietFrom = r.now
	if r.trace != nil {
		r.tracef("%s writes its event %d: holds %v", h.id, r.written[h.idx], &h.events)
	}
}

// syncInput brings h's sync clock to just before now, ahead of an input.
// (An input that comes while h's Ready is being carried out, a round that
// fails at once, finds the clock there.)
func (r *Runner) syncInput(h *host) {
	if h.applying {
		return
	}
	for h.spTickedTo < r.now-1 {
		h.sp.Tick()
		h.spTickedTo++
	}
	if h.sp.HasReady() {
		r.violation("%s's sync policy acted on a timer it had not announced (Deadline)", h.id)
	}
}

// applySync carries out what h's sync machine asks for. Inputs that come
// meanwhile (a round that fails at once) are carried out by the same call.
func (r *Runner) applySync(h *host) {
	if h.applying {
		return
	}
	h.applying = true
	for h.sp.HasReady() && !r.violated {
		rd := h.sp.Ready()
		h.spRounds = append(h.spRounds[:0], rd.Rounds...)
		h.spDials = append(h.spDials[:0], rd.Dials...)
		if rd.CloseIdle {
			r.res.Sync.Passes++ // nothing to close in the model
		}
		h.sp.Advance()
		for _, rd := range h.spRounds {
			r.startRound(h, rd)
		}
		for _, p := range h.spDials {
			r.dialPeer(h, hostIndex(p))
		}
	}
	h.applying = false
	h.spNext = h.spTickedTo + int64(h.sp.Deadline())
}

// linkUp reports whether a and b can be connected now.
func (r *Runner) linkUp(a, b int) bool {
	n, ha, hb := len(r.hosts), r.hosts[a], r.hosts[b]
	return ha.up && hb.up && !ha.paused && !hb.paused && r.cut[a*n+b] == 0 && r.cut[b*n+a] == 0
}

// relink ends every connection whose link went down (a crash, a pause, a
// cut) and breaks its streams, then tells every node that can hear it.
func (r *Runner) relink() {
	if r.syncDone {
		return
	}
	n := len(r.hosts)
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			if r.conn[a*n+b] && !r.linkUp(a, b) {
				r.conn[a*n+b], r.conn[b*n+a] = false, false
				r.mix(uint64(r.now), 1100, uint64(a), uint64(b))
				if r.trace != nil {
					r.tracef("sync: n%d and n%d are disconnected", a, b)
				}
				r.breakStreams(a, b)
			}
		}
	}
	for _, h := range r.hosts {
		r.tellLinks(h)
	}
}

// tellLinks tells h's sync machine of every connection that opened or
// ended since it was last told, if it can hear it now.
func (r *Runner) tellLinks(h *host) {
	if !h.up || h.paused || r.violated {
		return
	}
	n := len(r.hosts)
	for j, o := range r.hosts {
		if j == h.idx || h.linked[j] == r.conn[h.idx*n+j] {
			continue
		}
		h.linked[j] = !h.linked[j]
		r.syncInput(h)
		if h.linked[j] {
			h.sp.Connected(o.id)
		} else {
			h.sp.Disconnected(o.id)
		}
		r.applySync(h)
	}
}

// breakStreams breaks every stream between a and b that is not done.
func (r *Runner) breakStreams(a, b int) {
	for i := range r.streams {
		s := &r.streams[i]
		if !s.broken && (s.fromWaiting || s.toWaiting) &&
			(int(s.from) == a && int(s.to) == b || int(s.from) == b && int(s.to) == a) {
			r.breakStream(int32(i))
		}
	}
}

// breakStream breaks stream i: each end still waiting on it learns so
// after a tick.
func (r *Runner) breakStream(i int32) {
	s := &r.streams[i]
	s.broken = true
	s.frame = 0
	r.res.Sync.Broken++
	if s.fromWaiting {
		r.scheduleSync(r.now+1, sevReset, s.from, i)
	}
	if s.toWaiting {
		r.scheduleSync(r.now+1, sevReset, s.to, i)
	}
}

// dialPeer dials node p from h: the connection opens when the dial
// arrives, if the link allows it then.
func (r *Runner) dialPeer(h *host, p int) {
	r.res.Sync.Dials++
	r.scheduleSync(r.now+r.syncLatency(), sevDial, int32(h.idx), int32(h.life)<<6|int32(p))
}

// syncLatency is the latency of a frame or a dial: 1 to 1+Jitter ticks,
// sometimes much longer before the faults end.
func (r *Runner) syncLatency() int64 {
	latency := int64(1)
	if r.set.Jitter > 0 {
		latency += int64(r.srng.IntN(r.set.Jitter + 1))
	}
	if !r.healed && r.set.Delay > 0 && r.srng.Float64() < r.set.Delay {
		latency += int64(longDelayMin + r.srng.IntN(longDelayMax-longDelayMin+1))
	}
	return latency
}

// startRound runs one round the machine of h asked for. The model's
// capsules want no blobs: a round of wants ends at once.
func (r *Runner) startRound(h *host, rd syncpolicy.Round) {
	r.res.Sync.Rounds++
	p := hostIndex(rd.Peer)
	r.mix(uint64(r.now), 1000+uint64(rd.Scope), uint64(h.idx), uint64(p))
	if r.trace != nil {
		r.tracef("sync: %s starts a round of %v with %s", h.id, rd.Scope, rd.Peer)
	}
	if rd.Scope <= syncpolicy.WantsOnly {
		h.sp.RoundDone(rd.Peer)
		return
	}
	r.open(h, p, false, rd.Scope, frameListAsk)
}

// open opens a stream from h to p and sends its first frame; on no
// connection it fails at once (a round never dials).
func (r *Runner) open(h *host, p int, exchange bool, scope syncpolicy.Scope, first uint8) {
	r.streams = append(r.streams, stream{from: int32(h.idx), to: int32(p), fromLife: h.life, toLife: r.hosts[p].life,
		exchange: exchange, scope: scope, fromWaiting: true, data: h.events})
	i := int32(len(r.streams) - 1)
	if !r.conn[h.idx*len(r.hosts)+p] {
		r.streams[i].broken = true
		r.endOfStream(h, i)
		return
	}
	r.sendFrame(i, first, &h.events)
}

// sendFrame sends frame f carrying data on stream i, towards the end that
// does not send it. Before the faults end, a frame may be lost or corrupt,
// which breaks the stream.
func (r *Runner) sendFrame(i int32, f uint8, data *events) {
	s := &r.streams[i]
	s.frame, s.data = f, *data
	to := s.to
	if f == frameListReply || f == frameOffer || f == frameFin {
		to = s.from
	}
	if !r.healed && (r.set.Drop > 0 || r.set.Corrupt > 0) && r.srng.Float64() < r.set.Drop+r.set.Corrupt {
		if r.trace != nil {
			r.tracef("sync: %s lost, the stream n%d -> n%d breaks", frameNames[f], s.from, s.to)
		}
		r.breakStream(i)
		return
	}
	r.scheduleSync(r.now+r.syncLatency(), sevFrame, to, i)
}

// handleSync handles one event of the sync layer.
func (r *Runner) handleSync(e *event) {
	r.res.Steps++
	r.mix(uint64(e.at), 1200+uint64(e.kind), uint64(e.node), uint64(e.arg))
	h := r.hosts[e.node]
	if !h.up {
		return
	}
	if h.paused {
		if e.kind != sevEdit {
			h.spDeferred = append(h.spDeferred, *e)
		}
		return
	}
	switch e.kind {
	case sevEdit:
		r.write(h)
	case sevDial:
		r.dialEnds(h, int(e.arg&63), uint32(e.arg>>6))
	case sevReset:
		r.endOfStream(h, e.arg)
	case sevFrame:
		r.frame(h, e.arg)
	}
}

// dialEnds ends h's dial of node p: connected if the link allows it.
func (r *Runner) dialEnds(h *host, p int, life uint32) {
	if life != h.life {
		return // a dial of the node's earlier life
	}
	n, o := len(r.hosts), r.hosts[p]
	var err error
	switch {
	case r.conn[h.idx*n+p]:
	case r.linkUp(h.idx, p):
		r.conn[h.idx*n+p], r.conn[p*n+h.idx] = true, true
		if r.trace != nil {
			r.tracef("sync: %s dialed %s: connected", h.id, o.id)
		}
		r.tellLinks(h)
		r.tellLinks(o)
	default:
		err = errUnreachable
		r.res.Sync.FailedDials++
		if r.trace != nil {
			r.tracef("sync: %s dialed %s: unreachable", h.id, o.id)
		}
	}
	r.syncInput(h)
	h.sp.Dialed(o.id, err)
	r.applySync(h)
}

// frame delivers the frame in flight on stream i to h.
func (r *Runner) frame(h *host, i int32) {
	s := &r.streams[i]
	if s.broken || s.frame == 0 {
		return
	}
	f := s.frame
	s.frame = 0
	from, to := r.hosts[s.from], r.hosts[s.to]
	if r.trace != nil {
		r.tracef("sync: %s n%d -> n%d: %v", frameNames[f], s.from, s.to, &s.data)
	}
	switch f {
	case frameListAsk:
		r.sendFrame(i, frameListReply, &to.events)
	case frameListReply:
		s.fromWaiting = false
		r.decide(from, int(s.to), s.scope, &s.data)
	case frameHello:
		s.toWaiting = true
		r.syncInput(to)
		to.sp.ExchangeStarted(from.id, AgentID)
		r.applySync(to)
		r.sendFrame(i, frameOffer, &to.events)
	case frameOffer:
		r.merge(from, &s.data)
		r.sendFrame(i, frameDone, &from.events)
	case frameDone:
		// Both hold the initiator's vector now: the responder records it
		// (protocol.Recorder), ends its exchange and then the stream.
		both := s.data
		r.merge(to, &both)
		s.toWaiting = false
		r.syncInput(to)
		to.sp.Exchanged(from.id, AgentID, both)
		to.sp.ExchangeEnded(from.id, AgentID)
		r.applySync(to)
		r.sendFrame(i, frameFin, &both)
	case frameFin:
		s.fromWaiting = false
		r.res.Sync.Exchanges++
		r.syncInput(from)
		from.sp.Exchanged(to.id, AgentID, s.data)
		from.sp.RoundDone(to.id)
		r.applySync(from)
	}
}

// endOfStream tells h that stream i broke (or could not open): a list
// that failed leaves the round to go on without the peer's vector; an
// exchange that failed ends the round, or the exchange the peer started.
func (r *Runner) endOfStream(h *host, i int32) {
	s := &r.streams[i]
	switch {
	case int(s.from) == h.idx && s.fromWaiting && s.fromLife == h.life:
		s.fromWaiting = false
		if !s.exchange {
			r.decide(h, int(s.to), s.scope, nil)
			return
		}
		r.syncInput(h)
		h.sp.RoundDone(r.hosts[s.to].id)
		r.applySync(h)
	case int(s.to) == h.idx && s.toWaiting && s.toLife == h.life:
		s.toWaiting = false
		r.syncInput(h)
		h.sp.ExchangeEnded(r.hosts[s.from].id, AgentID)
		r.applySync(h)
	}
}

// decide is the rest of h's round with node p once the list answered
// (theirs, the peer's vector) or failed (nil): the capsule held alike is
// recorded and skipped; otherwise the machine decides.
func (r *Runner) decide(h *host, p int, scope syncpolicy.Scope, theirs *events) {
	peer := r.hosts[p].id
	r.syncInput(h)
	if theirs != nil && *theirs == h.events {
		r.res.Sync.Alike++
		h.sp.Exchanged(peer, AgentID, h.events)
		h.sp.RoundDone(peer)
		r.applySync(h)
		return
	}
	a := h.sp.Decide(peer, AgentID, scope, h.events)
	r.mix(uint64(r.now), 1300+uint64(a), uint64(h.idx), uint64(p))
	if r.trace != nil {
		r.tracef("sync: %s decides %v for its capsule with %s", h.id, a, peer)
	}
	switch a {
	case syncpolicy.Exchange:
		r.open(h, p, true, scope, frameHello)
		return
	case syncpolicy.SkipHeld:
		r.res.Sync.SkippedHeld++
	case syncpolicy.SkipResponding:
		r.res.Sync.SkippedResponding++
	}
	h.sp.RoundDone(peer)
	r.applySync(h)
}

// merge adds the events o to h's copy.
func (r *Runner) merge(h *host, o *events) {
	if h.events.merge(o) {
		r.quietFrom = r.now
	}
}

// wakeSync brings h's sync machine back from a pause: its clock stood
// still, its connections ended meanwhile, and what reached it waits.
func (r *Runner) wakeSync(h *host) {
	if r.syncDone {
		return
	}
	h.spTickedTo = r.now - 1
	h.spNext = h.spTickedTo + int64(h.sp.Deadline())
	r.tellLinks(h)
	q := h.spDeferred
	h.spDeferred = nil
	for i := range q {
		if r.violated || !h.up || h.paused {
			break
		}
		r.handleSync(&q[i])
	}
	h.spDeferred = q[:0]
}

// syncTimers runs the anti-entropy passes due at t.
func (r *Runner) syncTimers(t int64) {
	if r.syncDone {
		return
	}
	for _, h := range r.hosts {
		if r.violated {
			return
		}
		if h.up && !h.paused && h.spNext == t {
			r.res.Steps++
			r.mix(uint64(t), 1400, uint64(h.idx), 0)
			for h.spTickedTo < t {
				h.sp.Tick()
				h.spTickedTo++
			}
			r.applySync(h)
		}
	}
}

// nextSyncTime returns when the next sync event or pass is due; false
// once the sync layer is done.
func (r *Runner) nextSyncTime() (int64, bool) {
	if r.syncDone {
		return 0, false
	}
	t, ok := r.squeue.earliest(r.now + 1)
	for _, h := range r.hosts {
		if h.up && !h.paused && (!ok || h.spNext < t) {
			t, ok = h.spNext, true
		}
	}
	return t, ok
}

// settleSync checks, once the faults have ended and the sync layer has
// been quiet long enough (nothing in flight, no copy changed), that every
// node is connected to every other and holds the same events: paired
// copies converge. Then the sync layer is done.
func (r *Runner) settleSync() {
	if r.syncDone || !r.healed || r.violated {
		return
	}
	if r.now > r.healAt+syncLimit {
		r.violation("the sync layer has not settled %d ticks after healing", r.now-r.healAt)
		return
	}
	if r.squeue.count > 0 || len(r.squeue.far) > 0 || r.now < max(r.quietFrom, r.healAt)+syncSettle {
		return
	}
	r.syncDone = true
	n := len(r.hosts)
	for a, ha := range r.hosts {
		for b := a + 1; b < n; b++ {
			hb := r.hosts[b]
			switch {
			case !r.conn[a*n+b]:
				r.violation("%s and %s are not connected %d ticks after the faults ended", ha.id, hb.id, r.now-r.healAt)
			case ha.events != hb.events:
				r.violation("paired copies differ %d ticks after the faults ended, %d after the last change: %s holds %v, %s holds %v",
					r.now-r.healAt, r.now-r.quietFrom, ha.id, &ha.events, hb.id, &hb.events)
			}
			if r.violated {
				return
			}
		}
	}
	if r.trace != nil {
		r.tracef("sync: settled; every copy holds %v", &r.hosts[0].events)
	}
}
