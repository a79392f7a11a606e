package capsule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

// VerifyOptions tune Verify. The zero value checks everything with one
// hashing goroutine per core and accepts any signer or none.
type VerifyOptions struct {
	Signer  string // if set, the manifest must carry a valid signature by this peer ID
	Workers int    // hashing goroutines; 0 means GOMAXPROCS
	Limits  Limits // for a tar

	// written has the entries of files an unpack hashed while it wrote
	// them (and fsynced), every file of its new folder: checked against
	// the manifest without reading them again, nor walking the folder.
	written map[string]FileEntry
}

// Problem is one thing wrong with a capsule, named by the file it is in.
type Problem struct {
	File string
	Err  error
}

func (p Problem) String() string { return p.File + ": " + p.Err.Error() }

// Report is what Verify found. Problems are damage (the capsule must not be
// trusted); Unchecked are files that could not be read (an I/O error, a
// permission, too many open files), so whether they are damaged is not
// known; Notes are harmless states a crash or a running writer leaves,
// which the next write tidies.
type Report struct {
	ID          string
	Signer      string // peer ID of a valid signature, "" if unsigned
	Files       int
	Bytes       int64
	Events      int
	Quarantined int
	Problems    []Problem
	Unchecked   []Problem
	Notes       []string
}

// OK reports whether Verify found no problem and checked everything.
func (r *Report) OK() bool { return len(r.Problems) == 0 && len(r.Unchecked) == 0 }

// Issues returns what keeps the report from being OK: the problems, then
// the files that could not be checked.
func (r *Report) Issues() []Problem {
	return append(slices.Clone(r.Problems), r.Unchecked...)
}

// problem records err against file: as damage, or as unchecked when err is
// a failure to read (see readFailure).
func (r *Report) problem(file string, err error) {
	if readFailure(err) {
		r.Unchecked = append(r.Unchecked, Problem{file, err})
		return
	}
	r.Problems = append(r.Problems, Problem{file, err})
}

// readFailure reports whether err says a file could not be read, rather
// than that it is missing or wrong: an error from the operating system
// other than "does not exist".
func readFailure(err error) bool {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotRegular) {
		return false
	}
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

func (r *Report) notef(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// maxLineProblems bounds how many bad journal lines a report lists.
const maxLineProblems = 20

// Verify checks a capsule folder or tar offline and reads nothing but it:
// the manifest is canonical and its digest right, its signature (if any)
// verifies, every listed file exists with the listed size and sha256
// (blobs thus match their names), nothing unlisted is present, the journal
// parses line by line with valid ids, signatures and chains, the agent
// definition and environment spec are valid, and every snapshot reference
// resolves to a listed blob. It never changes the capsule. The error is
// non-nil only when path cannot be read at all; damage is in the report.
func Verify(path string, opt VerifyOptions) (*Report, error) {
	r := &Report{}
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	src, err := openSource(path, opt.Limits)
	if err != nil {
		r.problem(filepath.Base(path), err)
		return r, nil
	}
	defer src.close()
	data, err := readAll(src, ManifestFile, MaxManifestSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("missing: %w", ErrNotCapsule)
		}
		r.problem(ManifestFile, err)
		return r, nil
	}
	m, err := ParseManifest(data)
	if err != nil {
		r.problem(ManifestFile, err)
		return r, nil
	}
	c := openedCapsule(path, m, src)
	r.ID = m.ID
	r.Files = len(m.Files) + 1

	signer, err := m.CheckSignature()
	switch {
	case err != nil:
		r.problem(ManifestFile, err)
	case opt.Signer != "" && signer == "":
		r.problem(ManifestFile, fmt.Errorf("not signed; a signature by %s was required", opt.Signer))
	case opt.Signer != "" && signer != opt.Signer:
		r.problem(ManifestFile, fmt.Errorf("signed by %s, not by the required %s", signer, opt.Signer))
	}
	r.Signer = signer

	r.Bytes = checkHashes(c, opt.Workers, opt.written, r)
	checkUnlisted(c, opt.written, r)
	view := checkJournal(c, r)
	checkContent(c, r)
	checkMemory(c, view, r)
	return r, nil
}

