package capsule

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filelock"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

// Dir is a capsule folder opened for writing: it holds the folder's lock
// (see OpenDir), so it is the folder's one writer until Close. Its methods are safe for concurrent use: appends
// share fsyncs (group commit) and updates of the manifest take turns; the
// embedded Capsule's Manifest field must not be read while another
// goroutine may be updating it.
type Dir struct {
	*Capsule
	dir  string
	log  *slog.Logger
	lock *filelock.Lock

	jlMu sync.Mutex
	jl   *journal.Log // opened on first use

	commitMu sync.Mutex // one manifest update at a time

	// deriveMu is held from reading what the derived files should be
	// (derivedUpdates) to the commit that installs them, so that each
	// derivation sees every commit before it. Without it, two batches of
	// blobs adopted at once each see only their own part of a snapshot,
	// both find it incomplete, and neither installs it: every blob held,
	// none wanted, and snapshot.json the old one. Taken before commitMu.
	deriveMu sync.Mutex

	memberMu sync.Mutex // one change of members at a time: read, decide, append

	// sealMu is held by a timed seal and by Close, and is taken before
	// commitMu and jlMu; journalLog takes it under commitMu only as it
	// first opens the log, which no timed seal can precede.
	sealMu    sync.Mutex
	sealDelay time.Duration // sealAfter; tests lengthen it
	sealTimer *time.Timer   // the timed seal pending, if any
	closed    bool          // Close has run

	wantMu sync.Mutex
	wanted wantedCache // the last Wanted answer, and the state it was taken at

	indexMu  sync.Mutex
	index    *memory.Index // the index this Dir derived last…
	indexSum FileEntry     // …and the entry of its bytes (see heldIndex)
}

// emptyIndex is the semantic index of a capsule with no notes.
var emptyIndex = memory.EmptyIndex

// New creates a capsule folder at dir with every file of the layout: empty
// notes, index and snapshot, a default agent.json named name and a default
// environment spec, held by creator at epoch 0. Its agent id is derived
// from creator's key (journal.NewAgentID), and its journal holds one event,
// creator's member.added naming itself, which proves it: creator is the
// agent's first member. dir must not exist, or be an empty folder. The
// capsule is built in a sibling staging folder and appears under dir only
// when complete.
func New(dir, name string, creator journal.Signer) (*Capsule, error) {
	return NewWithAgent(dir, DefaultAgent(name), creator)
}

// NewWithAgent is New with agent.json's content given: tern capsule new
// lists the built-in tools, which this package does not know.
func NewWithAgent(dir string, a Agent, creator journal.Signer) (*Capsule, error) {
	id, genesis := journal.NewAgentID(creator.Machine())
	return newCapsule(dir, id, a, creator, &genesis)
}

// NewWithID is New for the agent id given instead of one derived from
// creator's key: the simulator makes the same capsule in every run of a
// seed. creator names itself the agent's first member as a founder (as a
// node does for an agent created before members).
func NewWithID(dir, id, name string, creator journal.Signer) (*Capsule, error) {
	body, err := json.Marshal(journal.MemberBody{Peer: creator.Machine(), Founder: true})
	if err != nil {
		return nil, err
	}
	return newCapsule(dir, id, DefaultAgent(name), creator, &journal.Draft{Type: journal.MemberAddedType, Body: body})
}

