package custody

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/clock"
	"github.com/tern-dev/tern/internal/providerid"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/render"
	"github.com/tern-dev/tern/tool"
	"github.com/tern-dev/tern/turns"
)

// StagingDir holds, inside $TERN_HOME, what a node prepares for an agent
// migrating to it (the workspace, materialized), one folder per agent.
const StagingDir = "staging"

// WorkspacesDir holds the workspace of every agent the node runs, one
// folder per agent (turns.WorkspacesDir): the prepared workspace of a
// migration moves there when the agent is activated here.
const WorkspacesDir = turns.WorkspacesDir

// DefaultTick is how often the node ticks its fencing machines: the unit
// of their timeouts (Timing).
const DefaultTick = 100 * time.Millisecond

// warmLinger is how many ticks a workspace warmed for a migration that
// never proposed (the source gave up before freezing, or crashed) stays in
// the staging area: a retry soon after writes only what changed; after
// that, it is discarded. As long as a silent staging area lasts (a minute
// at DefaultTick).
var warmLinger = Timing.Staging

// Timing is the machines' timing in ticks of DefaultTick: retry after
// half a second, give up a silent target after 30 s (preparing a large
// workspace is silent), drop a staging area after a minute of silence,
// run after 3 s of waiting for peers at startup.
var Timing = fencing.Timing{Retry: 5, Abort: 300, Staging: 600, Startup: 30}

// Holders runs the fencing machine of every agent whose capsule the node
// holds (docs/MIGRATION.md): the node's side of migrations, the startup
// check, relearning after a lost registry. Machines are pure; holders
// does what their Ready asks, in its order, and sends their messages over
// /tern/migrate/1.0.0.
type Holders struct {
	n   Node
	rt  Runtime
	cfg Config
	log *slog.Logger
	ctx context.Context
	reg *fileRegistry
	inc uint64 // this start's incarnation

	mu sync.Mutex
	by map[string]*holder
}

// holder is one agent's machine on this node and what goes with it.
type holder struct {
	agent  string
	tick   time.Duration // the machine's tick
	strict bool          // Config.Strict

	// ticking: a tick of this machine runs (Run starts no other).
	ticking atomic.Bool

	mu sync.Mutex
	m  *fencing.Machine
	// failed: the machine could not start (its record could not be read or
	// made); it is tried again now and then (bootIn ticks).
	failed error
	bootIn int
	// stuck: the pending Ready could not be applied (its record could not
	// be written); it is applied again at every tick, and nothing runs or
	// is appended meanwhile.
	stuck error
	// promoteErr: the last promotion of an activation failed; the machine
	// asks for it again.
	promoteErr error
	// inflight counts the appends and tool calls under way (hold): a
	// freeze waits for them to end; idle is signalled when it drops to 0.
	inflight int
	idle     sync.Cond
	// runtime serialises what the runtime is told (stop, resume), so
	// that each acts on the machine's state as it is when it runs.
	runtime sync.Mutex
	mig     *migration    // the migration this node started, while it runs
	outcome chan<- string // told the outcome of the migration in progress
	resolve chan<- string // told the outcome of an operator's override in progress
	journal [32]byte      // the journal digest the last proposal named (target)

	// The workspace prepared in the staging area (target): kept up to date
	// from the warm pull on, so that prepare, inside the frozen window,
	// writes only what changed. ws is taken before mu.
	ws      sync.Mutex
	staged  *capsule.Snapshot // what staging/<agent>/workspace holds; nil: nothing known
	wsStale bool              // the machine emptied the staging area: discard the workspace before use
	warmAge int               // ticks since the workspace was last brought up to date
}

// migration is what a node that started a migration reports of it.
type migration struct {
	target  string
	epoch   uint64
	files   []fencing.File // what the proposal moves
	vector  []byte         // the canonical vector the journal's entry digests
	started time.Time
	frozen  time.Time // when appends stopped
	phases  []api.Phase
	mark    time.Time // when the current phase began
	bytes   int64
}

// enter ends the current phase and starts name, unless it is current.
func (mg *migration) enter(name string) {
	if n := len(mg.phases); n > 0 && mg.phases[n-1].Name == name {
		return
	}
	mg.end()
	mg.phases = append(mg.phases, api.Phase{Name: name})
	mg.mark = time.Now()
}

// end ends the current phase.
func (mg *migration) end() {
	if n := len(mg.phases); n > 0 {
		mg.phases[n-1].MS = time.Since(mg.mark).Milliseconds()
	}
}