// checkMemory checks that working_memory.md and index.json are what the
// journal's notes derive (see memory.Derive): a built-in index is rebuilt
// and compared byte for byte; a provider's must hold only current notes'
// vectors, and those it lacks are a note (a node that has the key embeds
// them). It checks nothing while the files it derives from are damaged.
func checkMemory(c *Capsule, view []*journal.Event, r *Report) {
	for _, p := range r.Issues() {
		switch p.File {
		case JournalFile, AgentFile, SnapshotFile, NotesFile, IndexFile:
			return
		}
	}
	read := func(name string) []byte {
		data, _ := c.ReadFile(name)
		return data
	}
	agent, err := ParseAgent(read(AgentFile))
	if err != nil {
		return
	}
	var files []memory.Item
	if agent.Memory != nil && agent.Memory.Workspace {
		if snap, err := ParseSnapshot(read(SnapshotFile)); err == nil {
			files = workspaceItems(snap, func(h string) ([]byte, bool) {
				rc, _, err := c.OpenBlob(h)
				if err != nil {
					return nil, false
				}
				data, err := readAllClose(rc)
				return data, err == nil
			})
		}
	}
	spec := agent.EmbedderSpec()
	md, derived, err := memory.Derive(context.Background(), view, spec, files, nil)
	if err != nil {
		r.problem(IndexFile, err)
		return
	}
	if !bytes.Equal(read(NotesFile), md) {
		r.problem(NotesFile, fmt.Errorf("does not match the notes in the journal (its memory.note events); tern memory reindex %s writes it again", c.Path))
	}
	held := read(IndexFile)
	if spec == memory.BuiltinSpec {
		if !bytes.Equal(held, derived.Encode()) {
			r.problem(IndexFile, fmt.Errorf("does not match the notes in the journal (altered, or built by another embedder than agent.json names); tern memory reindex %s rebuilds it", c.Path))
		}
		return
	}
	idx, err := memory.ParseIndex(held)
	if err != nil {
		r.problem(IndexFile, fmt.Errorf("%v; tern memory reindex %s rebuilds it", err, c.Path))
		return
	}
	items := append(memory.NoteItems(memory.Fold(view)), files...)
	carried := memory.Carry(items, spec, idx)
	if len(idx.Entries) > 0 && !bytes.Equal(held, carried.Encode()) {
		r.problem(IndexFile, fmt.Errorf("holds vectors of notes that are not current, or of another embedder than agent.json names; tern memory reindex %s rebuilds it", c.Path))
		return
	}
	if n := carried.Missing(items); n > 0 {
		r.notef("%s: %d of %d texts not yet embedded by %s %s; the next search that can reach the embedder embeds them", IndexFile, n, len(items), spec.Name, spec.Model)
	}
}

// checkHashes hashes every listed file on a pool of workers and returns
// the number of bytes hashed.
func checkHashes(c *Capsule, workers int, written map[string]FileEntry, r *Report) int64 {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	names := c.Manifest().Names()
	work := make(chan string)
	var (
		mu    sync.Mutex
		total int64
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for name := range work {
				n, err := checkFile(c, name, written)
				mu.Lock()
				total += n
				if err != nil && !errors.Is(err, errNotRegular) { // scan names those
					r.problem(name, err)
				}
				mu.Unlock()
			}
		})
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	sortProblems(r.Problems)
	return total
}