// newCapsule writes a new capsule held by creator at epoch 0, whose
// journal holds first signed by creator. Without first, the journal is
// empty (a capsule as tern wrote them before members; creator may then be
// a bare peer ID: see the tests' newLegacy).
func newCapsule(dir, id string, a Agent, creator journal.Signer, first *journal.Draft) (*Capsule, error) {
	if !ValidAgentID(id) {
		return nil, fmt.Errorf("new capsule: %q is not an agent id (a UUID)", id)
	}
	if a.Name == "" {
		return nil, fmt.Errorf("new capsule: the agent needs a name")
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("new capsule: %s exists and is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("new capsule: %w", err)
	}
	agent, err := a.Encode()
	if err != nil {
		return nil, err
	}
	if _, err := ParseAgent(agent); err != nil {
		return nil, fmt.Errorf("new capsule: %w", err)
	}
	spec, err := DefaultEnvSpec().Encode()
	if err != nil {
		return nil, err
	}
	snap, err := (&Snapshot{}).Encode()
	if err != nil {
		return nil, err
	}
	var events []byte
	if first != nil {
		e, err := journal.NewEvent(creator, journal.Stamp{Seq: 1, Clock: 1, Time: time.Now()}, *first)
		if err != nil {
			return nil, fmt.Errorf("new capsule: %w", err)
		}
		events = append(e.Line(), '\n')
	}
	files := map[string][]byte{
		AgentFile:       agent,
		NotesFile:       {},
		JournalFile:     events,
		IndexFile:       emptyIndex,
		SnapshotFile:    snap,
		EnvironmentFile: spec,
	}
	holder := creator.Machine()
	m := &Manifest{ID: id, Holder: Holder{Peer: holder}}
	if err := writeNewCapsule(dir, m, files, nil); err != nil {
		return nil, fmt.Errorf("new capsule: %w", err)
	}
	return Open(dir)
}

// writeNewCapsule writes a complete capsule folder at dir (absent or empty)
// from the layout files in files and the blobs copied by addBlobs into the
// staging folder; then it renames the staging folder into place.
func writeNewCapsule(dir string, m *Manifest, files map[string][]byte, addBlobs func(staging string) (map[string]FileEntry, error)) error {
	parent := filepath.Dir(dir)
	staging, lock, err := newStaging(dir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	defer os.RemoveAll(staging) // a no-op once renamed
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(staging, filepath.FromSlash(d)), 0o755); err != nil {
			return err
		}
	}
	m.Files = map[string]FileEntry{}
	for name, data := range files {
		if err := atomicfile.WriteFile(filepath.Join(staging, filepath.FromSlash(name)), data, 0o644); err != nil {
			return err
		}
		m.Files[name] = entryOf(data)
	}
	if addBlobs != nil {
		blobs, err := addBlobs(staging)
		if err != nil {
			return err
		}
		for name, e := range blobs {
			m.Files[name] = e
		}
		if err := atomicfile.SyncDir(filepath.Join(staging, filepath.FromSlash(BlobDir))); err != nil {
			return err
		}
	}
	data, err := m.Encode()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(staging, ManifestFile), data, 0o644); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("replace the empty folder %s: %w", dir, err)
	}
	lock.Unlock()
	if err := os.Rename(staging, dir); err != nil {
		return fmt.Errorf("move the new capsule into place: %w", err)
	}
	return atomicfile.SyncDir(parent)
}

// ErrLocked means another writer holds the capsule folder: another
// process, or another Dir in this one. Errors that wrap it say who.
var ErrLocked = filelock.ErrLocked

// OpenDir opens a capsule folder for writing. It locks the folder against
// every other writer until Close: another process, or another Dir in this
// one (an OS lock on the folder, released even if the process is killed).
// While another writer holds it, OpenDir waits until ctx is done, then
// fails with an error wrapping ErrLocked that names the holder's process
// when the system says; with a ctx already done it tries once.
//
// Holding the lock, it first completes what a crash may have interrupted,
// logging each step: an update the manifest committed but did not install
// is installed, an uncommitted one is discarded, temporary files are
// removed, and blobs the manifest does not list are kept (listed) if the
// journal names them and removed otherwise. A torn journal tail is
// repaired on the first append.
func OpenDir(ctx context.Context, dir string, log *slog.Logger) (*Dir, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &notThere{dir}
	}
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a folder; unpack the tar first (tern capsule unpack)", dir)
	}
	lock, err := filelock.Wait(ctx, dir)
	if errors.Is(err, filelock.ErrLocked) {
		who := "another process"
		if pid := filelock.Holder(err); pid == os.Getpid() {
			who = "this process (another writer in it)"
		} else if pid > 0 {
			who = fmt.Sprintf("process %d", pid)
		}
		return nil, fmt.Errorf("capsule %s is being written by %s; try again when it has finished: %w", dir, who, ErrLocked)
	}
	if err != nil {
		return nil, err
	}
	c, err := Open(dir)
	if err != nil {
		lock.Unlock()
		return nil, err
	}
	d := &Dir{Capsule: c, dir: dir, log: log, lock: lock, sealDelay: sealAfter}
	if err := d.recover(); err != nil {
		d.Close()
		return nil, fmt.Errorf("%s: recover: %w", dir, err)
	}
	return d, nil
}

