package fencing

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tern-dev/tern/internal/flaws"
)

// Timing sets the machine's timeouts in ticks. They decide when to give up
// or ask again, never what is safe. A zero field takes its default.
type Timing struct {
	// Retry is how often an unanswered request is sent again (and how
	// often a committing source asks the target for its decision).
	Retry int
	// Abort is how long a migration may hear nothing from its target
	// before the point of no return; then the source aborts and resumes.
	Abort int
	// Staging is how long a target keeps a staging area its source has
	// gone silent on; then it refuses the epoch and empties it.
	Staging int
	// Startup is how long a node that starts holding active waits for its
	// peers before it runs anyway (unless Config.Strict).
	Startup int
}

// DefaultTiming is the Timing of a zero Config.Timing.
var DefaultTiming = Timing{Retry: 4, Abort: 24, Staging: 48, Startup: 8}

func (t Timing) orDefault() Timing {
	d := DefaultTiming
	if t.Retry > 0 {
		d.Retry = t.Retry
	}
	if t.Abort > 0 {
		d.Abort = t.Abort
	}
	if t.Staging > 0 {
		d.Staging = t.Staging
	}
	if t.Startup > 0 {
		d.Startup = t.Startup
	}
	return d
}

// Config is what a Machine knows besides its record.
type Config struct {
	Self  string   // this node's peer ID
	Agent string   // the agent's canonical id (the capsule manifest's id)
	Peers []string // every other paired node; relearning asks all of them
	// Incarnation is a number unique to this start of the node (random,
	// or a boot counter); answers to an older incarnation's questions are
	// ignored. Required when there are peers.
	Incarnation uint64
	Timing      Timing
	// Strict: a node that starts holding active runs only after reaching
	// at least one peer, instead of running offline.
	Strict bool
	// Have reports whether the node already holds a verified copy of a
	// file outside the staging area (synced by gossip), so that the source
	// need not send it. It is called during Step and must not block; nil
	// means the node has nothing.
	Have func(File) bool
	// Flaw is zero (the sound protocol) everywhere but in tern's own
	// tests and tern simnet --flaw: its type is internal to this module, so
	// no program outside it can switch a flaw on.
	Flaw flaws.Flaw
}

func (c *Config) check() error {
	if c.Self == "" {
		return errors.New("fencing: config needs Self")
	}
	if err := checkAgentID(c.Agent); err != nil {
		return fmt.Errorf("fencing: config: %w", err)
	}
	for i, p := range c.Peers {
		if p == "" || p == c.Self || slices.Contains(c.Peers[:i], p) {
			return fmt.Errorf("fencing: peer %q is empty, this node, or listed twice", p)
		}
	}
	if len(c.Peers) > 0 && c.Incarnation == 0 {
		return errors.New("fencing: config needs a nonzero Incarnation")
	}
	return nil
}

// Machine is the fencing state machine of one agent on one node: source and
// target of migrations, relearning after a lost registry, the startup check
// and operator overrides. It is not safe for concurrent use.
type Machine struct {
	cfg     Config
	tm      Timing
	rec     Record
	lost    bool // registry lost and not yet relearnt
	running bool // the runtime runs (or will, once the pending Ready is applied)

	rd Ready // accumulating

	src migration
	tl  tail
	tgt staging
	// promoting: this node activated an epoch and its caller has not yet
	// completed the promotion (Ready.Promote, PromoteDone); the runtime
	// waits for it, and it is asked again every Retry ticks.
	promoting bool
	promoteIn int
	// contacted: by peer index, Connected asked that peer in this life.
	contacted []bool
	// signed: the newest epoch of an event this node signed (Signed).
	signed uint64
	files  []File // what the promotion makes this node's
	ask    asking
	ovr    override
	// lastFence is the fence this node last accepted, so that a duplicate
	// is answered the same way.
	lastFence Holder
	intBlock  []int // see ints
}

// New starts a machine from the durable record of a node that starts (or
// restarts after a crash). What it does first depends on the record:
// active asks every peer before running and steps down if one knows a newer
// holder; frozen before the point of no return aborts and does the same;
// frozen after it asks the target for its decision; staging refuses the
// staged epoch and empties the staging area. In every state it asks every
// peer what it knows, and takes no proposal and makes no decision until
// they have answered (or Startup ticks have passed): an answer that shows
// its registry is older than what it had decided makes it relearn the
// registry. The first Ready holds what to do.
func New(cfg Config, rec Record) (*Machine, error) {
	m := new(Machine)
	if err := m.Restart(cfg, rec); err != nil {
		return nil, err
	}
	return m, nil
}

