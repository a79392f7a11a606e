package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filecopy"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
)

// CapsulesDir is the folder of the capsules a node holds, inside
// $TERN_HOME, one folder per agent id.
const CapsulesDir = "capsules"

// Store holds a node's capsules: $TERN_HOME/capsules/<agent id>/. A
// capsule is opened for writing when first used and stays open, so its
// journal has a single writer, until CloseIdle finds it unused; while it
// is closed, its vector and wants are answered from what they were when
// it closed (nothing else writes to it), so a sync round over idle
// capsules opens none. It implements protocol.Journals: every capsule is
// shared with every paired peer unless withheld (see Shares). Safe for
// concurrent use.
type Store struct {
	home       string
	dir        string
	log        *slog.Logger
	quarantine *quarantine
	shares     *Shares

	mu      sync.Mutex
	open    map[string]*openCapsule
	closed  map[string]Summary // capsules CloseIdle closed
	damaged map[string]string  // why a capsule could not be opened, by agent
	shut    bool               // Close has run: no capsule opens again
	// refused counts, by agent, the events of machines that are not its
	// members that copies the store has closed refused (an open copy
	// counts its own: see Refused).
	refused map[string]uint64

	// opens counts the capsules opened from disk (status and idle sync
	// rounds should open none: they answer from summaries).
	opens atomic.Int64
	// statusOpens counts the capsules status opened because it had no
	// summary of them (a test's measure: background work opens others).
	statusOpens atomic.Int64

	// gate is held for reading while a capsule is in use or an import
	// installs one, and for writing by Close, which so waits for them.
	gate sync.RWMutex
	// folders has a lock per capsule folder (by agent id; s.mu guards the
	// map): held for reading while the capsule is in use, for writing
	// while Import installs or replaces its folder, so that no event lands
	// in a journal that is being swapped away. Other capsules go on.
	folders map[string]*folderLock

	// beforeSign, set by the node before it serves anything, runs once per
	// agent in the store's life, before this machine signs its first event
	// of it: the node takes what its paired peers hold of this machine's
	// own chain first (Node.takeOwnChain). checked holds, by agent, a
	// channel closed once it has run (s.mu guards the map).
	beforeSign func(ctx context.Context, agent string)
	checked    map[string]chan struct{}

	// offered holds, by agent, the blobs a snapshot in progress has
	// stored whole but not yet listed (see Offering); s.mu guards it.
	offered map[string]*offeredBlobs

	// slowDisk, in tests, runs before the store opens (op "open") or
	// closes ("close") a capsule, outside its lock: a disk that is slow
	// for one agent.
	slowDisk func(op, agent string)
}

// folderLock is the lock of one capsule folder, kept while anyone holds
// or waits for it.
type folderLock struct {
	sync.RWMutex
	users int // s.mu held
}

// lockFolder takes the agent's folder lock (for writing if write) and
// returns its unlock. s.mu must not be held.
func (s *Store) lockFolder(agent string, write bool) (unlock func()) {
	s.mu.Lock()
	l := s.folders[agent]
	if l == nil {
		l = &folderLock{}
		s.folders[agent] = l
	}
	l.users++
	s.mu.Unlock()
	lock, release := l.RLock, l.RUnlock
	if write {
		lock, release = l.Lock, l.Unlock
	}
	lock()
	return func() {
		release()
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.folders, agent)
		}
		s.mu.Unlock()
	}
}

// Refused returns how many events of machines that are not the agent's
// members the store refused since it opened: never stored, each logged
// with its writer's key.
func (s *Store) Refused(agent string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.refused[agent]
	if oc, ok := s.open[agent]; ok && oc.d != nil {
		n += oc.d.Refused()
	}
	return n
}

// keepRefused adds what oc, about to close, refused to the agent's count.
// s.mu held.
func (s *Store) keepRefused(agent string, oc *openCapsule) {
	if n := oc.d.Refused(); n > 0 {
		if s.refused == nil {
			s.refused = map[string]uint64{}
		}
		s.refused[agent] += n
	}
}

// openCapsule is a capsule the store holds open.
type openCapsule struct {
	d     *capsule.Dir // nil until ready
	users int          // uses in progress, and uses waiting for it to open
	last  time.Time    // when the last use ended

	// ready is closed once the capsule is open (d) or failed to open
	// (err); the store's lock is not held while it opens.
	ready chan struct{}
	err   error

	claimMu sync.Mutex
	claim   *ChainClaim // this machine's chain of the agent, once the node signed here; released at close
}

// idle reports whether oc is open, unused, and has been for idle. s.mu
// held.
func (oc *openCapsule) idle(idle time.Duration) bool {
	return oc.d != nil && oc.users == 0 && time.Since(oc.last) >= idle
}

// close records this machine's chain head (if the node signed here) and
// closes the capsule.
func (oc *openCapsule) close() error {
	oc.claimMu.Lock()
	err := oc.claim.Release(oc.d)
	oc.claim = nil
	oc.claimMu.Unlock()
	return errors.Join(err, oc.d.Close())
}