func newIncarnation() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// Start opens the registry in cfg.Home and starts a machine for every
// capsule the node holds.
func Start(n Node, rt Runtime, cfg Config) (*Holders, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Wake == nil {
		cfg.Wake = func(f func()) { f() }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	ids, err := n.Agents()
	if err != nil {
		return nil, err
	}
	reg, err := openRegistry(cfg.Home, ids)
	if err != nil {
		return nil, err
	}
	hs := &Holders{n: n, rt: rt, cfg: cfg, log: cfg.Log, ctx: cfg.Context, reg: reg, inc: newIncarnation(), by: map[string]*holder{}}
	context.AfterFunc(hs.ctx, func() { // wake whoever waits for appends in flight
		for _, h := range hs.all() {
			h.mu.Lock()
			h.idle.Broadcast()
			h.mu.Unlock()
		}
	})
	reg.saving = cfg.Saving
	if cfg.Incarnation != 0 {
		hs.inc = cfg.Incarnation
	}
	for _, id := range ids {
		if _, err := hs.adopt(id); err != nil {
			hs.log.Warn("no fencing for a held capsule", "agent", id, "err", err)
		}
	}
	return hs, nil
}

// config is the machine config of agent on this node.
func (hs *Holders) config(h *holder) fencing.Config {
	return fencing.Config{Self: hs.self(), Agent: h.agent, Peers: hs.peerIDs(), Incarnation: hs.inc,
		Timing: Timing, Strict: hs.cfg.Strict, Have: func(f fencing.File) bool { return hs.have(h, f) }, Flaw: hs.cfg.Flaw}
}

// peerIDs is the paired peers' ids.
func (hs *Holders) peerIDs() []string {
	var peers []string
	for _, p := range hs.n.PairedPeers() {
		peers = append(peers, p.ID)
	}
	return peers
}

// PeerNames lists peers by name where they have one ("desktop (12D3…)").
func (hs *Holders) PeerNames(ids []string) string {
	names := map[string]string{}
	for _, p := range hs.n.PairedPeers() {
		names[p.ID] = p.Name
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id
		if names[id] != "" {
			out[i] = names[id] + " (" + id + ")"
		}
	}
	return strings.Join(out, ", ")
}

// Repeer gives every idle machine the paired peers as they are now (a
// pairing changed). A busy machine keeps its peers until its work ends;
// migrate tries again before it starts.
func (hs *Holders) Repeer() {
	peers := hs.peerIDs()
	hs.mu.Lock()
	all := make([]*holder, 0, len(hs.by))
	for _, h := range hs.by {
		all = append(all, h)
	}
	hs.mu.Unlock()
	for _, h := range all {
		h.mu.Lock()
		if h.failed == nil {
			if err := h.m.SetPeers(peers); err != nil && !errors.Is(err, fencing.ErrBusy) {
				hs.log.Warn("fencing: new peers refused", "agent", h.agent, "err", err)
			}
		}
		h.mu.Unlock()
	}
}

// adopt starts the machine of a capsule the node holds, making its record
// first if there is none: a capsule whose manifest names this node as its
// holder at epoch 0 (made here, never held under fencing) makes this node
// its holder at epoch 1, and the manifest says so; any other is a copy,
// held by the holder its manifest names. A registry lost while the node
// held the capsule makes the machine relearn from the peers.
func (hs *Holders) adopt(agent string) (*holder, error) {
	hs.mu.Lock()
	h, ok := hs.by[agent]
	if ok {
		hs.mu.Unlock()
		return h, nil
	}
	// Locked before anyone can find it: no one uses its machine before
	// it is started.
	h = &holder{agent: agent, m: new(fencing.Machine), tick: hs.cfg.Tick, strict: hs.cfg.Strict}
	h.idle.L = &h.mu
	h.mu.Lock()
	defer h.mu.Unlock()
	hs.by[agent] = h
	hs.mu.Unlock()
	if err := hs.boot(h); err != nil {
		h.failed, h.bootIn = err, bootRetry
		return h, err
	}
	return h, nil
}

// bootRetry is how many ticks pass between two tries to start a machine
// that could not start (a second at DefaultTick).
const bootRetry = 10

// boot starts h's machine from its record in the registry, or from its
// first record, and applies what it asks. h.mu held.
func (hs *Holders) boot(h *holder) error {
	agent := h.agent
	rec, found, err := hs.reg.Load(agent)
	switch {
	case errors.Is(err, fencing.ErrRegistryLost):
		hs.log.Warn("the holder registry was lost: relearning the agent's epochs from every peer; it runs nothing meanwhile", "agent", agent)
		err = h.m.RestartLost(hs.config(h))
	case err != nil:
	case found:
		err = h.m.Restart(hs.config(h), rec)
	default:
		err = hs.first(h)
	}
	if err != nil {
		return err
	}
	unpromoted := hs.unpromoted(h)
	if unpromoted {
		h.m.Unpromoted()
	}
	if e, err := hs.signedEpoch(agent); err == nil {
		h.m.Signed(e) // a registry older than the journal relearns (fencing/signed.go)
	}
	if h.m.State() != fencing.Staging && !unpromoted {
		// What an earlier run warmed or staged for a migration that
		// never came to be.
		os.RemoveAll(filepath.Join(hs.cfg.Home, StagingDir, agent))
	}
	hs.apply(h)
	return nil
}

// unpromoted reports whether the registry says this node activated the
// agent at an epoch its capsule's manifest does not name yet: the node
// stopped between the activation and the end of its promotion. h.mu held.
func (hs *Holders) unpromoted(h *holder) bool {
	rec := h.m.Record()
	if rec.State != fencing.Active || h.m.Lost() {
		return false
	}
	var mh capsule.Holder
	if err := hs.n.With(h.agent, func(d *capsule.Dir) error { mh = d.Manifest().Holder; return nil }); err != nil {
		return false
	}
	return mh.Peer != hs.self() || mh.Epoch < rec.Epoch
}

// first makes the record of an agent this node has no record of. h.mu held.
func (hs *Holders) first(h *holder) error {
	var mh capsule.Holder
	if err := hs.n.With(h.agent, func(d *capsule.Dir) error { mh = d.Manifest().Holder; return nil }); err != nil {
		return err
	}
	self := hs.self()
	rec := fencing.Joined(fencing.Holder{Peer: mh.Peer, Epoch: mh.Epoch})
	if mh.Peer == self && mh.Epoch <= 1 && !hs.n.Foreign(h.agent) {
		rec = fencing.Created(self) // a foreign copy is a copy, whatever its manifest says
	}
	if err := hs.reg.Save(h.agent, rec); err != nil {
		return err
	}
	if rec.State == fencing.Active && mh.Epoch == 0 {
		if err := hs.n.With(h.agent, func(d *capsule.Dir) error {
			return d.SetHolder(capsule.Holder{Peer: self, Epoch: 1})
		}); err != nil {
			return err
		}
		hs.log.Info("this node holds the agent at epoch 1", "agent", h.agent)
	}
	return h.m.Restart(hs.config(h), rec)
}

// get returns the holder of an agent the node holds.
func (hs *Holders) get(agent string) (*holder, error) {
	hs.mu.Lock()
	h, ok := hs.by[agent]
	hs.mu.Unlock()
	if ok {
		return h, nil
	}
	if !hs.n.Holds(agent) {
		return nil, fmt.Errorf("agent %s: %w", agent, api.ErrUnknownAgent)
	}
	return hs.adopt(agent)
}

// step hands msg to the agent's machine and carries out what it asks.
func (hs *Holders) step(h *holder, msg fencing.Message) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed != nil {
		return h.failed
	}
	if msg.Type == fencing.MsgActivate {
		// The old holder's word goes to disk before the machine may
		// activate: the holder.activated event carries it (custody).
		if err := hs.keepHandover(h.agent, msg); err != nil {
			return err
		}
	}
	err := h.m.Step(msg)
	if from, derr := peer.Decode(msg.From); errors.Is(err, fencing.ErrUnknownPeer) && derr == nil && hs.n.Paired(from) {
		// Paired since the machine took its peers: it takes them now, if
		// it is idle (a busy machine keeps them until its work ends).
		if serr := h.m.SetPeers(hs.peerIDs()); serr == nil {
			err = h.m.Step(msg)
		}
	}
	if err != nil {
		return err
	}
	hs.apply(h)
	return nil
}

// Connected tells every machine that p is reachable again: those that
// hold their agent active ask it what it knows, and step down if it knows
// a newer activation (fencing.Machine.Connected).
func (hs *Holders) Connected(p peer.ID) {
	if !hs.n.Paired(p) {
		return
	}
	for _, h := range hs.all() {
		h.mu.Lock()
		if h.failed == nil {
			h.m.Connected(p.String())
			hs.apply(h)
		}
		h.mu.Unlock()
	}
}

// all returns every holder, in the order of their agents.
func (hs *Holders) all() []*holder {
	hs.mu.Lock()
	all := make([]*holder, 0, len(hs.by))
	for _, h := range hs.by {
		all = append(all, h)
	}
	hs.mu.Unlock()
	slices.SortFunc(all, func(a, b *holder) int { return strings.Compare(a.agent, b.agent) })
	return all
}

// Tick advances every machine with a timer armed by one tick, in the
// order of their agents, one after another: a harness's tick, the same
// every run.
func (hs *Holders) Tick() {
	for _, h := range hs.all() {
		hs.tick(h)
	}
}

// tick advances h's machine by one tick, if a timer of it is armed, or
// tries again to start a machine that could not start.
func (hs *Holders) tick(h *holder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed != nil {
		if h.bootIn--; h.bootIn <= 0 {
			if err := hs.boot(h); err != nil {
				if err.Error() != h.failed.Error() {
					hs.log.Error("fencing cannot start for an agent; retrying", "agent", h.agent, "err", err)
				}
				h.failed, h.bootIn = err, bootRetry
			} else {
				hs.log.Info("fencing started for an agent after all", "agent", h.agent)
				h.failed = nil
			}
		}
	} else if !h.m.Idle() || h.m.HasReady() {
		h.m.Tick()
		hs.apply(h)
	}
	if h.staged != nil && !h.wsStale && h.m.State() != fencing.Staging {
		if h.warmAge++; h.warmAge > warmLinger {
			h.warmAge = 0
			h.wsStale = true
			hs.cfg.Spawn(func() { hs.freshWorkspace(h) })
		}
	}
}