// Restart is New on an existing machine: m starts again from rec, as a
// node does after a crash, reusing its memory (simulators start machines by
// the million). Earlier Readies of m are invalid afterwards. On error m is
// unchanged.
func (m *Machine) Restart(cfg Config, rec Record) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if err := rec.Validate(); err != nil {
		return fmt.Errorf("fencing: agent %s on %s: %w", cfg.Agent, cfg.Self, err)
	}
	m.reset(cfg)
	ds := m.rec.Decisions
	m.rec = rec
	m.rec.Decisions = append(ds, rec.Decisions...)
	switch rec.State {
	case Active:
		m.startupCheck()
	case Frozen:
		if rec.Committing {
			m.src = migration{on: true, committing: true}
			m.sendRequest(MsgQuery)
			m.src.retryIn = m.tm.Retry
			break
		}
		n, target := rec.Next, rec.Peer
		m.unfreeze()
		m.send(Message{Type: MsgAbort, To: target, Epoch: n})
		m.event(EvAbort, n, target, errRestartedFrozen)
		m.startupCheck()
	case Staging:
		// Refused once the peers have answered (finishAsking): until then
		// this node's registry may be older than what it decided.
		m.clearStaging()
	}
	if !m.ask.on {
		// Whatever it holds, a node that starts asks every peer what it
		// knows before it takes any proposal: an answer may show its
		// registry is older than what it had decided (signed.go).
		m.startupCheck()
	}
	return nil
}

// reset empties m for a new life, keeping its buffers.
func (m *Machine) reset(cfg Config) {
	rd, ask, ovr, have, ds := m.rd, m.ask, m.ovr, m.tgt.have, m.rec.Decisions
	clear(rd.Messages)
	clear(rd.Stage)
	clear(rd.Events)
	*m = Machine{cfg: cfg, tm: cfg.Timing.orDefault()}
	m.rd = Ready{Messages: rd.Messages[:0], Stage: rd.Stage[:0], Events: rd.Events[:0]}
	m.ask = asking{answered: ask.answered[:0], tells: ask.tells[:0], lost: ask.lost[:0]}
	m.ovr = override{answered: ovr.answered[:0]}
	m.tgt.have = have[:0]
	m.rec.Decisions = ds[:0]
}

// NewLost starts a machine on a node whose registry is lost (its file is
// gone while the capsule is there). It runs nothing, empties the staging
// area, answers unknown to every question and asks every peer until all of
// them have answered; then it knows the epochs again (EvRelearned) and, if
// the peers' facts say it still held the agent, takes it back (EvRestored).
func NewLost(cfg Config) (*Machine, error) {
	m := new(Machine)
	if err := m.RestartLost(cfg); err != nil {
		return nil, err
	}
	return m, nil
}

// RestartLost is NewLost on an existing machine, reusing its memory (see
// Restart).
func (m *Machine) RestartLost(cfg Config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	m.reset(cfg)
	m.lost = true
	m.rd.ClearStaging = true
	m.event(EvRegistryLost, 0, "", ErrRegistryLost)
	m.startAsking(askRelearn)
	return nil
}

// SetPeers replaces the machine's paired peers (a pairing changed). Only
// an idle machine takes it: one that is migrating, staging, relearning or
// checking at startup keeps the peers it started with and answers
// ErrBusy; so does a machine with a Ready not yet applied.
func (m *Machine) SetPeers(peers []string) error {
	cfg := m.cfg
	cfg.Peers = slices.Clone(peers)
	if err := cfg.check(); err != nil {
		return err
	}
	if !m.Idle() || m.lost || m.HasReady() {
		return fmt.Errorf("fencing: %s on %s: set peers while resolving: %w", m.cfg.Agent, m.cfg.Self, ErrBusy)
	}
	m.cfg = cfg
	m.contacted = m.contacted[:0] // the peers' indexes changed
	return nil
}

// Record returns the machine's current record (what the next Ready will
// persist, if it changed). Its Decisions must not be modified.
func (m *Machine) Record() Record { return m.rec }

// State returns the agent's state on this node, as in Record.
func (m *Machine) State() State { return m.rec.State }

// Running reports whether the agent runs here (once the pending Ready is
// applied).
func (m *Machine) Running() bool { return m.running }

// Lost reports whether the registry is lost and not yet relearnt.
func (m *Machine) Lost() bool { return m.lost }

// Idle reports whether no timer is armed: ticking an idle machine changes
// nothing, so a simulator may skip it.
func (m *Machine) Idle() bool {
	return !m.src.on && !m.tgt.on && !m.ask.on && !m.ovr.on && !m.tl.on && !m.promoting
}

// Deadline returns after how many Ticks the machine may act on its own
// (retry, time out) if no other input arrives, or 0 if no timer is armed.
// A simulator may skip the Ticks before it (they only count) and must not
// skip that one.
func (m *Machine) Deadline() int {
	d := 0
	at := func(x int) {
		x = max(x, 1)
		if d == 0 || x < d {
			d = x
		}
	}
	if s := &m.src; s.on {
		at(s.retryIn)
		if !s.committing {
			at(m.tm.Abort - s.silent)
		}
	}
	if t := &m.tgt; t.on && !t.preparing {
		at(m.tm.Staging - t.idle)
	}
	if a := &m.ask; a.on {
		at(a.retryIn)
		if a.purpose == askStartup && (a.count > 0 || !m.cfg.Strict) {
			at(m.tm.Startup - a.elapsed)
		}
	}
	if m.ovr.on {
		at(m.ovr.retryIn)
	}
	if m.tl.on {
		at(m.tm.Abort - m.tl.silent)
	}
	if m.promoting && !m.rd.Promote {
		at(m.promoteIn)
	}
	return d
}