// Summary is what the store answers for a capsule it closed, while its
// journal and manifest are as they were then.
// It is kept in $TERN_HOME/summaries/<agent>.json too, so that a node that
// starts answers its status and idle sync rounds without opening the
// capsules that have not changed since.
type Summary struct {
	Vector      journal.Vector `json:"vector"`
	Wanted      []string       `json:"wanted"`
	Events      int            `json:"events"`
	Forks       []journal.Fork `json:"forks"`
	Quarantined int            `json:"quarantined"`
	Files       [2]fileStamp   `json:"files"` // the journal's and the manifest's
}

// fileStamp is what a file's stat says of its contents: its size and
// modification time.
type fileStamp struct {
	Size int64 `json:"size"`
	Mod  int64 `json:"mod"` // Unix nanoseconds
}

// SummariesDir keeps the summaries of closed capsules, inside $TERN_HOME.
const SummariesDir = "summaries"

// summarize is the Summary of an open capsule whose journal is in memory
// (reading one only to summarize it would cost more than it saves).
func (s *Store) summarize(id string, d *capsule.Dir) (Summary, bool) {
	var sum Summary
	if !d.JournalLoaded() {
		return sum, false
	}
	evs, err := d.Events()
	if err != nil {
		return sum, false
	}
	if sum.Wanted, err = d.Wanted(); err != nil {
		return sum, false
	}
	_, q := journal.Readable(evs)
	sum.Vector, sum.Events, sum.Quarantined, sum.Forks = journal.VectorOf(evs), len(evs), len(q), journal.Forks(evs)
	return sum, true
}

// keepSummary records sum for a capsule just closed, with the stamps of
// its files now, and returns it stamped (ok false if the files cannot be
// read). s.mu held; writing it to disk (writeSummaries) is left for after
// the lock.
func (s *Store) keepSummary(id string, sum Summary) (Summary, bool) {
	var err error
	if sum.Files, err = s.stamps(id); err != nil {
		return sum, false
	}
	s.closed[id] = sum
	return sum, true
}

// writeSummaries writes the summaries to $TERN_HOME/summaries, each
// through a temporary file renamed into place, without fsync: they are a
// cache, checked against their capsule's files before use, so one lost in
// a crash or left half-written only costs opening that capsule once.
func (s *Store) writeSummaries(sums map[string]Summary) {
	if len(sums) == 0 {
		return
	}
	dir := filepath.Join(s.home, SummariesDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.log.Debug("no summaries written; status opens the capsules", "err", err)
		return
	}
	for id, sum := range sums {
		if err := writeSummary(dir, id, sum); err != nil {
			s.log.Debug("a capsule's summary was not written; its status opens it", "agent", id, "err", err)
		}
	}
}

// summaryTemp marks a summary being written (a leftover one after a crash
// is removed when the store opens).
const summaryTemp = ".tmp-"

func writeSummary(dir, id string, sum Summary) error {
	data, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, id+".json"+summaryTemp+"*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, id+".json"))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// loadSummaries reads the summaries a node kept when it last ran; each
// is used only while its capsule's files are as they were.
func (s *Store) loadSummaries() {
	ents, _ := os.ReadDir(filepath.Join(s.home, SummariesDir))
	for _, e := range ents {
		if strings.Contains(e.Name(), summaryTemp) { // a write a crash cut short
			os.Remove(filepath.Join(s.home, SummariesDir, e.Name()))
			continue
		}
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !capsule.ValidAgentID(id) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.home, SummariesDir, e.Name()))
		var sum Summary
		if err == nil && json.Unmarshal(data, &sum) == nil && sum.Vector != nil {
			s.closed[id] = sum
		}
	}
}

// stamps returns the stamps of the agent's journal and manifest.
func (s *Store) stamps(agent string) ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, name := range []string{capsule.JournalFile, capsule.ManifestFile} {
		st, err := os.Stat(filepath.Join(s.dir, agent, name))
		if err != nil {
			return out, err
		}
		out[i] = fileStamp{Size: st.Size(), Mod: st.ModTime().UnixNano()}
	}
	return out, nil
}

// Use returns the agent's open capsule with the gate and its folder lock
// held for reading; call done (non-nil exactly when err is nil) when
// finished.
func (s *Store) Use(agent string) (d *capsule.Dir, done func(), err error) {
	oc, done, err := s.useOpen(agent)
	if err != nil {
		return nil, nil, err
	}
	return oc.d, done, nil
}

