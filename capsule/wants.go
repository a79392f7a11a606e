package capsule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

// referencedBlobs returns the sha256 names of the blobs the readable
// journal refers to: snapshots, accepted edits, and the images and files
// of messages and tool results.
func referencedBlobs(view []*journal.Event) map[string]bool {
	refs := map[string]bool{}
	add := func(c string) {
		if h, err := ParseBlobCID(c); err == nil {
			refs[h] = true
		}
	}
	for _, e := range view {
		switch e.Type {
		case SnapshotEventType:
			var b SnapshotEventBody
			if json.Unmarshal(e.Body, &b) == nil {
				add(b.Snapshot)
			}
		case FileUpdatedEventType:
			var b FileUpdatedBody
			if json.Unmarshal(e.Body, &b) == nil {
				add(b.CID)
			}
		case "message", "tool_result":
			var b struct {
				Content []struct {
					CID string `json:"cid"`
				} `json:"content"`
			}
			if json.Unmarshal(e.Body, &b) == nil {
				for _, p := range b.Content {
					if p.CID != "" {
						add(p.CID)
					}
				}
			}
		}
	}
	return refs
}

// NamesBlobs reports whether any of events refers to a blob (see Wanted):
// a store that adds them may now want blobs it did not want before.
func NamesBlobs(events []*journal.Event) bool {
	return len(referencedBlobs(events)) > 0
}

// Wanted returns the sha256 names of the blobs this capsule lacks: those
// its journal refers to, and the files of the latest snapshot once that
// snapshot's own blob is held. Sorted.
func (d *Dir) Wanted() ([]string, error) {
	jl, err := d.journalLog()
	if err != nil {
		return nil, err
	}
	// The journal and the manifest only grow, so their sizes name a state:
	// asked again in the same state (a node asks after every sync round,
	// for every capsule), the answer is the same.
	d.commitMu.Lock()
	at := wantedState{journal: jl.Size(), files: len(d.Manifest().Files)}
	d.commitMu.Unlock()
	d.wantMu.Lock()
	defer d.wantMu.Unlock()
	if d.wanted.ok && d.wanted.at == at {
		return slices.Clone(d.wanted.blobs), nil
	}
	blobs, err := d.wantedNow()
	if err != nil {
		return nil, err
	}
	d.wanted = wantedCache{ok: true, at: at, blobs: blobs}
	return slices.Clone(blobs), nil
}

type wantedState struct {
	journal int64 // bytes of durable journal lines
	files   int   // files the manifest lists
}

type wantedCache struct {
	ok    bool
	at    wantedState
	blobs []string
}

// WantedOnceHeld is Wanted as it will be once the blobs of paths (by
// name, each a file holding its bytes, checked against the name) are held
// too: with a snapshot's listing among them, the listing's files. A node
// that has both a listing and its files aside (offers brought them) adopts
// them together, one commit instead of two.
func (d *Dir) WantedOnceHeld(paths map[string]string) ([]string, error) {
	return d.wantedWith(paths)
}

func (d *Dir) wantedNow() ([]string, error) { return d.wantedWith(nil) }