// checkFile checks one listed file's size and hash (the entry written
// holds, if any: as the file was hashed while written). The journal's
// entry covers its sealed prefix; a file whose committed update is waiting
// as NAME.next in a folder is checked there instead.
func checkFile(c *Capsule, name string, written map[string]FileEntry) (int64, error) {
	want := c.Manifest().Files[name]
	if e, ok := written[name]; ok && e == want {
		return e.Size, nil
	}
	got, size, err := hashListed(c.src, name, want, name == JournalFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("missing (the manifest lists %d bytes)", want.Size)
		}
		return 0, err // errNotRegular: scan names it too
	}
	if got == want {
		return got.Size, nil
	}
	if d, ok := c.src.(dirSource); ok && name != JournalFile {
		if next, err := hashFile(d.path(name)+nextSuffix, -1); err == nil && next == want {
			return next.Size, nil
		}
	}
	// A folder a person holds gets a hint of what to run on it; an
	// unpack's staging folder (written != nil) is no one's to mend.
	hint := ""
	if _, ok := c.src.(dirSource); ok && written == nil && isEditable(name) {
		hint = "; if you edited it by hand, accept the edit: tern capsule accept " + c.Path
	}
	if _, ok := c.src.(dirSource); ok && written == nil && name == IndexFile {
		hint = "; it is derived from the notes: tern memory reindex " + c.Path + " writes it again"
	}
	switch {
	case size < want.Size:
		return got.Size, fmt.Errorf("truncated: %d bytes, the manifest lists %d%s", size, want.Size, hint)
	case name != JournalFile && size != want.Size:
		return got.Size, fmt.Errorf("size is %d bytes, the manifest lists %d%s", size, want.Size, hint)
	}
	return got.Size, fmt.Errorf("content does not match the manifest's sha256 (altered or damaged)%s", hint)
}

// hashListed hashes a listed file, or for the journal its first want.Size
// bytes, and returns that hash and the file's full size.
func hashListed(src source, name string, want FileEntry, prefix bool) (FileEntry, int64, error) {
	rc, size, err := src.open(name)
	if err != nil {
		return FileEntry{}, 0, err
	}
	defer rc.Close()
	var rd io.Reader = rc
	if prefix {
		rd = io.LimitReader(rc, want.Size)
	}
	got, err := hashReader(rd)
	return got, size, err
}

func (d dirSource) path(name string) string { return d.dir + string(os.PathSeparator) + name }

// checkUnlisted reports files the manifest does not list, and in a
// folder everything that is not a regular file or a layout folder. In a
// folder, what a crash leaves (temporary files, uncommitted updates, blobs
// written before their manifest) is a note, not damage. An unpack's
// folder holds the files written names.
func checkUnlisted(c *Capsule, written map[string]FileEntry, r *Report) {
	var names []string
	var err error
	d, isDir := c.src.(dirSource)
	switch {
	case written != nil:
		// An unpack's own new folder holds what it wrote (regular files,
		// each of a name checkName took, made by it) and the layout's
		// folders: nothing to walk.
		names = slices.Sorted(maps.Keys(written))
	case isDir:
		var forbidden []Problem
		names, forbidden, err = d.scan()
		r.Problems = append(r.Problems, forbidden...)
	default:
		names, err = c.src.list()
	}
	if err != nil {
		r.problem(".", err)
		return
	}
	for _, name := range names {
		if _, ok := c.Manifest().Files[name]; ok || name == ManifestFile {
			continue
		}
		if isDir {
			switch {
			case atomicfile.IsTemp(name):
				r.notef("%s: a write in progress, or the leftover of an interrupted one; removed by the next write", name)
				continue
			case strings.HasSuffix(name, nextSuffix):
				if _, ok := c.Manifest().Files[strings.TrimSuffix(name, nextSuffix)]; ok {
					r.notef("%s: interrupted update; completed or discarded by the next write", name)
					continue
				}
			case blobName(name) != "":
				if e, err := hashFile(d.path(name), -1); err == nil && e.SHA256 == blobName(name) {
					r.notef("%s: leftover blob of an interrupted write, not listed in the manifest; kept if the journal names it, else removed, by the next write", name)
					continue
				}
			}
		}
		r.problem(name, fmt.Errorf("not listed in the manifest"))
	}
	sortProblems(r.Problems)
}

// afterCut counts the distinct events of a removed member m written after
// its cut; 0 for a member.
func afterCut(events []*journal.Event, m journal.Member) int {
	if !m.Removed {
		return 0
	}
	seen := map[string]bool{}
	for _, e := range events {
		if e.Machine == m.Peer && e.Seq > m.Seq {
			seen[e.ID] = true
		}
	}
	return len(seen)
}