// Run ticks the machines until the node closes, each agent's on its own:
// one whose tick is slow (a registry write on a slow disk, a promotion
// copying a workspace) holds up no other agent's, and lets the ticks that
// come while its last one runs go by.
func (hs *Holders) Run(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-hs.ctx.Done():
			return
		case <-t.C:
		}
		for _, h := range hs.all() {
			if !h.ticking.CompareAndSwap(false, true) {
				continue // its last tick still runs
			}
			if !hs.cfg.Spawn(func() { defer h.ticking.Store(false); hs.tick(h) }) {
				h.ticking.Store(false)
			}
		}
	}
}

// apply carries out the machine's Ready in its order (fencing.Ready) until
// it has none: nothing is sent, promoted or run before the record is
// durable. Messages go out in the background. A record that cannot be
// written leaves the Ready pending (stuck): the next tick applies it again,
// and the node carries on once the disk takes it. h.mu held.
func (hs *Holders) apply(h *holder) {
	for h.m.HasReady() {
		rd := h.m.Ready()
		if rd.Stop && !hs.cfg.Off {
			hs.cfg.Spawn(func() { hs.stopWhenIdle(h) }) // its turns continue where it runs next
		}
		staging := filepath.Join(hs.cfg.Home, StagingDir, h.agent)
		if rd.ClearStaging {
			// The blobs go now; the workspace, which prepare may be
			// writing, goes under its own lock.
			os.RemoveAll(filepath.Join(staging, "blobs"))
			h.wsStale = true
			hs.cfg.Spawn(func() { hs.freshWorkspace(h) })
		}
		for _, c := range rd.Stage {
			hs.stage(staging, c)
		}
		if rd.Persist {
			if err := hs.reg.Save(h.agent, rd.Record); err != nil {
				// Nothing that depends on the record may happen; the
				// Ready stays pending, and the next tick applies it again.
				if h.stuck == nil || h.stuck.Error() != err.Error() {
					hs.log.Error("fencing waits: the holder registry could not be written; nothing runs or is appended for the agent until it can", "agent", h.agent, "err", err)
				}
				h.stuck = err
				return
			}
			if h.stuck != nil {
				hs.log.Info("fencing goes on: the holder registry was written", "agent", h.agent)
				h.stuck = nil
			}
		}
		var promoted error
		if rd.Promote {
			promoted = hs.promote(h, staging, h.m.Record())
			if promoted != nil && (h.promoteErr == nil || h.promoteErr.Error() != promoted.Error()) {
				hs.log.Error("the activation here is not complete: the agent runs once it is; retrying", "agent", h.agent, "err", promoted)
			}
			h.promoteErr = promoted
		}
		for _, msg := range rd.Messages {
			hs.send(hs.outgoing(h, msg))
		}
		if rd.Run {
			if !hs.cfg.Off {
				hs.cfg.Spawn(func() { hs.resumeIfRuns(h) }) // the turns it left running continue here
			}
			if hs.cfg.Runs != nil {
				saved, _, _ := hs.reg.Load(h.agent)
				hs.cfg.Runs(h.agent, saved)
			}
		}
		for _, ev := range rd.Events {
			hs.event(h, ev)
		}
		prepare := rd.Prepare
		h.m.Advance()
		if rd.Promote {
			h.m.PromoteDone(promoted)
		}
		if prepare != 0 {
			hs.cfg.Spawn(func() { hs.prepare(h, prepare) })
		}
	}
}

// stopWhenIdle stops the agent's turns on this node once the appends and
// tool calls in flight have ended (a freeze never splits a tool call from
// its outcome), unless it runs here again by then.
func (hs *Holders) stopWhenIdle(h *holder) {
	h.runtime.Lock()
	defer h.runtime.Unlock()
	h.mu.Lock()
	for h.inflight > 0 && !h.runs() && hs.ctx.Err() == nil {
		h.idle.Wait()
	}
	stop := !h.runs()
	h.mu.Unlock()
	if stop {
		hs.rt.StopAgent(h.agent)
	}
}

// resumeIfRuns resumes the agent's running turns if it runs here.
func (hs *Holders) resumeIfRuns(h *holder) {
	h.runtime.Lock()
	defer h.runtime.Unlock()
	h.mu.Lock()
	runs := h.runs()
	h.mu.Unlock()
	if runs {
		hs.rt.Resume(h.agent)
	}
}

// checking says, during the startup check, what the node waits for before
// it runs the agent, and how long it has; "" otherwise. h.mu held.
func (h *holder) checking() string {
	ticks, ok := h.m.Checking()
	if !ok {
		return ""
	}
	note := fmt.Sprintf("checking with its paired peers that no other node took the agent over before it runs it (for %v so far)", (time.Duration(ticks) * h.tick).Round(100*time.Millisecond))
	if h.strict {
		note += "; with --strict it runs only once one of them answers"
	}
	return note
}

// runs reports whether the agent runs here now: its machine says so and
// nothing it asked for is pending. h.mu held.
func (h *holder) runs() bool { return h.m.Running() && h.stuck == nil && !h.m.HasReady() }

// stage writes a transferred file into the staging area: a blob's bytes,
// to be adopted at promotion. (The journal's entry is a digest: its events
// came through sync, and prepare checks they are all here.)
func (hs *Holders) stage(staging string, c fencing.Chunk) {
	if c.File.Name == capsule.JournalFile {
		return
	}
	dir := filepath.Join(staging, "blobs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		hs.log.Warn("staging", "err", err)
		return
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, hex.EncodeToString(c.File.Sum[:])), c.Data, 0o600); err != nil {
		hs.log.Warn("staging", "err", err)
	}
}

// promote makes a prepared migration this node's: staged blobs join the
// capsule, the prepared workspace becomes the agent's, and the manifest
// names this node as the holder.
func (hs *Holders) promote(h *holder, staging string, rec fencing.Record) error {
	blobs, _ := os.ReadDir(filepath.Join(staging, "blobs"))
	for _, b := range blobs {
		if err := hs.n.With(h.agent, func(d *capsule.Dir) error {
			return d.AdoptBlob(b.Name(), filepath.Join(staging, "blobs", b.Name()))
		}); err != nil {
			return err
		}
	}
	ws := filepath.Join(hs.cfg.Home, WorkspacesDir, h.agent)
	if _, err := os.Stat(filepath.Join(staging, "workspace")); err == nil {
		os.MkdirAll(filepath.Dir(ws), 0o700)
		if _, err := os.Stat(ws); err == nil {
			// An old workspace goes in the background: deleting gigabytes
			// takes time the frozen window need not spend.
			old := ws + ".old-" + fmt.Sprint(time.Now().UnixNano())
			if os.Rename(ws, old) == nil {
				hs.cfg.Spawn(func() { os.RemoveAll(old) })
			}
		}
		if err := os.Rename(filepath.Join(staging, "workspace"), ws); err != nil {
			return err
		}
	}
	h.staged = nil
	os.RemoveAll(staging)
	// The event first, the manifest last: a promotion cut between the two
	// is taken up again at the next start (the manifest lags the record),
	// and the event is written once.
	if err := hs.markActivation(h, rec); err != nil {
		return err
	}
	self := hs.self()
	return hs.n.With(h.agent, func(d *capsule.Dir) error {
		return d.SetHolder(capsule.Holder{Peer: self, Epoch: rec.Epoch})
	})
}