// useOpen is use, returning the open capsule itself. A capsule that is
// not open is opened outside the store's lock (its OS lock, its journal
// read and checked): the other agents' uses go on meanwhile, and other
// uses of this one wait for the opening (openCapsule.ready).
func (s *Store) useOpen(agent string) (oc *openCapsule, done func(), err error) {
	s.gate.RLock()
	unlock := s.lockFolder(agent, false)
	s.mu.Lock()
	opener := false
	if s.shut {
		err = ErrStoreClosed
	} else if oc = s.open[agent]; oc == nil {
		oc, opener = &openCapsule{ready: make(chan struct{})}, true
		s.open[agent] = oc
	}
	if err == nil {
		oc.users++
	}
	s.mu.Unlock()
	if err == nil {
		if opener {
			s.openInto(agent, oc)
		}
		<-oc.ready
		if err = oc.err; err != nil {
			s.mu.Lock()
			oc.users--
			s.mu.Unlock()
		}
	}
	if err != nil {
		unlock()
		s.gate.RUnlock()
		return nil, nil, err
	}
	return oc, func() {
		s.mu.Lock()
		oc.users--
		oc.last = time.Now()
		s.mu.Unlock()
		unlock()
		s.gate.RUnlock()
	}, nil
}

// CloseIdle closes every open capsule that has not been used for idle,
// keeping its vector and wants to answer for it, and returns how many it
// closed. An open capsule holds its journal in memory, a file and a
// goroutine; a node holding many capsules runs this on a timer.
func (s *Store) CloseIdle(idle time.Duration) (int, error) {
	s.gate.RLock() // Close waits for what this closes
	defer s.gate.RUnlock()
	s.mu.Lock()
	var idleOnes []string
	for id, oc := range s.open {
		if oc.idle(idle) {
			idleOnes = append(idleOnes, id)
		}
	}
	s.mu.Unlock()
	var errs []error
	closed := 0
	kept := map[string]Summary{}
	for _, id := range idleOnes {
		// The folder's lock for writing: no use of this capsule runs while
		// it closes, and one that starts waits, then opens it anew. The
		// store's lock is not held across the close (a seal, an fsync):
		// the other agents go on.
		unlock := s.lockFolder(id, true)
		s.mu.Lock()
		oc := s.open[id]
		if oc == nil || !oc.idle(idle) {
			s.mu.Unlock()
			unlock()
			continue
		}
		delete(s.open, id)
		s.keepRefused(id, oc)
		s.mu.Unlock()
		sum, keep := s.summarize(id, oc.d)
		if s.slowDisk != nil {
			s.slowDisk("close", id)
		}
		if err := oc.close(); err != nil {
			errs = append(errs, fmt.Errorf("close capsule %s: %w", id, err))
		}
		closed++
		if keep {
			s.mu.Lock()
			if sum, ok := s.keepSummary(id, sum); ok {
				kept[id] = sum
			}
			s.mu.Unlock()
		}
		unlock()
	}
	s.writeSummaries(kept)
	return closed, errors.Join(errs...)
}

var _ protocol.Journals = (*Store)(nil)

// Open opens (creating) the capsule store in home.
func Open(home string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(home, CapsulesDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	shares, err := LoadShares(home)
	if err != nil {
		return nil, err
	}
	s := &Store{home: home, dir: dir, log: log, open: map[string]*openCapsule{}, closed: map[string]Summary{}, damaged: map[string]string{},
		folders:    map[string]*folderLock{},
		quarantine: newQuarantine(home), shares: shares}
	s.tidyImports()
	s.loadSummaries()
	return s, nil
}

// List returns the ids of the capsules held, sorted.
func (s *Store) List() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && capsule.ValidAgentID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// openInto opens the agent's capsule for oc, the placeholder useOpen put
// in s.open, and makes it ready: with the capsule, or with the error that
// kept it closed (then oc leaves s.open, and the next use tries again).
// s.mu is not held: opening reads the journal.
func (s *Store) openInto(id string, oc *openCapsule) {
	d, err := s.openDir(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(oc.ready)
	if err != nil {
		oc.err = err
		if s.open[id] == oc {
			delete(s.open, id)
		}
		return
	}
	oc.d, oc.last = d, time.Now()
	s.opens.Add(1)
	delete(s.closed, id) // open, it may change
}

// openDir opens the agent's capsule folder, noting a damaged one (s.mu
// not held).
func (s *Store) openDir(id string) (*capsule.Dir, error) {
	if s.slowDisk != nil {
		s.slowDisk("open", id)
	}
	if !capsule.ValidAgentID(id) {
		return nil, fmt.Errorf("%q is not an agent id", id)
	}
	path := filepath.Join(s.dir, id)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("agent %s: %w", id, ErrUnknownAgent)
	}
	d, err := capsule.OpenDir(noWait, path, s.log)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		delete(s.damaged, id)
	case !errors.Is(err, capsule.ErrLocked):
		s.damaged[id] = err.Error()
	}
	return d, err
}

// summary returns what the store kept of the agent's capsule when it
// closed it, if it is closed and its files have not changed since (the
// store is their only writer, but a person may run a tool on them).
func (s *Store) summary(agent string) (Summary, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum, ok := s.closed[agent]
	if !ok {
		return sum, false
	}
	if now, err := s.stamps(agent); err != nil || now != sum.Files {
		delete(s.closed, agent)
		return sum, false
	}
	return sum, true
}

// noWait is the context the store opens capsules with: a folder another
// process is writing is reported at once, not waited for while the store's
// lock is held.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// StatusOpens returns how many capsules Status opened because it had no
// summary of them.
func (s *Store) StatusOpens() int64 { return s.statusOpens.Load() }