// Resolving reports whether a frozen source is still working on its
// migration: proposing, transferring, or asking for the decision.
func (m *Machine) Resolving() bool { return m.src.on || m.ovr.on || m.tl.on }

// HasReady reports whether there is anything in Ready.
func (m *Machine) HasReady() bool {
	r := &m.rd
	return r.Stop || r.ClearStaging || len(r.Stage) > 0 || r.Persist || r.Promote || r.Prepare != 0 ||
		len(r.Messages) > 0 || r.Run || len(r.Events) > 0
}

// Ready returns what the caller must do now (see Ready). The record and the
// slices stay valid until Advance.
func (m *Machine) Ready() Ready {
	rd := m.rd
	if rd.Persist {
		rd.Record = m.rec
	}
	return rd
}

// Advance tells the machine that the last Ready was applied.
func (m *Machine) Advance() {
	msgs, stage, events := m.rd.Messages[:0], m.rd.Stage[:0], m.rd.Events[:0]
	clear(m.rd.Messages)
	clear(m.rd.Stage)
	clear(m.rd.Events)
	m.rd = Ready{Messages: msgs, Stage: stage, Events: events}
}

// Step handles one message from a peer. Refusals are answered with
// messages, not errors; the error is non-nil only for a message that is not
// for this machine (ErrWrongAgent, ErrUnknownPeer), which changes nothing.
func (m *Machine) Step(msg Message) error {
	if msg.Agent != m.cfg.Agent {
		return fmt.Errorf("fencing: %s on %s: %v from %s for agent %s: %w", m.cfg.Agent, m.cfg.Self, msg.Type, msg.From, msg.Agent, ErrWrongAgent)
	}
	if msg.To != m.cfg.Self || m.peerIndex(msg.From) < 0 {
		return fmt.Errorf("fencing: %s on %s: %v from %s to %s: %w", m.cfg.Agent, m.cfg.Self, msg.Type, msg.From, msg.To, ErrUnknownPeer)
	}
	switch msg.Type {
	case MsgPropose:
		m.onPropose(&msg)
	case MsgTransfer:
		m.onTransfer(&msg)
	case MsgPrepare:
		m.onPrepare(&msg)
	case MsgActivate:
		m.onActivate(&msg)
	case MsgQuery:
		m.onQuery(&msg)
	case MsgAbort:
		m.onAbort(&msg)
	case MsgFence:
		m.onFence(&msg)
	case MsgAsk:
		m.onAsk(&msg)
	case MsgAccept, MsgRefuse, MsgMissing, MsgPrepared, MsgDecision:
		m.onReply(&msg)
	case MsgTell:
		m.onTell(&msg)
	case MsgFenced:
		m.onFenced(&msg)
	default:
		return fmt.Errorf("fencing: %s on %s: unknown message type %d from %s", m.cfg.Agent, m.cfg.Self, msg.Type, msg.From)
	}
	return nil
}

// Tick advances the machine's clock by one tick: retries, timeouts.
func (m *Machine) Tick() {
	if m.src.on {
		m.tickSource()
	}
	if m.tgt.on {
		m.tickTarget()
	}
	if m.ask.on {
		m.tickAsking()
	}
	if m.ovr.on {
		m.tickOverride()
	}
	if m.tl.on {
		m.tickTail()
	}
	if m.promoting && !m.rd.Promote {
		if m.promoteIn--; m.promoteIn <= 0 {
			m.askPromote()
		}
	}
}

func (m *Machine) peerIndex(p string) int {
	for i, q := range m.cfg.Peers {
		if q == p {
			return i
		}
	}
	return -1
}

// send queues msg, filling in the sender and the agent.
func (m *Machine) send(msg Message) {
	msg.From, msg.Agent = m.cfg.Self, m.cfg.Agent
	m.rd.Messages = append(m.rd.Messages, msg)
}

func (m *Machine) event(k EventKind, epoch uint64, peer string, err error) {
	m.rd.Events = append(m.rd.Events, Event{Kind: k, Epoch: epoch, Peer: peer, Err: err})
}

func (m *Machine) save() { m.rd.Persist = true }

func (m *Machine) setRunning(on bool) {
	if on == m.running {
		return
	}
	m.running = on
	if on {
		m.rd.Run = true
	} else if m.rd.Run {
		m.rd.Run = false // started and stopped in one Ready: never start
	} else {
		m.rd.Stop = true
	}
}

func (m *Machine) clearStaging() {
	m.rd.ClearStaging = true
	clear(m.rd.Stage)
	m.rd.Stage = m.rd.Stage[:0]
	m.rd.Promote = false
}