// secretsResolve checks that every secret the agent needs (its
// environment's, its model key's and its MCP servers') resolves on this
// machine, and that each stdio MCP server's command is here, so that a
// migration aborts before the point of no return rather than moving an
// agent that cannot run here. A node without a secret store (tests, the
// simulator) checks nothing: the names were checked when the spec was.
func (hs *Holders) secretsResolve(env capsule.EnvSpec, agent capsule.Agent) error {
	// Each stdio MCP server's command must run here: the agent would
	// otherwise lose its tools on arrival.
	for _, name := range slices.Sorted(maps.Keys(agent.MCPServers)) {
		if cmd := agent.MCPServers[name].Command; cmd != "" {
			if _, err := exec.LookPath(cmd); err != nil {
				return fmt.Errorf("the MCP server %s needs the command %q, which %s: install it here, then migrate again", name, cmd, tool.MissingCommand(cmd))
			}
		}
	}
	store := hs.cfg.Secrets
	if store == nil {
		return nil
	}
	names := slices.Clone(env.Secrets)
	if agent.KeySecret != "" {
		names = append(names, agent.KeySecret)
	}
	for _, name := range slices.Sorted(maps.Keys(agent.MCPServers)) {
		names = append(names, agent.MCPServers[name].Secrets...)
	}
	for _, name := range names {
		if _, err := store.Get(name); err != nil {
			return fmt.Errorf("the secret %s does not resolve on this machine (%v): set it here with tern secret set %s, then migrate again", name, err, name)
		}
	}
	return nil
}

// markActivation appends the holder.activated event of an epoch this node
// activated: it says where the old holder's epoch ends (its chain's head
// here, which prepare checked is the head it froze at), so that every
// reader sets aside what the old holder writes under that epoch from now
// on, and carries the old holder's signed handover, which proves this
// node's custody of the epoch (journal.Custody). h.mu held.
func (hs *Holders) markActivation(h *holder, rec fencing.Record) error {
	self := hs.self()
	written := false
	if err := hs.n.With(h.agent, func(d *capsule.Dir) error {
		evs, err := d.Events()
		written = slices.ContainsFunc(evs, func(e *journal.Event) bool {
			return e.Type == journal.ActivatedType && e.Machine == self && e.Epoch == rec.Epoch
		})
		return err
	}); err != nil {
		return err
	}
	if written {
		return nil // a promotion taken up again after a restart
	}
	ho, err := hs.keptHandover(h.agent, rec.Epoch)
	if err != nil {
		// Lost with the home (restored from a backup between activate
		// and here): without it no reader would take the event.
		hs.log.Warn("fencing: the old holder's handover is not here; the activation is not recorded in the journal, and the old holder's stale writes are not set aside", "agent", h.agent, "epoch", rec.Epoch, "err", err)
		return nil
	}
	source, from := ho.From.Peer, ho.From.Epoch
	v, err := hs.n.Vector(h.agent)
	if err != nil {
		return err
	}
	body, err := json.Marshal(journal.ActivatedBody{
		Holder:   journal.Bound{Peer: self, Epoch: rec.Epoch},
		From:     journal.Bound{Peer: source, Epoch: from, Seq: v[source].Seq, ID: v[source].ID},
		Handover: &ho,
	})
	if err != nil {
		return err
	}
	if _, err := hs.n.AppendAt(context.Background(), h.agent, rec.Epoch, []journal.Draft{{Type: journal.ActivatedType, Body: body}}); err != nil {
		return err
	}
	os.Remove(hs.handoverPath(h.agent))
	return nil
}

// targetIsMember makes a paired target a member of the agent if it is not
// one yet (Node.tendMembers), and refuses a target that cannot be one: a
// machine that is not a member could not write the agent's history there.
func (hs *Holders) targetIsMember(ctx context.Context, agent string, target peer.ID) error {
	hs.n.TendMembers(ctx, agent, target)
	m, err := hs.n.Members(agent)
	if err != nil {
		return err
	}
	if m.Has(target.String()) {
		return nil
	}
	for _, x := range m.List() {
		if x.Peer == target.String() && x.Removed {
			return fmt.Errorf("migrate %s: %s was removed from the agent's members, and a removed machine never holds it again: %w", agent, hs.PeerNames([]string{target.String()}), journal.ErrNotMember)
		}
	}
	return fmt.Errorf("migrate %s: %s is not a member of the agent, and this node could not make it one (is the agent shared with it? tern member add %s %s): %w", agent, hs.PeerNames([]string{target.String()}), agent, target, journal.ErrNotMember)
}

// HandoversDir holds, inside $TERN_HOME, the old holder's signed handover
// of each agent this node was asked to activate, until its holder.activated
// event carries it.
const HandoversDir = "handovers"

func (hs *Holders) handoverPath(agent string) string {
	return filepath.Join(hs.cfg.Home, HandoversDir, agent+".json")
}

// handover signs, as this node holding the agent, the handover an
// activate carries: from the epoch it holds to the target at the epoch
// proposed. h.mu held.
func (hs *Holders) handover(h *holder, msg fencing.Message) []byte {
	ho, err := journal.SignHandover(hs.cfg.Signer, h.agent, h.m.Record().Epoch, msg.To, msg.Epoch)
	if err != nil {
		hs.log.Error("fencing: could not sign the handover", "agent", h.agent, "err", err)
		return nil
	}
	data, _ := json.Marshal(ho)
	return data
}

// keepHandover checks the handover an activate carries (signed by its
// sender for this machine at the epoch activated) and keeps it on disk.
// An activate without a valid one is refused: the journal would refuse
// the activation it leads to.
func (hs *Holders) keepHandover(agent string, msg fencing.Message) error {
	var ho journal.Handover
	if err := json.Unmarshal(msg.Handover, &ho); err != nil {
		return fmt.Errorf("activate %s at epoch %d from %s: no handover: %w", agent, msg.Epoch, msg.From, journal.ErrNoCustody)
	}
	if ho.From.Peer != msg.From || ho.To.Peer != hs.self() || ho.To.Epoch != msg.Epoch {
		return fmt.Errorf("activate %s at epoch %d from %s: the handover is from %s to %s at %d: %w", agent, msg.Epoch, msg.From, ho.From.Peer, ho.To.Peer, ho.To.Epoch, journal.ErrNoCustody)
	}
	if err := ho.Check(agent); err != nil {
		return fmt.Errorf("activate %s at epoch %d from %s: %w", agent, msg.Epoch, msg.From, err)
	}
	path := hs.handoverPath(agent)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, msg.Handover, 0o600)
}

// keptHandover reads the handover kept for agent's activation at epoch.
func (hs *Holders) keptHandover(agent string, epoch uint64) (journal.Handover, error) {
	var ho journal.Handover
	data, err := os.ReadFile(hs.handoverPath(agent))
	if err != nil {
		return ho, err
	}
	if err := json.Unmarshal(data, &ho); err != nil {
		return ho, fmt.Errorf("%s: %w", hs.handoverPath(agent), err)
	}
	if ho.To.Epoch != epoch {
		return ho, fmt.Errorf("%s is for epoch %d, not %d", hs.handoverPath(agent), ho.To.Epoch, epoch)
	}
	return ho, nil
}