// SummaryTemp marks a summary being written: a leftover one after a
// crash is removed.
const SummaryTemp = summaryTemp

// Opens returns how many capsules the store has opened from disk.
func (s *Store) Opens() int64 { return s.opens.Load() }

// Status is what tern status says of the agent's capsule: from its
// Summary while it is closed and unchanged (opening nothing), else from
// the open capsule.
func (s *Store) Status(agent string) (Summary, error) {
	s.mu.Lock()
	shut := s.shut
	_, open := s.open[agent]
	s.mu.Unlock()
	if shut {
		return Summary{}, ErrStoreClosed
	}
	if sum, ok := s.summary(agent); ok {
		return sum, nil
	}
	if !open {
		s.statusOpens.Add(1)
	}
	d, done, err := s.Use(agent)
	if err != nil {
		return Summary{}, err
	}
	defer done()
	evs, err := d.Events()
	if err != nil {
		return Summary{}, err
	}
	wanted, err := d.Wanted()
	if err != nil {
		return Summary{}, err
	}
	_, q := journal.Readable(evs)
	return Summary{Vector: journal.VectorOf(evs), Wanted: wanted, Events: len(evs), Forks: journal.Forks(evs), Quarantined: len(q)}, nil
}

// ErrStoreClosed means the store was closed (the node is shutting down).
var ErrStoreClosed = api.ErrStoreClosed

// ErrUnknownAgent means the node holds no capsule of that agent.
var ErrUnknownAgent = api.ErrUnknownAgent

// Events returns the agent's events for peer ("" for this node itself),
// unless the agent is withheld from that peer (see Shares).
func (s *Store) Events(agent, peer string) ([]*journal.Event, error) {
	if peer != "" && !s.shares.Shared(agent, peer) {
		return nil, fmt.Errorf("agent %s: %w", agent, protocol.ErrNotShared)
	}
	d, done, err := s.Use(agent)
	if done != nil {
		defer done()
	}
	if errors.Is(err, ErrUnknownAgent) {
		return nil, fmt.Errorf("%w: %v", protocol.ErrNotShared, err)
	}
	if err != nil {
		return nil, err
	}
	return d.Events()
}

// Add stores events a peer sent, durably.
func (s *Store) Add(ctx context.Context, agent, peer string, events []*journal.Event) error {
	_, err := s.AddNew(ctx, agent, peer, events)
	return err
}

// AddNew stores events a peer sent, durably, and returns those that were
// new.
func (s *Store) AddNew(ctx context.Context, agent, peer string, events []*journal.Event) ([]*journal.Event, error) {
	d, done, err := s.Use(agent)
	if err != nil {
		return nil, err
	}
	defer done()
	added, err := d.AddEvents(ctx, events)
	if len(added) > 0 {
		s.log.Debug("received events", "agent", agent, "peer", peer, "events", len(added))
	}
	return added, err
}

// Reject keeps aside an event line a peer sent that failed its checks
// (protocol.Rejecter), and logs it.
func (s *Store) Reject(agent, peer string, line []byte, err error) {
	s.gate.RLock() // so that Close waits for the write
	defer s.gate.RUnlock()
	s.mu.Lock()
	shut := s.shut
	s.mu.Unlock()
	if shut {
		s.log.Warn("an event a peer sent did not check; not kept, the store is closed", "agent", agent, "peer", peer, "reason", err)
		return
	}
	s.log.Warn("quarantined an event a peer sent", "agent", agent, "peer", peer, "reason", err)
	if qerr := s.quarantine.add(agent, peer, line, err); qerr != nil {
		s.log.Error("could not write the quarantine", "agent", agent, "err", qerr)
	}
}

// With runs f with the agent's open capsule, which stays open and is not
// replaced by an import until f returns.
func (s *Store) With(agent string, f func(d *capsule.Dir) error) error {
	d, done, err := s.Use(agent)
	if err != nil {
		return err
	}
	defer done()
	return f(d)
}

// Append appends drafts to the agent's journal as events signed by s, at
// the given holder epoch (0 for an offline edit).
func (s *Store) Append(ctx context.Context, agent string, signer journal.Signer, epoch uint64, drafts []journal.Draft) (evs []*journal.Event, err error) {
	err = s.Sign(ctx, agent, signer.Machine(), false, func(d *capsule.Dir) error {
		evs, err = d.Append(ctx, signer, epoch, drafts...)
		return err
	})
	return evs, err
}

// AppendReserved is Append of event types only tern writes (see
// capsule.Dir.AppendReserved).
func (s *Store) AppendReserved(ctx context.Context, agent string, signer journal.Signer, epoch uint64, drafts []journal.Draft) (evs []*journal.Event, err error) {
	err = s.Sign(ctx, agent, signer.Machine(), false, func(d *capsule.Dir) error {
		evs, err = d.AppendReserved(ctx, signer, epoch, drafts...)
		return err
	})
	return evs, err
}