func (d *Dir) path(name string) string { return filepath.Join(d.dir, filepath.FromSlash(name)) }

// recover finishes or discards interrupted updates and removes what
// killed writers left. It runs holding the folder's lock, so nothing it
// finds is another writer's work in progress.
func (d *Dir) recover() error {
	names, err := d.src.list()
	if err != nil {
		return err
	}
	var blobs []string // blobs the manifest does not list
	for _, name := range names {
		switch {
		case atomicfile.IsTemp(name):
			d.log.Warn("removing a temporary file left by an interrupted write", "capsule", d.dir, "file", name)
			if err := os.Remove(d.path(name)); err != nil {
				return err
			}
		case strings.HasSuffix(name, nextSuffix):
			target := strings.TrimSuffix(name, nextSuffix)
			want, listed := d.Manifest().Files[target]
			e, err := hashFile(d.path(name), -1)
			if err != nil {
				return err
			}
			if listed && e == want {
				d.log.Warn("completing an update the manifest committed before a crash", "capsule", d.dir, "file", target)
				if err := os.Rename(d.path(name), d.path(target)); err != nil {
					return err
				}
				if err := atomicfile.SyncDir(filepath.Dir(d.path(target))); err != nil {
					return err
				}
				continue
			}
			d.log.Warn("discarding an update that was never committed", "capsule", d.dir, "file", target)
			if err := os.Remove(d.path(name)); err != nil {
				return err
			}
		case blobName(name) != "":
			if _, listed := d.Manifest().Files[name]; !listed {
				blobs = append(blobs, blobName(name))
			}
		}
	}
	if len(blobs) > 0 {
		return d.recoverBlobs(blobs)
	}
	return nil
}