// checkJournal parses every line of the journal and checks its chains; it
// returns the readable view.
func checkJournal(c *Capsule, r *Report) []*journal.Event {
	data, err := c.ReadFile(JournalFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNotRegular) { // checkFile and scan name those
			r.problem(JournalFile, err)
		}
		return nil
	}
	sealed := c.Manifest().Files[JournalFile].Size
	events, bad, torn := journal.Decode(data)
	for i, err := range bad {
		if i == maxLineProblems {
			r.problem(JournalFile, fmt.Errorf("and %d more bad lines", len(bad)-i))
			break
		}
		r.problem(JournalFile, err)
	}
	if torn > 0 {
		if int64(len(data)-torn) < sealed {
			r.problem(JournalFile, fmt.Errorf("the last line is cut short inside the sealed part"))
		} else {
			r.notef("%s: torn last line of %d bytes (a crash during an append); repaired on next write", JournalFile, torn)
		}
	}
	if extra := int64(len(data)-torn) - sealed; extra > 0 && len(bad) == 0 {
		r.notef("%s: %d bytes of valid events appended after the manifest's seal; its writer seals them later", JournalFile, extra)
	}
	problems := journal.Check(events)
	problems = append(problems, journal.Strangers(c.ID(), events)...)
	problems = append(problems, journal.Uncustodied(c.ID(), events)...)
	for _, err := range problems {
		r.problem(JournalFile, err)
	}
	members := journal.MembersOf(c.ID(), events)
	if members.Open() {
		r.notef("%s: no members named (a capsule from before members): every machine's events count until a node that holds it names them", JournalFile)
	}
	for _, m := range members.List() {
		if n := afterCut(events, m); n > 0 {
			r.notef("%s: %d events of machine %s written after its removal from the members (it had not heard of it yet): kept, and set aside", JournalFile, n, m.Peer)
		}
	}
	view, quarantined := journal.Readable(events)
	r.Events = len(view) + len(quarantined) // each event once, a repeated line too
	r.Quarantined = len(quarantined)
	if len(problems) == 0 && len(quarantined) > 0 {
		r.notef("%s: %d events set aside (by a heal, or written under an epoch that had ended): kept, not read", JournalFile, len(quarantined))
	}
	return view
}

// checkContent parses the agent definition, environment spec, index and
// snapshot, and resolves the snapshot's blob references.
func checkContent(c *Capsule, r *Report) {
	parse := func(name string, fn func([]byte) error) {
		if _, listed := c.Manifest().Files[name]; !listed {
			return // ParseManifest already required it
		}
		data, err := c.ReadFile(name)
		if err != nil {
			return // reported by checkFile
		}
		if err := fn(data); err != nil {
			if msg, ok := strings.CutPrefix(err.Error(), name+": "); ok {
				err = errors.New(msg) // the report names the file already
			}
			r.problem(name, err)
		}
	}
	parse(AgentFile, func(b []byte) error { _, err := ParseAgent(b); return err })
	parse(EnvironmentFile, func(b []byte) error { _, err := ParseEnvSpec(b); return err })
	parse(IndexFile, func(b []byte) error {
		if _, err := memory.ParseIndex(b); err != nil {
			return fmt.Errorf("%v; tern memory reindex %s writes it again", err, c.Path)
		}
		return nil
	})
	parse(SnapshotFile, func(b []byte) error {
		snap, err := ParseSnapshot(b)
		if err != nil {
			return err
		}
		for p, e := range snap.Entries {
			if e.Type != "file" {
				continue
			}
			h, _ := ParseBlobCID(e.CID)
			if _, ok := c.Manifest().Files[BlobPath(h)]; !ok {
				r.problem(SnapshotFile, fmt.Errorf("%s refers to blob %s, which the capsule does not hold", p, e.CID))
			} else if c.Manifest().Files[BlobPath(h)].Size != e.Size {
				r.problem(SnapshotFile, fmt.Errorf("%s lists %d bytes, its blob has %d", p, e.Size, c.Manifest().Files[BlobPath(h)].Size))
			}
		}
		return nil
	})
	sortProblems(r.Problems)
}

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].File < ps[j].File })
}