// send sends a machine's message to its peer in the background; a lost
// message is the machine's to retry.
func (hs *Holders) send(msg fencing.Message) {
	to, err := peer.Decode(msg.To)
	if err != nil {
		return
	}
	if lose := hs.cfg.LoseMigrate; lose != nil && lose(msg) {
		return
	}
	delays := []time.Duration{0}
	if hs.cfg.MigrateFate != nil {
		delays = hs.cfg.MigrateFate(msg)
	}
	for _, delay := range delays {
		hs.cfg.Spawn(func() {
			if delay > 0 && !clock.Sleep(hs.ctx, hs.cfg.Clock, delay) {
				return
			}
			ctx, cancel := clock.WithTimeout(hs.cfg.Clock, hs.ctx, 10*time.Second)
			defer cancel()
			if err := protocol.SendMigrate(ctx, hs.cfg.Host, to, msg); err != nil {
				hs.log.Debug("migrate message not delivered", "to", msg.To, "type", msg.Type, "err", err)
			}
		})
	}
}

// outgoing fills a transfer's bytes, which the machine leaves to its
// caller, and follows the phases of a migration this node started.
// h.mu held.
func (hs *Holders) outgoing(h *holder, msg fencing.Message) fencing.Message {
	if msg.Type == fencing.MsgActivate {
		msg.Handover = hs.handover(h, msg)
	}
	mg := h.mig
	if mg != nil && msg.Type == fencing.MsgPropose {
		mg.epoch = msg.Epoch // proposed again under a newer one after a stale refusal
	}
	if mg == nil || msg.Epoch != mg.epoch {
		return msg
	}
	switch msg.Type {
	case fencing.MsgTransfer:
		msg.Data = hs.fileBytes(h.agent, mg, msg.Index)
	case fencing.MsgPrepare:
		mg.enter("prepare")
	case fencing.MsgActivate:
		mg.enter("activate")
	}
	return msg
}

// fileBytes is what a transfer of file i of mg's proposal carries: for
// the journal, the vector its digest was made of (the events themselves
// came by sync; the target's prepare checks they are all there), for a
// blob its bytes, if it fits a frame (a larger one was to come by a blob
// fetch; without it the target refuses the epoch and the migration
// aborts).
func (hs *Holders) fileBytes(agent string, mg *migration, i int) []byte {
	if i < 0 || i >= len(mg.files) {
		return nil
	}
	f := mg.files[i]
	if f.Name == capsule.JournalFile {
		return mg.vector
	}
	if f.Size > protocol.MaxMigrateFrame/2 {
		return nil
	}
	var data []byte
	hs.n.With(agent, func(d *capsule.Dir) error {
		data, _ = os.ReadFile(filepath.Join(d.Path, filepath.FromSlash(f.Name)))
		return nil
	})
	return data
}

// event logs what happened and ends a migration this node started.
func (hs *Holders) event(h *holder, ev fencing.Event) {
	log := hs.log.Info
	if ev.Err != nil {
		log = hs.log.Warn
	}
	log("fencing: "+ev.Kind.String(), "agent", h.agent, "epoch", ev.Epoch, "peer", ev.Peer, "err", ev.Err)
	if hs.cfg.Event != nil {
		hs.cfg.Event(h.agent, ev)
	}
	if ev.Kind == fencing.EvOverride || ev.Kind == fencing.EvOverrideRefused {
		hs.log.Warn("fencing: an operator's override", "agent", h.agent, "outcome", ev.Kind.String(), "epoch", ev.Epoch, "what", ev.Err)
		if resolve := h.resolve; resolve != nil {
			msg := ev.Kind.String()
			if ev.Err != nil {
				msg = ev.Err.Error()
			}
			hs.cfg.Wake(func() { resolve <- msg })
			h.resolve = nil
		}
	}
	var outcome string
	switch ev.Kind {
	case fencing.EvCommit, fencing.EvRetireByQuery:
		outcome = "committed"
	case fencing.EvAbort, fencing.EvResumeByQuery:
		outcome = "aborted"
		if ev.Err != nil {
			outcome = "aborted: " + ev.Err.Error()
		}
	default:
		return
	}
	if told := h.outcome; told != nil {
		hs.cfg.Wake(func() { told <- outcome })
		h.outcome = nil
	}
}

// have reports whether this node holds f of a proposal (fencing
// Config.Have): the journal's entry is the digest of the source's vector,
// which ours must equal; a blob must be held.
func (hs *Holders) have(h *holder, f fencing.File) bool {
	if f.Name == capsule.JournalFile {
		h.journal = f.Sum // h.mu is held: Have runs inside Step
		d, err := hs.journalDigest(h.agent)
		return err == nil && d == f.Sum
	}
	hexSum := hex.EncodeToString(f.Sum[:])
	return f.Name == capsule.BlobPath(hexSum) && hs.n.HoldsBlob(h.agent, hexSum)
}

// journalDigest is the sha256 of the canonical JSON of the agent's
// version vector: equal on two nodes exactly when they hold the same
// events.
func (hs *Holders) journalDigest(agent string) ([32]byte, error) {
	b, err := hs.vectorBytes(agent)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

func (hs *Holders) vectorBytes(agent string) ([]byte, error) {
	v, err := hs.n.Vector(agent)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return journal.Canonical(b)
}

// files is what a proposal of agent moves: the journal, as the digest of
// its vector (returned too), and every blob the capsule holds.
func (hs *Holders) files(agent string) ([]fencing.File, []byte, error) {
	vb, err := hs.vectorBytes(agent)
	if err != nil {
		return nil, nil, err
	}
	files := []fencing.File{{Name: capsule.JournalFile, Sum: sha256.Sum256(vb), Size: int64(len(vb))}}
	err = hs.n.With(agent, func(d *capsule.Dir) error {
		for _, hexSum := range d.HeldBlobs() {
			var f fencing.File
			b, _ := hex.DecodeString(hexSum)
			copy(f.Sum[:], b)
			f.Name, f.Size = capsule.BlobPath(hexSum), d.BlobSize(hexSum)
			files = append(files, f)
		}
		return nil
	})
	return files, vb, err
}

// prepare readies this node to run an agent migrating to it at epoch:
// every event the source holds is here (the digest of the vector matches
// its proposal), the workspace materializes into the staging area with
// every blob hash-checked, the environment spec parses (every secret is a
// declared name; no keyring resolves values yet), and the journal renders
// for the agent's provider. It reports to the machine.
func (hs *Holders) prepare(h *holder, epoch uint64) {
	err := hs.prepareFiles(h)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		hs.log.Warn("could not prepare an agent migrating here", "agent", h.agent, "epoch", epoch, "err", err)
	}
	h.m.PrepareDone(epoch, err)
	hs.apply(h)
}