// Heal heals the forks of the signer's chain in the agent's capsule (see
// capsule.Dir.Heal), taking the machine's chain over if the copy it was
// last written in is gone.
func (s *Store) Heal(ctx context.Context, agent string, signer journal.Signer) (evs []*journal.Event, err error) {
	err = s.Sign(ctx, agent, signer.Machine(), true, func(d *capsule.Dir) error {
		evs, err = d.Heal(ctx, signer)
		return err
	})
	return evs, err
}

// ownChainTaken runs beforeSign for the agent once in the store's life
// (the first signer runs it, others wait for it, until ctx ends).
func (s *Store) ownChainTaken(ctx context.Context, agent string) error {
	if s.beforeSign == nil {
		return nil
	}
	s.mu.Lock()
	if s.checked == nil {
		s.checked = map[string]chan struct{}{}
	}
	done, ok := s.checked[agent]
	if !ok {
		done = make(chan struct{})
		s.checked[agent] = done
	}
	s.mu.Unlock()
	if !ok {
		s.beforeSign(ctx, agent)
		close(done)
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Sign runs f, which signs events as machine, with the agent's open
// capsule, once the store has claimed the machine's chain of the agent.
// The store keeps the claim for as long as it holds the capsule open (see
// ClaimChain), so that no other copy of the agent on this machine is
// signed meanwhile.
func (s *Store) Sign(ctx context.Context, agent, machine string, takeOver bool, f func(d *capsule.Dir) error) (err error) {
	if err := s.ownChainTaken(ctx, agent); err != nil {
		return err
	}
	defer func() { err = atomicfile.DiskFull(filepath.Join(s.dir, agent), err) }()
	oc, done, err := s.useOpen(agent)
	if err != nil {
		return err
	}
	defer done()
	if err := s.claim(ctx, oc, machine, takeOver); err != nil {
		return err
	}
	return f(oc.d)
}

// chainClaimWait bounds how long the store waits for another writer of
// an agent's chain on this machine (a command signing another copy).
const chainClaimWait = 5 * time.Second

// claim claims the machine's chain of oc's agent, once per open capsule.
func (s *Store) claim(ctx context.Context, oc *openCapsule, machine string, takeOver bool) error {
	oc.claimMu.Lock()
	defer oc.claimMu.Unlock()
	if oc.claim != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, chainClaimWait)
	defer cancel()
	c, err := ClaimChain(ctx, s.home, oc.d, machine, takeOver)
	var elsewhere *ChainElsewhereError
	if errors.As(err, &elsewhere) {
		elsewhere.Node, elsewhere.Target = true, "the node's copy"
	}
	if err != nil {
		return err
	}
	oc.claim = c
	return nil
}

// ReportDamage logs every held capsule whose manifest does not open, and
// remembers it for Status; the healthy ones work as ever.
func (s *Store) ReportDamage() {
	ids, err := s.List()
	if err != nil {
		s.log.Error("cannot list the capsules", "dir", s.dir, "err", err)
		return
	}
	for _, id := range ids {
		c, err := capsule.Open(filepath.Join(s.dir, id))
		if err != nil {
			s.log.Error("a held capsule is damaged; it is not synced until it is repaired (tern capsule verify names the damage)", "agent", id, "err", err)
			s.mu.Lock()
			s.damaged[id] = err.Error()
			s.mu.Unlock()
			continue
		}
		c.Close()
	}
}

// Damaged returns why the agent's capsule could not be opened, "" if it
// could (or was not tried).
func (s *Store) Damaged(agent string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.damaged[agent]
}

// Wanted returns the blobs the agent's capsule lacks (see capsule.Dir.Wanted).
// The list is derived from the durable journal and manifest, so it
// survives restarts, and a blob leaves it only once verified and listed.
func (s *Store) Wanted(agent string) ([]string, error) {
	if sum, ok := s.summary(agent); ok {
		return slices.Clone(sum.Wanted), nil
	}
	d, done, err := s.Use(agent)
	if done != nil {
		defer done()
	}
	if err != nil {
		return nil, err
	}
	return d.Wanted()
}

// WantedOnceHeld is Wanted as it will be once the blobs of paths (name →
// a file of its checked bytes) are held too (see capsule.Dir.WantedOnceHeld).
func (s *Store) WantedOnceHeld(agent string, paths map[string]string) ([]string, error) {
	d, done, err := s.Use(agent)
	if done != nil {
		defer done()
	}
	if err != nil {
		return nil, err
	}
	return d.WantedOnceHeld(paths)
}

// AdoptFetched moves files that blob fetches checked whole against their
// names (paths, by blob name) into the agent's blob store, listing them
// in one manifest commit (see capsule.Dir.AdoptCheckedBlobs): they are
// not hashed again, so only a fetch may call it.
func (s *Store) AdoptFetched(agent string, paths map[string]string) error {
	d, done, err := s.Use(agent)
	if done != nil {
		defer done()
	}
	if err != nil {
		return err
	}
	return d.AdoptCheckedBlobs(paths)
}

// OpenBlob opens a blob of the agent's capsule for peer
// (protocol.BlobSource): only from a capsule shared with that peer, and
// only a blob its manifest lists, so a half-adopted file is never served.
func (s *Store) OpenBlob(agent, peer, sha256Hex string) (io.ReadSeekCloser, int64, error) {
	if !s.HoldsBlob(agent, peer, sha256Hex) {
		return nil, 0, fmt.Errorf("agent %s, blob %s: %w", agent, sha256Hex, protocol.ErrNoBlob)
	}
	f, err := os.Open(filepath.Join(s.dir, agent, filepath.FromSlash(capsule.BlobPath(sha256Hex))))
	if err != nil {
		return nil, 0, fmt.Errorf("agent %s, blob %s: %w: %v", agent, sha256Hex, protocol.ErrNoBlob, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// HoldsBlob reports whether the agent's capsule, shared with peer, lists
// the blob.
func (s *Store) HoldsBlob(agent, peer, sha256Hex string) bool {
	return len(s.HeldBlobs(agent, peer, []string{sha256Hex})) == 1
}

// HeldBlobs returns those of hashes that the agent's capsule lists, if it
// is shared with peer ("" for this node itself) (protocol.BlobSource).
func (s *Store) HeldBlobs(agent, peer string, hashes []string) []string {
	if peer != "" && !s.shares.Shared(agent, peer) {
		return nil
	}
	d, done, err := s.Use(agent)
	if err != nil {
		return nil
	}
	defer done()
	var out []string
	for _, h := range hashes {
		if d.HoldsBlob(h) || peer != "" && s.isOffered(agent, h) {
			out = append(out, h)
		}
	}
	return out
}

// Offering marks blobs of the agent's capsule that a snapshot in progress
// has stored whole under their names but not yet listed (the manifest
// commits last) as served to peers all the same: offered to them
// (protocol.Offer), they fetch them while the rest is stored. It returns
// add, to mark one (from several goroutines at once), and end, to call
// once the snapshot has committed or failed. The store's own readers
// still see only what the manifest lists.
func (s *Store) Offering(agent string) (add func(sha256Hex string), end func()) {
	mine := &offeredBlobs{blobs: map[string]bool{}}
	s.mu.Lock()
	if s.offered == nil {
		s.offered = map[string]*offeredBlobs{}
	}
	s.offered[agent] = mine
	s.mu.Unlock()
	add = func(h string) {
		s.mu.Lock()
		mine.blobs[h] = true
		s.mu.Unlock()
	}
	end = func() {
		s.mu.Lock()
		if s.offered[agent] == mine {
			delete(s.offered, agent)
		}
		s.mu.Unlock()
	}
	return add, end
}

// offeredBlobs is one snapshot's set of blobs stored and not yet listed.
type offeredBlobs struct{ blobs map[string]bool }

func (s *Store) isOffered(agent, h string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.offered[agent]
	return o != nil && o.blobs[h]
}

// Blobs returns every blob the agent's capsule holds or wants: what a
// peer must hold to hold the whole capsule.
func (s *Store) Blobs(agent string) ([]string, error) {
	d, done, err := s.Use(agent)
	if err != nil {
		return nil, err
	}
	defer done()
	want, err := d.Wanted()
	if err != nil {
		return nil, err
	}
	all := append(d.HeldBlobs(), want...)
	slices.Sort(all)
	return slices.Compact(all), nil
}

// Vector returns the agent's version vector.
func (s *Store) Vector(agent string) (journal.Vector, error) {
	if sum, ok := s.summary(agent); ok {
		return sum.Vector.Clone(), nil
	}
	d, done, err := s.Use(agent)
	if err != nil {
		return nil, err
	}
	defer done()
	return d.Vector()
}

// Import takes a capsule tar or folder into the store (see ImportFrom and
// ImportFolder).
func (s *Store) Import(path string) (string, bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", false, err
	}
	if st.IsDir() {
		id, merged, _, err := s.ImportFolder(path, nil)
		return id, merged, err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	return s.ImportFrom(f, nil)
}

// ImportFolder is ImportFrom of the capsule folder dir without a tar:
// each file is copied straight into the store's staging folder
// (capsule.Copy: a reflink where the filesystem allows it, else
// copy_file_range, else a plain copy), hashed as it is read, and the
// whole verified as an unpack is. It also returns how the blobs were
// copied: the slowest method any took ("" if there were none).
//
// stream, if not nil, is asked for a BlobStream of each blob of the
// agent as the blob is about to be copied (from several goroutines at
// once), and passed its bytes as they are read (see capsule.Copy): a node pushes a large one to its peers
// while it imports it.
func (s *Store) ImportFolder(dir string, stream func(agent string, size int64) capsule.BlobStream) (id string, merged bool, copied filecopy.Method, err error) {
	src, err := capsule.Open(dir)
	if err != nil {
		return "", false, "", err
	}
	defer src.Close()
	var blobStream func(size int64) capsule.BlobStream
	if stream != nil {
		blobStream = func(size int64) capsule.BlobStream { return stream(src.ID(), size) }
	}
	id, merged, err = s.importStaged(func(staged string) (string, error) {
		copied, err = capsule.Copy(src, staged, blobStream)
		return src.ID(), err
	})
	return id, merged, copied, err
}

// ErrImportEnded is what a fetch feeding an import is cut with once the
// import has ended.
var ErrImportEnded = errors.New("the import ended")

// importPrefix names the folders in which imports stage their capsules,
// inside the store's folder: a kill -9 leaves them, and OpenStore removes
// them (restoring a held capsule an interrupted merge had moved aside).
const importPrefix = ".import-"

// heldSuffix names, in an import's folder, a held capsule folder that a
// merge moved aside: <agent>.held.
const heldSuffix = ".held"

// ImportFrom takes a capsule tar read from r into the store, in one pass:
// unpacked as it is read, each file hashed while written and fsynced, the
// whole verified (capsule.UnpackFrom), in a staging folder of the store
// and without holding any lock. Then, with only that agent's folder
// locked, a capsule the store does not hold is renamed into place; one it
// holds is merged with it, as a set union, and replaced. It returns the
// agent id and whether it merged. Killed at any point, it leaves the
// store with the capsule whole or without it (OpenStore tidies).
//
// stream is as ImportFolder's (see capsule.UnpackStreaming): a node
// pushes a large blob of an uploaded tar to its peers as it unpacks it.
func (s *Store) ImportFrom(r io.Reader, stream func(agent string, size int64) capsule.BlobStream) (string, bool, error) {
	return s.importStaged(func(staged string) (string, error) {
		if err := capsule.UnpackStreaming(r, staged, capsule.Limits{}, stream); err != nil {
			return "", err
		}
		c, err := capsule.Open(staged)
		if err != nil {
			return "", err
		}
		defer c.Close()
		return c.ID(), nil
	})
}

// importStaged is an import of the capsule stage makes, a verified new
// folder at staged, inside the store's folder, of the agent whose id it
// returns (see ImportFrom).
func (s *Store) importStaged(stage func(staged string) (id string, err error)) (string, bool, error) {
	tmp, err := os.MkdirTemp(s.dir, importPrefix+"*")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(tmp)
	staged := filepath.Join(tmp, "capsule")
	id, err := stage(staged)
	if err != nil {
		return "", false, err
	}
	s.gate.RLock() // so that Close waits for the install
	defer s.gate.RUnlock()
	unlock := s.lockFolder(id, true) // no one may use the capsule while it is replaced
	defer unlock()
	s.mu.Lock()
	shut := s.shut
	s.mu.Unlock()
	if shut {
		return "", false, ErrStoreClosed
	}
	final := filepath.Join(s.dir, id)
	if _, err := os.Stat(final); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(staged, final); err != nil {
			return "", false, err
		}
		return id, false, atomicfile.SyncDir(s.dir)
	}
	// Merge with the held copy, then swap folders.
	s.mu.Lock()
	oc := s.open[id] // no use runs: the import holds the folder's lock
	if oc != nil {
		s.keepRefused(id, oc)
		delete(s.open, id)
	}
	delete(s.closed, id)
	s.mu.Unlock()
	if oc != nil {
		oc.close() // outside the store's lock: the other agents go on
	}
	src, err := capsule.Open(staged)
	if err != nil {
		return "", false, err
	}
	defer src.Close()
	held, err := capsule.Open(final)
	if err != nil {
		return "", false, err
	}
	merged := filepath.Join(tmp, "merged")
	_, err = capsule.Merge(held, src, merged)
	held.Close()
	if err != nil {
		return "", false, err
	}
	aside := filepath.Join(tmp, id+heldSuffix)
	if err := os.Rename(final, aside); err != nil {
		return "", false, err
	}
	if err := os.Rename(merged, final); err != nil {
		os.Rename(aside, final) // put the held copy back
		return "", false, err
	}
	return id, true, atomicfile.SyncDir(s.dir)
}

// tidyImports removes what killed imports left in the store's folder,
// first moving back a held capsule that a merge had moved aside and not
// replaced (the merge is lost; the capsule is as it was).
func (s *Store) tidyImports() {
	held, _ := filepath.Glob(filepath.Join(s.dir, importPrefix+"*", "*"+heldSuffix))
	for _, aside := range held {
		id := strings.TrimSuffix(filepath.Base(aside), heldSuffix)
		final := filepath.Join(s.dir, id)
		if _, err := os.Stat(final); errors.Is(err, fs.ErrNotExist) && capsule.ValidAgentID(id) {
			if err := os.Rename(aside, final); err != nil {
				s.log.Error("could not restore a capsule an interrupted import had moved aside", "agent", id, "folder", aside, "err", err)
				continue
			}
			s.log.Warn("restored a capsule an interrupted import had moved aside", "agent", id)
		}
	}
	left, _ := filepath.Glob(filepath.Join(s.dir, importPrefix+"*"))
	for _, dir := range left {
		if !s.keepsAside(dir) {
			os.RemoveAll(dir)
		}
	}
	atomicfile.SyncDir(s.dir)
}

// keepsAside reports whether an import's folder holds the only copy of a
// capsule (one tidyImports could not move back): it is kept for a person.
func (s *Store) keepsAside(dir string) bool {
	held, _ := filepath.Glob(filepath.Join(dir, "*"+heldSuffix))
	for _, aside := range held {
		id := strings.TrimSuffix(filepath.Base(aside), heldSuffix)
		if _, err := os.Stat(filepath.Join(s.dir, id)); errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return false
}

// Shared returns the agents shared with peer: every capsule held, unless
// withheld from that peer (protocol.Capsules).
func (s *Store) Shared(peer string) ([]string, error) {
	ids, err := s.List()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ids, func(id string) bool { return !s.shares.Shared(id, peer) }), nil
}

// Export writes the agent's capsule as a tar to w (protocol.Capsules).
// Nothing is locked while w is written to (a peer that reads slowly holds
// up no one): the capsule is opened under its folder's lock, then packed
// from files that only grow or are replaced whole (a blob is never
// changed), and Pack checks every file against the manifest it read.
func (s *Store) Export(agent, peer string, all bool, w io.Writer) error {
	if !s.shares.Shared(agent, peer) || !s.Holds(agent) {
		return fmt.Errorf("agent %s: %w", agent, protocol.ErrNoCapsule)
	}
	c, err := s.openHeld(agent)
	if err != nil {
		return err
	}
	defer c.Close()
	opt := capsule.PackOptions{}
	if !all {
		opt.BlobsUpTo = protocol.SmallBlob
	}
	return capsule.Pack(c, w, opt)
}

// openHeld opens the agent's capsule folder for reading, under its
// folder's lock, so that no import is swapping it meanwhile.
func (s *Store) openHeld(agent string) (*capsule.Capsule, error) {
	unlock := s.lockFolder(agent, false)
	defer unlock()
	s.mu.Lock()
	shut := s.shut
	s.mu.Unlock()
	if shut {
		return nil, ErrStoreClosed
	}
	return capsule.Open(filepath.Join(s.dir, agent))
}

// Holds reports whether the store holds the agent's capsule.
func (s *Store) Holds(agent string) bool {
	_, err := os.Stat(filepath.Join(s.dir, agent))
	return capsule.ValidAgentID(agent) && err == nil
}

// ExportFile packs the agent's capsule to the file out (see Export).
func (s *Store) ExportFile(agent, out string) error {
	if !s.Holds(agent) {
		return fmt.Errorf("agent %s: %w", agent, ErrUnknownAgent)
	}
	c, err := s.openHeld(agent)
	if err != nil {
		return err
	}
	defer c.Close()
	return capsule.PackFile(c, out, capsule.PackOptions{})
}

// Close waits for the uses in progress to end (a sync still storing what a
// peer sent, say), then closes every open capsule; afterwards the store
// opens none again and writes nothing.
func (s *Store) Close() error {
	s.gate.Lock() // held for reading by every use in progress
	defer s.gate.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shut = true
	var errs []error
	kept := map[string]Summary{}
	for id, oc := range s.open {
		sum, keep := s.summarize(id, oc.d)
		s.keepRefused(id, oc)
		errs = append(errs, oc.close())
		delete(s.open, id)
		if keep {
			if sum, ok := s.keepSummary(id, sum); ok {
				kept[id] = sum
			}
		}
	}
	s.writeSummaries(kept) // s.mu held: nothing opens again, and Close returns once they are written
	return errors.Join(errs...)
}

// Members returns the agent's members as this node's copy names them.
func (s *Store) Members(agent string) (journal.Members, error) {
	d, done, err := s.Use(agent)
	if err != nil {
		return journal.Members{}, err
	}
	defer done()
	return d.Members()
}

// TakeOwnChain runs what SetBeforeSign set for the agent now, if it has
// not run yet, as the first signature would (a move about to make this
// node the agent's writer takes the wait before the agent is frozen).
func (s *Store) TakeOwnChain(ctx context.Context, agent string) error {
	return s.ownChainTaken(ctx, agent)
}

// SetBeforeSign makes f run once per agent in the store's life, before
// this machine signs its first event of it: the node takes what its
// paired peers hold of this machine's own chain first. Set it before the
// store is used.
func (s *Store) SetBeforeSign(f func(ctx context.Context, agent string)) { s.beforeSign = f }

// Shares is which capsule is shared with which peer (shares.json).
func (s *Store) Shares() *Shares { return s.shares }

// Path is the folder of the agent's capsule.
func (s *Store) Path(agent string) string { return filepath.Join(s.dir, agent) }

// RejectedCount is how many lines peers sent of the agent that did not
// check (kept aside in the quarantine folder).
func (s *Store) RejectedCount(agent string) int { return s.quarantine.count(agent) }

// IsOpen reports whether the store holds the agent's capsule open now.
func (s *Store) IsOpen(agent string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, open := s.open[agent]
	return open
}