// wantedWith is Wanted with the blobs of also (name → a file of its
// bytes) taken as held.
func (d *Dir) wantedWith(also map[string]string) ([]string, error) {
	evs, err := d.Events()
	if err != nil {
		return nil, err
	}
	view, _ := journal.Readable(evs)
	refs := referencedBlobs(view)
	d.commitMu.Lock()
	files := d.Manifest().Files
	d.commitMu.Unlock()
	held := func(h string) bool {
		_, ok := files[BlobPath(h)]
		return ok || also[h] != ""
	}
	if snap, ok := latestSnapshotBlob(view); ok {
		if held(snap) {
			at := d.path(BlobPath(snap))
			if _, inCapsule := files[BlobPath(snap)]; !inCapsule {
				at = also[snap]
			}
			data, err := os.ReadFile(at)
			if err != nil {
				return nil, err
			}
			l, err := parsedListing(data)
			if err != nil {
				return nil, fmt.Errorf("snapshot blob %s: %w", snap, err)
			}
			for _, h := range l.blobs {
				refs[h] = true
			}
		}
	}
	var out []string
	for h := range refs {
		if !held(h) {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out, nil
}

func latestSnapshotBlob(view []*journal.Event) (string, bool) {
	for i := len(view) - 1; i >= 0; i-- {
		if view[i].Type != SnapshotEventType {
			continue
		}
		var b SnapshotEventBody
		if json.Unmarshal(view[i].Body, &b) != nil {
			return "", false
		}
		h, err := ParseBlobCID(b.Snapshot)
		return h, err == nil
	}
	return "", false
}

// HoldsBlob reports whether the manifest lists the blob sha256Hex: a
// lookup, where HeldBlobs lists them all.
func (d *Dir) HoldsBlob(sha256Hex string) bool {
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	_, ok := d.Manifest().Files[BlobPath(sha256Hex)]
	return ok
}

// HeldBlobs returns the sha256 hex names of the blobs the manifest lists,
// sorted: the blobs this copy of the capsule holds, verified.
func (d *Dir) HeldBlobs() []string {
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	var out []string
	for name := range d.Manifest().Files {
		if h := blobName(name); h != "" {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out
}

// BlobSize returns the size the manifest lists for the blob sha256Hex, 0
// if it is not held.
func (d *Dir) BlobSize(sha256Hex string) int64 {
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	return d.Manifest().Files[BlobPath(sha256Hex)].Size
}

// AdoptBlob moves the verified file at path (on the same file system)
// into the blob store as the blob sha256Hex, lists it in the manifest, and
// brings snapshot.json and the editable files up to the latest events
// whose blobs are now all held. A file that does not hash to its name is
// refused and left where it is.
func (d *Dir) AdoptBlob(sha256Hex, path string) error {
	e, err := hashFile(path, -1)
	if err != nil {
		return err
	}
	if e.SHA256 != sha256Hex {
		return fmt.Errorf("adopt blob %s: %w (it hashes to %s)", sha256Hex, ErrHashMismatch, e.SHA256)
	}
	return d.adopt(e, path)
}

// AdoptCheckedBlob is AdoptBlob for a file the caller has already checked
// against its name: it hashed the bytes as it wrote them, and nothing
// else writes to path (a blob fetch does exactly that). The file is not
// read again; reading it again would only repeat the fetch's hash. It is
// fsynced before it is listed.
func (d *Dir) AdoptCheckedBlob(sha256Hex, path string) error {
	return d.AdoptCheckedBlobs(map[string]string{sha256Hex: path})
}

// AdoptCheckedBlobs is AdoptCheckedBlob for many files at once, by blob
// name: each is moved into the blob store, they are made durable together
// with their names (atomicfile.SyncFiles: one sync of the filesystem for
// a batch of many), and one manifest commit lists them all (and brings
// snapshot.json and the editable files up to what they complete). A crash
// before the commit leaves them under their names, unlisted: the next
// open checks each against its name.
// Adopting blobs one at a time rewrites the whole manifest for each,
// which is quadratic in a tree of small files. On error, the blobs moved
// before it are in the store but not listed: the next adoption or a fetch
// of them again lists them.
func (d *Dir) AdoptCheckedBlobs(paths map[string]string) error {
	for sha256Hex := range paths {
		if !isSHA256Hex(sha256Hex) {
			return fmt.Errorf("adopt blob: %q is not a sha256 hex name", sha256Hex)
		}
	}
	entries := make(map[string]FileEntry, len(paths))
	finals := make([]string, 0, len(paths))
	for sha256Hex, path := range paths {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		final := d.path(BlobPath(sha256Hex))
		if err := os.Chmod(path, 0o644); err != nil {
			return err
		}
		if err := os.Rename(path, final); err != nil {
			return err
		}
		finals = append(finals, final)
		entries[BlobPath(sha256Hex)] = FileEntry{SHA256: sha256Hex, Size: st.Size()}
	}
	if err := atomicfile.SyncFiles(d.dir, finals); err != nil {
		return err
	}
	return d.listAdopted(entries, nil)
}

// adopt moves the file at path, whose entry is e, into the blob store and
// commits it with whatever it completes.
func (d *Dir) adopt(e FileEntry, path string) error {
	final := d.path(BlobPath(e.SHA256))
	if err := os.Chmod(path, 0o644); err != nil {
		return err
	}
	if err := os.Rename(path, final); err != nil {
		return err
	}
	return d.listAdopted(map[string]FileEntry{BlobPath(e.SHA256): e}, map[string]bool{filepath.Dir(final): true})
}

// listAdopted makes the renames into dirs durable, then lists the blobs
// entries names in the manifest with whatever they complete.
func (d *Dir) listAdopted(entries map[string]FileEntry, dirs map[string]bool) error {
	for dir := range dirs {
		if err := atomicfile.SyncDir(dir); err != nil {
			return err
		}
	}
	d.deriveMu.Lock()
	defer d.deriveMu.Unlock()
	files, err := d.derivedUpdates(entries)
	if err != nil {
		return err
	}
	return d.commit(files, entries)
}

// derivedUpdates returns new contents for snapshot.json and the editable
// files when the latest events name content that differs from them and
// whose blobs are all held (counting extra, about to be listed).
func (d *Dir) derivedUpdates(extra map[string]FileEntry) (map[string][]byte, error) {
	evs, err := d.Events()
	if err != nil {
		return nil, err
	}
	view, _ := journal.Readable(evs)
	d.commitMu.Lock()
	held := make(map[string]FileEntry, len(d.Manifest().Files)+len(extra))
	for k, v := range d.Manifest().Files {
		held[k] = v
	}
	d.commitMu.Unlock()
	for k, v := range extra {
		held[k] = v
	}
	read := func(h string) ([]byte, bool) {
		if _, ok := held[BlobPath(h)]; !ok {
			return nil, false
		}
		data, err := os.ReadFile(d.path(BlobPath(h)))
		return data, err == nil
	}
	out := map[string][]byte{}
	if snapHex, ok := latestSnapshotBlob(view); ok {
		if data, ok := read(snapHex); ok && entryOf(data) != held[SnapshotFile] {
			if l, err := parsedListing(data); err == nil {
				complete := true
				for _, h := range l.blobs {
					if _, ok := held[BlobPath(h)]; !ok {
						complete = false
					}
				}
				if complete {
					out[SnapshotFile] = data
				}
			}
		}
	}
	for _, name := range Editable {
		for i := len(view) - 1; i >= 0; i-- {
			var b FileUpdatedBody
			if view[i].Type != FileUpdatedEventType || json.Unmarshal(view[i].Body, &b) != nil || b.Path != name {
				continue
			}
			if h, err := ParseBlobCID(b.CID); err == nil {
				if data, ok := read(h); ok && entryOf(data) != held[name] && checkEditable(name, data) == nil {
					out[name] = data
				}
			}
			break
		}
	}
	mem, err := d.derivedMemory(view, out, read)
	if err != nil {
		return nil, err
	}
	for name, data := range mem {
		if name == NotesFile && d.notesEdited(held[NotesFile]) {
			continue // a person's edit, not yet accepted: theirs until they accept it
		}
		if entryOf(data) != held[name] {
			out[name] = data
		}
	}
	return out, nil
}

// notesEdited reports whether working_memory.md in the folder differs from
// what the manifest lists (want): a person edited it and has not accepted
// the edit yet.
func (d *Dir) notesEdited(want FileEntry) bool {
	got, err := hashFile(d.path(NotesFile), -1)
	return err == nil && got != want
}

// derivedMemory derives working_memory.md and index.json from the view,
// with agent.json and snapshot.json as they are about to be (updates over
// the files held), reusing the index held.
func (d *Dir) derivedMemory(view []*journal.Event, updates map[string][]byte, read func(hex string) ([]byte, bool)) (map[string][]byte, error) {
	current := func(name string) []byte {
		if data, ok := updates[name]; ok {
			return data
		}
		data, _ := d.ReadFile(name)
		return data
	}
	agent, err := ParseAgent(current(AgentFile))
	if err != nil {
		agent = Agent{} // a damaged agent.json is verify's to report; the notes still derive
	}
	var files []memory.Item
	if agent.Memory != nil && agent.Memory.Workspace {
		if l, err := parsedListing(current(SnapshotFile)); err == nil {
			files = workspaceItems(l.snap, read)
		}
	}
	md, idx, err := memory.Derive(context.Background(), view, agent.EmbedderSpec(), files, d.heldIndex(current(IndexFile)))
	if err != nil {
		return nil, err
	}
	index := idx.Encode()
	d.indexMu.Lock()
	d.index, d.indexSum = idx, entryOf(index)
	d.indexMu.Unlock()
	return map[string][]byte{NotesFile: md, IndexFile: index}, nil
}

// heldIndex parses the index the folder holds, or takes the one this Dir
// derived last when those are its bytes: a 100,000-note index takes a
// second to parse, and every note appended derives it again.
func (d *Dir) heldIndex(data []byte) *memory.Index {
	d.indexMu.Lock()
	defer d.indexMu.Unlock()
	if d.index != nil && entryOf(data) == d.indexSum {
		return d.index
	}
	idx, _ := memory.ParseIndex(data)
	return idx
}

// Workspace files the index takes: text (UTF-8 without NUL) of at most
// maxIndexedFile bytes.
const maxIndexedFile = 1 << 20

// workspaceItems are the snapshot's text files, to index.
func workspaceItems(snap *Snapshot, read func(hex string) ([]byte, bool)) []memory.Item {
	var out []memory.Item
	for _, p := range slices.Sorted(maps.Keys(snap.Entries)) {
		e := snap.Entries[p]
		if e.Type != "file" || e.Size > maxIndexedFile {
			continue
		}
		h, err := ParseBlobCID(e.CID)
		if err != nil {
			continue
		}
		data, ok := read(h)
		if !ok || !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
			continue
		}
		out = append(out, memory.Item{File: p, CID: e.CID, Text: string(data)})
	}
	return out
}

// PutBlob stores data as a blob of the capsule, listed in its manifest,
// and returns its CID, for an event about to name it (an image a tool
// answered with). Written to a temporary file, fsynced and renamed: a
// crash leaves the blob whole or not at all.
func (d *Dir) PutBlob(data []byte) (string, error) {
	e, err := putBlob(d.dir, bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	if err := atomicfile.SyncDir(d.path(BlobDir)); err != nil {
		return "", err
	}
	if d.BlobSize(e.SHA256) != e.Size {
		d.deriveMu.Lock()
		defer d.deriveMu.Unlock()
		files, err := d.derivedUpdates(map[string]FileEntry{BlobPath(e.SHA256): e})
		if err != nil {
			return "", err
		}
		if err := d.commit(files, map[string]FileEntry{BlobPath(e.SHA256): e}); err != nil {
			return "", err
		}
	}
	return BlobCID(e.SHA256), nil
}