func (hs *Holders) prepareFiles(h *holder) error {
	h.mu.Lock()
	want := h.journal
	h.mu.Unlock()
	if got, err := hs.journalDigest(h.agent); err != nil {
		return err
	} else if got != want {
		return errors.New("this node does not hold the events the source holds")
	}
	if err := hs.warm(h); err != nil {
		return err
	}
	return hs.n.With(h.agent, func(d *capsule.Dir) error {
		env, err := d.Environment()
		if err != nil {
			return err
		}
		agent, err := d.Agent()
		if err != nil {
			return err
		}
		if err := hs.secretsResolve(env, agent); err != nil {
			return err
		}
		p := providerid.ID(agent.Provider)
		if !p.Wire() {
			return nil // the built-in offline model takes the journal as it is
		}
		events, err := d.Events()
		if err != nil {
			return err
		}
		view, _ := journal.Readable(events)
		journal.Sort(view)
		_, err = render.Render(render.Request{Events: view, Agent: agent, Target: render.Target{Provider: p, Model: agent.Model}})
		return err
	})
}

// warm brings the workspace in the staging area to the capsule's current
// snapshot, writing only what changed since it was last brought up to date
// (everything, the first time): the warm pull calls it while the agent
// still runs on the source, and prepare again inside the frozen window.
func (hs *Holders) warm(h *holder) error {
	h.ws.Lock()
	defer h.ws.Unlock()
	hs.discardStale(h)
	h.mu.Lock()
	have := h.staged
	h.staged = nil // until the update succeeds
	h.mu.Unlock()
	staging := filepath.Join(hs.cfg.Home, StagingDir, h.agent)
	ws := filepath.Join(staging, "workspace")
	if have == nil {
		os.RemoveAll(ws)
		if err := os.MkdirAll(staging, 0o700); err != nil {
			return err
		}
	}
	var snap *capsule.Snapshot
	err := hs.n.With(h.agent, func(d *capsule.Dir) error {
		var err error
		snap, err = d.UpdateWorkspace(ws, have)
		return err
	})
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.staged, h.warmAge = snap, 0
	h.mu.Unlock()
	return nil
}

// freshWorkspace discards the staging area's workspace if the machine
// emptied the staging area.
func (hs *Holders) freshWorkspace(h *holder) {
	h.ws.Lock()
	defer h.ws.Unlock()
	hs.discardStale(h)
}

// discardStale removes the workspace of a staging area the machine
// emptied. h.ws held.
func (hs *Holders) discardStale(h *holder) {
	h.mu.Lock()
	stale := h.wsStale
	h.wsStale = false
	if stale {
		h.staged = nil
	}
	h.mu.Unlock()
	if stale {
		staging := filepath.Join(hs.cfg.Home, StagingDir, h.agent)
		os.RemoveAll(filepath.Join(staging, "workspace"))
		os.Remove(staging) // unless blobs of a newer proposal are there
	}
}

// AppendEpoch returns the epoch appends to agent are written under here
// (the held epoch while the agent runs here, 0 for an offline edit: the
// machine's Appends) and a release to call when the append is done; a
// freeze waits for every append in flight to be released. It fails with
// ErrFrozen while a migration has stopped the agent, and says why while
// the holder registry cannot be written.
func (hs *Holders) AppendEpoch(agent string) (uint64, func(), error) {
	h, err := hs.get(agent)
	if err != nil {
		return 0, nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stuck != nil {
		return 0, nil, fmt.Errorf("agent %s: nothing is written until the holder registry can be: %w", agent, h.stuck)
	}
	epoch, err := h.m.Appends()
	if errors.Is(err, fencing.ErrFrozen) {
		return 0, nil, fmt.Errorf("agent %s: %w; append again when it has ended (tern holder %s)", agent, err, agent)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("agent %s: %w; append again in a moment (tern holder %s)", agent, err, agent)
	}
	h.inflight++
	released := false
	return epoch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !released {
			released = true
			if h.inflight--; h.inflight == 0 {
				hs.cfg.Wake(h.idle.Broadcast)
			}
		}
	}, nil
}

// signedEpoch is the newest epoch of an event this machine signed in the
// agent's journal: an epoch it held (fencing.Machine.Signed).
func (hs *Holders) signedEpoch(agent string) (uint64, error) {
	self := hs.self()
	var newest uint64
	err := hs.n.With(agent, func(d *capsule.Dir) error {
		evs, err := d.Events()
		for _, e := range evs {
			if e.Machine == self {
				newest = max(newest, e.Epoch)
			}
		}
		return err
	})
	return newest, err
}

// Signed tells the agent's machine the newest epoch this machine signed
// under, once an exchange or an import has brought events: a home
// restored from a backup gets its own newer events back from its peers,
// and its registry, which lacks them, is relearnt.
func (hs *Holders) Signed(agent string) {
	e, err := hs.signedEpoch(agent)
	if err != nil {
		return
	}
	h, err := hs.get(agent)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed == nil {
		h.m.Signed(e)
		hs.apply(h)
	}
}

// NewestEpoch is the newest epoch of any event of agent this node holds:
// what the journal knows of the epochs when the registry has forgotten.
func (hs *Holders) NewestEpoch(agent string) (uint64, error) {
	var newest uint64
	err := hs.n.With(agent, func(d *capsule.Dir) error {
		evs, err := d.Events()
		for _, e := range evs {
			newest = max(newest, e.Epoch)
		}
		return err
	})
	return newest, err
}