// recoverBlobs deals with blobs a killed writer stored but never listed
// (a snapshot or an accepted edit killed before its manifest): those the
// journal names are adopted, so its last events find their content; the
// rest are removed. Adopting a snapshot's own blob can make its files
// wanted, so it repeats until nothing more is adopted.
func (d *Dir) recoverBlobs(blobs []string) error {
	for {
		wanted, err := d.Wanted()
		if err != nil {
			return err
		}
		adopted := false
		for _, h := range blobs {
			if _, ok := slices.BinarySearch(wanted, h); !ok {
				continue
			}
			if err := d.AdoptBlob(h, d.path(BlobPath(h))); err != nil {
				if errors.Is(err, ErrHashMismatch) {
					continue // removed below
				}
				return err
			}
			d.log.Warn("keeping a blob an interrupted write stored: the journal names it", "capsule", d.dir, "blob", h)
			adopted = true
		}
		if !adopted {
			break
		}
	}
	for _, h := range blobs {
		if _, listed := d.Manifest().Files[BlobPath(h)]; listed {
			continue
		}
		d.log.Warn("removing a blob an interrupted write left unlisted", "capsule", d.dir, "blob", h)
		if err := os.Remove(d.path(BlobPath(h))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Close seals the events after the manifest's seal (see sealLag), closes the journal if an append opened it and releases the
// folder's lock. Closing again does nothing.
func (d *Dir) Close() error {
	d.sealMu.Lock()
	defer d.sealMu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	if d.sealTimer != nil {
		d.sealTimer.Stop()
	}
	var err error
	if d.sealBehind() {
		err = d.Seal()
	}
	d.jlMu.Lock()
	defer d.jlMu.Unlock()
	if d.jl != nil {
		if cerr := d.jl.Close(); err == nil {
			err = cerr
		}
	}
	if uerr := d.lock.Unlock(); err == nil {
		err = uerr
	}
	return err
}

func (d *Dir) journalLog() (*journal.Log, error) {
	d.jlMu.Lock()
	opened := false
	if d.jl == nil {
		jl, err := d.openLog()
		if err != nil {
			d.jlMu.Unlock()
			return nil, err
		}
		d.jl, opened = jl, true
	}
	jl := d.jl
	d.jlMu.Unlock()
	if opened && jl.Size() != d.Manifest().Files[JournalFile].Size {
		// Events a writer stored and did not seal before it died: this
		// writer seals them as it seals its own.
		d.sealSoon()
	}
	return jl, nil
}

// openLog opens the journal file, protecting the part the manifest seals.
func (d *Dir) openLog() (*journal.Log, error) {
	return journal.OpenLog(d.path(JournalFile), journal.LogOptions{Logger: d.log, Protected: d.Manifest().Files[JournalFile].Size, Agent: d.ID()})
}

// JournalLoaded reports whether the journal has been read into memory,
// which every method that needs the events does on first use.
func (d *Dir) JournalLoaded() bool {
	d.jlMu.Lock()
	defer d.jlMu.Unlock()
	return d.jl != nil
}

// writtenByTern are the event types only tern's own commands write, each
// with the content it names: a hand-made one would name content the
// capsule does not hold, or set aside the machine's own events.
var writtenByTern = map[string]string{
	SnapshotEventType:         "tern capsule snapshot",
	FileUpdatedEventType:      "tern capsule accept",
	journal.HealType:          "tern capsule heal",
	journal.ActivatedType:     "a node that activates the agent (tern migrate)",
	journal.MemberAddedType:   "tern member add",
	journal.MemberRemovedType: "tern member remove",
}

// Append appends drafts to the journal as events signed by s at the given
// epoch, durably; the manifest seals them at once if they name content,
// else soon after (see sealLag). The events are acknowledged (durable)
// even if sealing fails. A draft of a type only
// tern writes (workspace.snapshot, file.updated, chain.healed) is refused,
// naming the command that writes it, and nothing is written.
func (d *Dir) Append(ctx context.Context, s journal.Signer, epoch uint64, drafts ...journal.Draft) ([]*journal.Event, error) {
	for i, dr := range drafts {
		if cmd, ok := writtenByTern[dr.Type]; ok {
			return nil, fmt.Errorf("%w: draft %d: %s events are written by %s, with the content they name; they cannot be appended by hand", journal.ErrInvalidDraft, i+1, dr.Type, cmd)
		}
	}
	return d.AppendReserved(ctx, s, epoch, drafts...)
}

// checkNoteDrafts refuses a memory.note draft whose body is not one.
func checkNoteDrafts(drafts []journal.Draft) error {
	for i, dr := range drafts {
		if dr.Type != memory.NoteType {
			continue
		}
		if err := memory.CheckNoteBody(dr.Body); err != nil {
			return fmt.Errorf("%w: draft %d: type %q: %v", journal.ErrInvalidDraft, i+1, dr.Type, err)
		}
	}
	return nil
}

// AppendReserved is Append without the refusal of the types only tern
// writes: for tern's own code that writes them with what they name.
func (d *Dir) AppendReserved(ctx context.Context, s journal.Signer, epoch uint64, drafts ...journal.Draft) ([]*journal.Event, error) {
	if err := checkNoteDrafts(drafts); err != nil {
		return nil, err
	}
	jl, err := d.journalLog()
	if err != nil {
		return nil, err
	}
	evs, err := jl.Append(ctx, s, epoch, drafts...)
	if errors.Is(err, journal.ErrFork) || errors.Is(err, journal.ErrBrokenChain) {
		return nil, fmt.Errorf("%w; if this machine signed the fork, heal it: tern capsule heal %s", err, d.dir)
	}
	if err != nil {
		return nil, err
	}
	var files map[string][]byte
	if slices.ContainsFunc(evs, namesContent) {
		d.deriveMu.Lock()
		defer d.deriveMu.Unlock()
		if files, err = d.derivedUpdates(nil); err != nil {
			return evs, err
		}
	}
	return evs, d.commitAfterEvents(jl, files)
}

// sealLag and sealAfter bound how far the manifest's seal of the journal
// may fall behind it, in bytes and in time. Events stored while no other
// file changes are durable once the journal's group commit returns, and a
// reader takes the complete lines after the seal that verify on their own
// (docs/FORMAT.md); writing the manifest after each of them (a file, an
// fsync, a rename and the folder's fsync, one writer at a time) had made
// an append three fsyncs and serialised every writer of the capsule
// behind it. The seal catches up when files change, when sealLag bytes
// have been stored past it, sealAfter after the first event it left
// behind, and when the Dir closes; so at most that much of a journal can
// be cut at a line's end without verify noticing, as before a seal is
// written at all.
const (
	sealLag   = 1 << 20
	sealAfter = time.Second
)

// sealBehind reports whether the open journal holds more than the
// manifest seals.
func (d *Dir) sealBehind() bool {
	d.jlMu.Lock()
	jl := d.jl
	d.jlMu.Unlock()
	return jl != nil && jl.Size() != d.Manifest().Files[JournalFile].Size
}

// commitAfterEvents commits files, if any, with a fresh seal. With none it
// seals at once only when the journal is sealLag past the manifest's seal
// or the manifest is signed (a signature attests what it seals, and the
// events are not in it); else it leaves the seal to a timer, sealAfter on.
func (d *Dir) commitAfterEvents(jl *journal.Log, files map[string][]byte) error {
	m := d.Manifest()
	if files != nil || m.Signature != nil || jl.Size()-m.Files[JournalFile].Size >= sealLag {
		return d.commit(files, nil)
	}
	d.sealSoon()
	return nil
}

// sealSoon starts the timed seal unless one is pending.
func (d *Dir) sealSoon() {
	d.sealMu.Lock()
	defer d.sealMu.Unlock()
	if d.sealTimer == nil && !d.closed {
		d.sealTimer = time.AfterFunc(d.sealDelay, d.sealLater)
	}
}

// sealLater is the timed seal. It holds sealMu, so Close waits for it
// rather than closing the journal under it. A failure is logged; Close
// tries again.
func (d *Dir) sealLater() {
	d.sealMu.Lock()
	defer d.sealMu.Unlock()
	d.sealTimer = nil
	if d.closed || !d.sealBehind() {
		return
	}
	if err := d.Seal(); err != nil {
		d.log.Warn("capsule: sealing the journal's new events into the manifest failed; they are durable, and the seal is tried again", "capsule", d.dir, "err", err)
	}
}

// AddEvents stores events that other machines wrote (received by sync or
// from another copy), durably, and seals them into the manifest as Append
// does. Events
// already held are skipped; every event must come from journal.ParseLine
// or a Log (it has been checked). It returns the events that were new.
func (d *Dir) AddEvents(ctx context.Context, events []*journal.Event) ([]*journal.Event, error) {
	jl, err := d.journalLog()
	if err != nil {
		return nil, err
	}
	before := jl.Disorder()
	added, err := jl.Add(ctx, events...)
	if err != nil || len(added) == 0 {
		return added, err
	}
	// The derived files follow the readable view. While the events added
	// only extend their chains, the view only grew by them, and only those
	// that name content can change the files; a fork, a gap, a gap filled
	// or a heal changes the view.
	var files map[string][]byte
	if jl.Disorder() != before || slices.ContainsFunc(added, namesContent) {
		d.deriveMu.Lock()
		defer d.deriveMu.Unlock()
		if files, err = d.derivedUpdates(nil); err != nil {
			return added, err
		}
	}
	return added, d.commitAfterEvents(jl, files)
}

// namesContent reports whether e can change snapshot.json or an editable
// file (see derivedUpdates) when it joins a whole journal.
func namesContent(e *journal.Event) bool {
	return e.Type == SnapshotEventType || e.Type == FileUpdatedEventType || e.Type == memory.NoteType
}

// Events returns the journal's events as the open log holds them, in file
// order.
func (d *Dir) Events() ([]*journal.Event, error) {
	jl, err := d.journalLog()
	if err != nil {
		return nil, err
	}
	return jl.Events(), nil
}

// Vector returns the journal's version vector, without copying its events.
func (d *Dir) Vector() (journal.Vector, error) {
	jl, err := d.journalLog()
	if err != nil {
		return nil, err
	}
	return jl.Vector(), nil
}

// ChainProblem returns the first problem of machine's chain in the journal
// (a fork, a gap, a broken link), or nil (see journal.Log.ChainProblem).
func (d *Dir) ChainProblem(machine string) error {
	jl, err := d.journalLog()
	if err != nil {
		return err
	}
	return jl.ChainProblem(machine)
}

// Seal records the journal's current length and hash in the manifest.
func (d *Dir) Seal() error { return d.commit(nil, nil) }

// SetHolder records in the manifest that h holds the agent (a node that
// activated it at h.Epoch), as one update; a holder at an older epoch than
// the manifest's is refused.
func (d *Dir) SetHolder(h Holder) error {
	d.commitMu.Lock()
	cur := d.Manifest().Holder
	d.commitMu.Unlock()
	if h.Epoch < cur.Epoch {
		return fmt.Errorf("set holder of %s: epoch %d is older than the manifest's %d", d.dir, h.Epoch, cur.Epoch)
	}
	return d.update(nil, nil, &h)
}

// Snapshot stores the workspace folder's files as blobs, makes it the
// capsule's current snapshot and records a workspace.snapshot event signed
// by s. It returns the event's body.
func (d *Dir) Snapshot(ctx context.Context, s journal.Signer, workspace string) (SnapshotEventBody, error) {
	return d.SnapshotAt(ctx, s, 0, workspace)
}

// SnapshotAt is Snapshot with the event at a holder epoch: the runtime of
// the node that runs the agent snapshots what its tools changed.
func (d *Dir) SnapshotAt(ctx context.Context, s journal.Signer, epoch uint64, workspace string) (SnapshotEventBody, error) {
	body, _, err := d.SnapshotWith(ctx, s, epoch, workspace, SnapshotOptions{})
	return body, err
}

// SnapshotWith is SnapshotAt leaving out, besides .git/ and what the
// workspace's .ternignore names, what opt names; it also returns the paths
// it left out (a folder's ending in /).
func (d *Dir) SnapshotWith(ctx context.Context, s journal.Signer, epoch uint64, workspace string, opt SnapshotOptions) (SnapshotEventBody, []string, error) {
	st, err := os.Stat(workspace)
	if errors.Is(err, fs.ErrNotExist) {
		return SnapshotEventBody{}, nil, badWorkspace{fmt.Errorf("snapshot: %s does not exist", workspace)}
	}
	if err != nil {
		return SnapshotEventBody{}, nil, fmt.Errorf("snapshot: %w", err)
	}
	if !st.IsDir() {
		return SnapshotEventBody{}, nil, badWorkspace{fmt.Errorf("snapshot: %s is not a folder", workspace)}
	}
	snap, blobs, left, err := takeSnapshot(d.dir, d.Manifest().Files, workspace, opt)
	if err != nil {
		return SnapshotEventBody{}, nil, err
	}
	data, err := snap.Encode()
	if err != nil {
		return SnapshotEventBody{}, nil, err
	}
	e, err := putBlob(d.dir, bytes.NewReader(data))
	if err != nil {
		return SnapshotEventBody{}, nil, err
	}
	rememberListing(e.SHA256, snap) // its commit and the wants read it next
	if opt.Stored != nil {
		opt.Stored(e.SHA256) // the listing too: its event will name it first
	}
	blobs[BlobPath(e.SHA256)] = e
	if err := atomicfile.SyncDir(d.path(BlobDir)); err != nil {
		return SnapshotEventBody{}, nil, err
	}
	if opt.Stored != nil && opt.AllStored != nil {
		opt.AllStored()
	}
	body := SnapshotEventBody{Snapshot: BlobCID(e.SHA256)}
	for _, ent := range snap.Entries {
		if ent.Type == "file" {
			body.Files++
			body.Bytes += ent.Size
		}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return body, nil, err
	}
	jl, err := d.journalLog()
	if err != nil {
		return body, nil, err
	}
	// Held from the event to the commit: a snapshot taken meanwhile
	// commits its snapshot.json before or after this one, as its event is.
	d.deriveMu.Lock()
	defer d.deriveMu.Unlock()
	if _, err := jl.Append(ctx, s, epoch, journal.Draft{Type: SnapshotEventType, Body: raw}); err != nil {
		return body, nil, err
	}
	files, err := d.derivedUpdates(blobs) // an index of the workspace follows it
	if err != nil {
		return body, left, err
	}
	files[SnapshotFile] = data
	return body, left, d.commit(files, blobs)
}

// commit installs an update: new contents for some layout files, new blobs
// already written under their final names, and the journal's current
// length. Each new file is first written as NAME.next; then the manifest
// listing the new contents is replaced atomically (the commit point); then
// each NAME.next is renamed over NAME. A crash before the commit point
// leaves the old capsule (OpenDir discards the .next files); a crash after
// it leaves the new one (OpenDir, and every reader, use the .next files).
func (d *Dir) commit(files map[string][]byte, blobs map[string]FileEntry) error {
	return d.update(files, blobs, nil)
}

// update is commit, also setting the manifest's holder when h is not nil.
func (d *Dir) update(files map[string][]byte, blobs map[string]FileEntry, h *Holder) error {
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	m := *d.Manifest()
	m.Signature = nil // a signature attests an exported state, not this new one
	if h != nil {
		m.Holder = *h
	}
	m.Files = make(map[string]FileEntry, len(d.Manifest().Files)+len(blobs))
	for k, v := range d.Manifest().Files {
		m.Files[k] = v
	}
	for name, data := range files {
		if err := atomicfile.WriteFile(d.path(name)+nextSuffix, data, 0o644); err != nil {
			return err
		}
		m.Files[name] = entryOf(data)
	}
	for name, e := range blobs {
		m.Files[name] = e
	}
	j, err := d.sealedJournal()
	if err != nil {
		return err
	}
	m.Files[JournalFile] = j
	data, err := m.Encode()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(d.path(ManifestFile), data, 0o644); err != nil {
		return err
	}
	d.manifest.Store(&m)
	for name := range files {
		if err := os.Rename(d.path(name)+nextSuffix, d.path(name)); err != nil {
			return err
		}
		if err := atomicfile.SyncDir(filepath.Dir(d.path(name))); err != nil {
			return err
		}
	}
	return nil
}

// sealedJournal is the manifest entry for the journal's complete lines,
// after the journal has parsed them all (so a seal never covers a bad line).
func (d *Dir) sealedJournal() (FileEntry, error) {
	jl, err := d.journalLog()
	if err != nil {
		return FileEntry{}, err
	}
	size, sum := jl.Sealed()
	return FileEntry{SHA256: hex.EncodeToString(sum[:]), Size: size}, nil
}