// State says where agent stands on this node.
func (hs *Holders) State(agent string) (protocol.HolderState, error) {
	h, err := hs.get(agent)
	if err != nil {
		return protocol.HolderState{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rec := h.m.Record()
	st := protocol.HolderState{Epoch: rec.Epoch, Highest: rec.Highest, Holder: rec.Holder}
	switch {
	case h.failed != nil:
		st.State, st.Note = "unknown", h.failed.Error()
	case h.m.Lost():
		st.State, st.Note = "unknown", hs.relearningNote(h)
	case rec.State == fencing.None:
		st.State = "copy"
	default:
		st.State = rec.State.String()
	}
	switch {
	case h.failed != nil || h.m.Lost():
	case h.stuck != nil:
		st.Note = fmt.Sprintf("the holder registry cannot be written, so the agent neither runs nor is written to here until it can: %v", h.stuck)
	case h.m.Promoting():
		st.Note = "activated here; the agent runs once its activation is complete"
		if h.promoteErr != nil {
			st.Note += fmt.Sprintf(" (the last try failed: %v; the node retries)", h.promoteErr)
		}
	case h.m.Tailing():
		st.State, st.Note = "frozen", "frozen for the last events of a migration; nothing is proposed yet"
	case h.checking() != "":
		st.Note = h.checking()
	case rec.State == fencing.Retired && rec.Holder.Peer != "" && rec.Holder.Peer != hs.self():
		st.Note = fmt.Sprintf("superseded: %s holds it at epoch %d", hs.PeerNames([]string{rec.Holder.Peer}), rec.Holder.Epoch)
	}
	return st, nil
}

// relearningNote says what a node that lost its holder registry waits for,
// and what an operator can do if it waits for a peer that lost its own
// too. h.mu held.
func (hs *Holders) relearningNote(h *holder) string {
	silent, lost := h.m.Relearning()
	var b strings.Builder
	b.WriteString("the holder registry was lost here; relearning from every paired peer, running nothing meanwhile")
	if len(silent) > 0 {
		fmt.Fprintf(&b, "; no answer yet from %s", hs.PeerNames(silent))
	}
	if len(lost) > 0 {
		fmt.Fprintf(&b, "; %s lost its registry too, so neither can relearn from the other while no machine holds the agent. "+
			"On the machine whose copy is newest (tern holder there shows the higher epoch once resolved; tern journal log shows its newest events), run: tern migrate resolve %s --resume --force",
			hs.PeerNames(lost), h.agent)
	}
	return b.String()
}

// Runs reports whether the agent runs on this node now: whether a turn may
// go on here (a migration that froze it, or a step-down, stops it).
func (hs *Holders) Runs(agent string) bool {
	h, err := hs.get(agent)
	if err != nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed == nil && h.runs()
}

// Migrate moves agent to target and reports the outcome: committed (target
// runs it at the new epoch, this node retired it), aborted (this node runs
// it again at its epoch; Reason says why), or frozen (ctx ended while the
// decision is unknown: the node keeps asking the target in the background,
// and tern holder shows when it is resolved). Before it freezes the agent,
// the target pulls what it lacks through sync and blob fetches, so the
// frozen window covers only the tail; a transfer that fails (the target
// is unreachable, or cannot take every blob whole) aborts, with frozen_ms 0
// if it failed before the freeze. An error means the request was refused
// (an unknown agent or peer, the agent not active here, a migration in
// progress): nothing was tried.
func (hs *Holders) Migrate(ctx context.Context, agent string, target peer.ID) (api.Outcome, error) {
	h, err := hs.get(agent)
	if err != nil {
		return api.Outcome{}, err
	}
	if target == hs.cfg.Host.ID() {
		return api.Outcome{}, fmt.Errorf("migrate %s: the target is this node", agent)
	}
	if !hs.n.Paired(target) {
		return api.Outcome{}, fmt.Errorf("migrate %s: %s is not a paired peer (tern peer add it first)", agent, target)
	}
	if err := hs.targetIsMember(ctx, agent, target); err != nil {
		return api.Outcome{}, err
	}
	h.mu.Lock()
	switch {
	case h.mig != nil:
		busy := h.mig.target
		h.mu.Unlock()
		return api.Outcome{}, fmt.Errorf("migrate %s: a migration to %s is in progress", agent, busy)
	case h.stuck != nil:
		stuck := h.stuck
		h.mu.Unlock()
		return api.Outcome{}, fmt.Errorf("migrate %s: the agent cannot move or run here until the holder registry can be written: %w", agent, stuck)
	case !h.runs() || h.m.State() != fencing.Active:
		st := h.m.State().String()
		if h.m.State() == fencing.None {
			st = "a copy"
		}
		h.mu.Unlock()
		if st == "a copy" && hs.n.Foreign(agent) {
			return api.Outcome{}, fmt.Errorf("migrate: %w", api.ForeignError(agent))
		}
		return api.Outcome{}, fmt.Errorf("migrate %s: this node does not run the agent (it is %s here; tern holder %s shows who does)", agent, st, agent)
	}
	if err := h.m.SetPeers(hs.peerIDs()); err != nil {
		h.mu.Unlock()
		return api.Outcome{}, fmt.Errorf("migrate %s: %w", agent, err)
	}
	mg := &migration{target: target.String(), started: time.Now()}
	h.mig = mg
	mg.enter("transfer")
	held := h.m.Record().Epoch
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.mig = nil
		h.mu.Unlock()
	}()

	out := api.Outcome{}
	// abort ends a migration that failed before the proposal: the machine
	// gives the tail up, if it had begun, and the agent runs here again at
	// its epoch.
	abort := func(reason string) (api.Outcome, error) {
		h.mu.Lock()
		h.m.Unfreeze(errors.New(reason))
		hs.apply(h)
		mg.end()
		out := api.Outcome{Outcome: "aborted", Reason: reason, Epoch: held, Bytes: mg.bytes, Phases: mg.phases}
		if !mg.frozen.IsZero() {
			out.FrozenMS = time.Since(mg.frozen).Milliseconds()
		}
		h.mu.Unlock()
		return out, nil
	}
	// Warm: the target takes the bulk while the agent still runs here.
	pulled, err := protocol.AskPull(ctx, hs.cfg.Host, target, agent, held)
	if err != nil {
		return abort(fmt.Sprintf("%s could not take the capsule: %v", target, err))
	}
	mg.bytes += pulled.Bytes

	// Freeze: the machine stops the agent; the appends and tool calls in
	// flight end first.
	h.mu.Lock()
	if err := h.m.Freeze(target.String()); err != nil {
		h.mu.Unlock()
		return abort(fmt.Sprintf("the agent could not be frozen here: %v", err))
	}
	hs.apply(h)
	mg.frozen = time.Now()
	mg.enter("tail")
	wake := context.AfterFunc(ctx, func() {
		h.mu.Lock()
		h.idle.Broadcast()
		h.mu.Unlock()
	})
	for h.inflight > 0 && ctx.Err() == nil {
		h.idle.Wait()
	}
	wake()
	h.mu.Unlock()
	if ctx.Err() != nil {
		return abort("a tool call of the agent was still running when the migration's time ran out; try again when it has ended")
	}
	h.mu.Lock()
	tailing := h.m.Tailing()
	h.mu.Unlock()
	if !tailing {
		// The machine gave the tail up while a tool call ran: the agent may
		// not stay frozen that long before a proposal (Timing.Abort).
		return abort(fmt.Sprintf("a tool call of the agent ran longer than the agent may stay frozen before it is proposed (%v); it runs here again; move it when the call has ended", time.Duration(Timing.Abort)*hs.cfg.Tick))
	}
	// The tail: what was appended during the warm transfer.
	if pulled, err = protocol.AskPull(ctx, hs.cfg.Host, target, agent, held); err != nil {
		return abort(fmt.Sprintf("%s could not take the last events: %v", target, err))
	}
	mg.bytes += pulled.Bytes
	ours, err := hs.n.Vector(agent)
	if err != nil {
		return abort(fmt.Sprintf("this node could not read the agent's events: %v", err))
	}
	switch {
	case pulled.Lacks > 0:
		return abort(fmt.Sprintf("%s lacks %d blob(s) of the capsule after the transfer: every copy it fetched failed its hash check, or the fetch failed (its log says which); try again", target, pulled.Lacks))
	case !vectorsEqual(ours, pulled.Vector):
		return abort(fmt.Sprintf("%s does not hold every event of the capsule after the transfer; try again", target))
	}
	files, vector, err := hs.files(agent)
	if err != nil {
		return abort(fmt.Sprintf("this node could not list the capsule's files: %v", err))
	}
	done := make(chan string, 1)
	h.mu.Lock()
	mg.files, mg.vector = files, vector
	mg.enter("propose")
	if err := h.m.Migrate(target.String(), files); err != nil {
		h.mu.Unlock()
		return abort(fmt.Sprintf("the agent could not be proposed to %s: %v", target, err))
	}
	mg.epoch = h.m.Record().Next
	h.outcome = done
	hs.apply(h)
	if stuck := h.stuck; stuck != nil {
		// The record that freezes the agent for the proposal cannot be
		// written: nothing was proposed, and the move is given up.
		h.m.GiveUp(stuck)
		hs.apply(h)
		h.outcome = nil
		mg.end()
		out := api.Outcome{Outcome: "aborted", Reason: fmt.Sprintf("the move could not be proposed: %v", stuck), Epoch: held,
			Bytes: mg.bytes, Phases: mg.phases, FrozenMS: time.Since(mg.frozen).Milliseconds()}
		h.mu.Unlock()
		return out, nil
	}
	h.mu.Unlock()

	// An outcome that arrived wins over a deadline or a stop that came at
	// the same moment (a select would pick at random; the simulator
	// replays a seed exactly).
	var result string
	select {
	case result = <-done:
	case <-ctx.Done():
		h.mu.Lock()
		h.outcome = nil
		h.mu.Unlock()
		select {
		case result = <-done:
		default:
			result = "frozen"
		}
	case <-hs.ctx.Done():
		select {
		case result = <-done:
		default:
			result = "stopped"
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	mg.end()
	out = api.Outcome{Epoch: mg.epoch, Bytes: mg.bytes, Phases: mg.phases, FrozenMS: time.Since(mg.frozen).Milliseconds()}
	switch {
	case result == "committed":
		out.Outcome = "committed"
	case result == "frozen" && !h.m.Record().Committing:
		out.Outcome = "frozen"
		out.Reason = fmt.Sprintf("%s has not answered the proposal yet; this node aborts the move and runs the agent again if it stays silent (tern holder %s shows when it is resolved)", target, agent)
	case result == "frozen":
		out.Outcome = "frozen"
		out.Reason = fmt.Sprintf("no decision from %s yet; this node stays frozen and keeps asking it (tern holder %s shows when it is resolved)", target, agent)
	case result == "stopped":
		out.Outcome = "frozen"
		out.Reason = fmt.Sprintf("this node stopped before %s decided; when it starts again it aborts the migration or asks %s for its decision (tern holder %s shows the result)", target, target, agent)
	default:
		out.Outcome = "aborted"
		out.Reason = result
		if r, ok := cutPrefix(result, "aborted: "); ok {
			out.Reason = r
		}
	}
	return out, nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

func vectorsEqual(a, b journal.Vector) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// pull syncs agent with the node from now (events both ways, then every
// blob the capsule wants that it holds), taking the capsule first if this
// node does not hold it, and returns what this node then holds: the
// migrate protocol's pull, for a source about to migrate agent here.
func (hs *Holders) pull(ctx context.Context, from, agent string, epoch uint64) (protocol.Pulled, error) {
	p, err := peer.Decode(from)
	if err != nil {
		return protocol.Pulled{}, err
	}
	var res protocol.Pulled
	if res.Bytes, err = hs.n.SyncFrom(ctx, p, agent); err != nil {
		return res, err
	}
	if res.Vector, err = hs.n.Vector(agent); err != nil {
		return res, err
	}
	want, err := hs.n.Wanted(agent)
	res.Lacks = len(want)
	h, herr := hs.get(agent)
	if herr != nil {
		return res, herr
	}
	h.mu.Lock()
	running := h.runs()
	h.mu.Unlock()
	if !running && err == nil && res.Lacks == 0 {
		// The source is about to move the agent here: prepare the
		// workspace now, so that prepare has little left to write.
		if werr := hs.warm(h); werr != nil {
			hs.log.Warn("could not prepare the workspace ahead of a migration", "agent", agent, "err", werr)
		}
	}
	return res, err
}

// migrateNode is the node as the migrate protocol serves it.
type migrateNode struct{ hs *Holders }

var _ protocol.MigrateNode = migrateNode{}

func (m migrateNode) Deliver(from string, msg fencing.Message) error {
	h, err := m.hs.get(msg.Agent)
	if errors.Is(err, api.ErrUnknownAgent) && msg.Type == fencing.MsgAsk {
		// A node checking at startup, or relearning, asks every peer; one
		// that never held the agent knows nothing of it, and says so.
		m.hs.send(fencing.Message{Type: fencing.MsgTell, From: m.hs.self(), To: from, Agent: msg.Agent,
			Nonce: msg.Nonce, Info: fencing.Info{Known: true}})
		return nil
	}
	if err != nil {
		return err
	}
	return m.hs.step(h, msg)
}

func (m migrateNode) Pull(ctx context.Context, from, agent string, epoch uint64) (protocol.Pulled, error) {
	return m.hs.pull(ctx, from, agent, epoch)
}

func (m migrateNode) HolderOf(agent string) (protocol.HolderState, error) { return m.hs.State(agent) }

// Resolve carries out an operator's override of the agent's machine here
// (tern migrate resolve): resume takes the agent back (fencing.Machine
// Override, declaring the target of a frozen migration gone for good);
// retire gives it up without the target's decision (Machine.Retire). It
// waits until ctx ends for the override's outcome and returns it in words.
func (hs *Holders) Resolve(ctx context.Context, agent, action string) (string, error) {
	h, err := hs.get(agent)
	if err != nil {
		return "", err
	}
	if action == "resume" {
		if hs.n.Foreign(agent) {
			return "", fmt.Errorf("resolve: %w", api.ForeignError(agent))
		}
		if m, err := hs.n.Members(agent); err == nil && !m.Has(hs.self()) {
			return "", fmt.Errorf("resolve %s: this machine is not a member of the agent (%w), so it cannot run it; unless it was removed, on a machine that is one: tern member add %s %s",
				agent, journal.ErrNotMember, agent, hs.self())
		}
	}
	done := make(chan string, 1)
	h.mu.Lock()
	if h.failed != nil {
		h.mu.Unlock()
		return "", h.failed
	}
	rec := h.m.Record()
	switch action {
	case "resume":
		if err := h.m.SetPeers(hs.peerIDs()); err != nil && !errors.Is(err, fencing.ErrBusy) {
			h.mu.Unlock()
			return "", err
		}
		if h.m.Lost() {
			var seen uint64
			if seen, err = hs.NewestEpoch(h.agent); err == nil {
				err = h.m.OverrideLost(seen)
			}
			break
		}
		gone := ""
		if rec.State == fencing.Frozen {
			gone = rec.Peer
		}
		err = h.m.Override(gone)
	case "retire":
		err = h.m.Retire()
	default:
		err = fmt.Errorf("resolve: %q is neither resume nor retire", action)
	}
	if err != nil {
		h.mu.Unlock()
		return "", fmt.Errorf("resolve %s: %w", agent, err)
	}
	h.resolve = done
	hs.log.Warn("fencing: an operator overrides the machines", "agent", agent, "action", action, "state", rec.State.String(), "epoch", rec.Epoch)
	hs.apply(h)
	h.mu.Unlock()
	select {
	case msg := <-done:
		return msg, nil
	case <-ctx.Done():
		h.mu.Lock()
		h.resolve = nil
		h.mu.Unlock()
		return "the override is waiting for the paired peers to answer; tern holder " + agent + " shows when it is done", nil
	}
}

// self is this machine's peer ID.
func (hs *Holders) self() string { return hs.cfg.Self }

// Adopt starts the fencing of an agent the node has just taken (an
// import, a copy from a peer), unless it runs already.
func (hs *Holders) Adopt(agent string) error {
	_, err := hs.get(agent)
	return err
}

// Idle reports whether agent's fencing machine has nothing in flight: no
// migration, override or tail, and nothing left to apply.
func (hs *Holders) Idle(agent string) (bool, error) {
	h, err := hs.get(agent)
	if err != nil {
		return false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m.Idle() && !h.m.HasReady(), nil
}

// SavedRecord is agent's record in the holder registry on disk.
func (hs *Holders) SavedRecord(agent string) (fencing.Record, bool, error) {
	return hs.reg.Load(agent)
}

// Protocol is the holders as the migrate protocol serves them.
func (hs *Holders) Protocol() protocol.MigrateNode { return migrateNode{hs} }
