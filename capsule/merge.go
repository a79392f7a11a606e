package capsule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

// ErrDiverged means two copies of a capsule differ in a file that tern has
// no rule to merge (a hand edit, since tern itself never changes it).
var ErrDiverged = errors.New("the copies differ in a file tern cannot merge")

// MergeResult describes a merge.
type MergeResult struct {
	Events int
	Forks  []journal.Fork // quarantined forks in the merged journal
}

// Merge writes the union of two copies of one capsule to out, a folder that
// must not exist, or a tar if out ends in ".tar". Journals merge as a set
// union in total order; blobs merge as a union; the workspace snapshot is
// the one named by the latest workspace.snapshot event, an Editable file
// differing between the copies is its latest accepted edit; the holder is
// the one with the higher epoch. Other files must be equal in both copies.
// Both inputs must verify (forks aside, which are carried over and
// reported). Merge is commutative and idempotent: the result's bytes do not
// depend on the order of the inputs or on the machine that runs it.
func Merge(a, b *Capsule, out string) (*MergeResult, error) {
	if a.ID() != b.ID() {
		return nil, fmt.Errorf("merge: %s holds agent %s but %s holds agent %s; only copies of one agent merge", a.Path, a.ID(), b.Path, b.ID())
	}
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("merge: %s already exists; name a new output", out)
	}
	for _, c := range []*Capsule{a, b} {
		if err := verifyForMerge(c); err != nil {
			return nil, err
		}
	}
	ea, err := a.Journal()
	if err != nil {
		return nil, err
	}
	eb, err := b.Journal()
	if err != nil {
		return nil, err
	}
	events := journal.Merge(ea, eb)

	view, _ := journal.Readable(events)
	files := map[string][]byte{}
	for _, name := range []string{AgentFile, EnvironmentFile} {
		data, err := mergedFile(a, b, view, name)
		if err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
		files[name] = data
	}
	snap, err := mergedSnapshot(a, b, view)
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	files[SnapshotFile] = snap
	if files[NotesFile], files[IndexFile], err = mergedMemory(a, b, view, files); err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	var jbuf bytes.Buffer
	for _, e := range events {
		jbuf.Write(e.Line())
		jbuf.WriteByte('\n')
	}
	files[JournalFile] = jbuf.Bytes()

	m := &Manifest{ID: a.ID(), Holder: laterHolder(a.Manifest().Holder, b.Manifest().Holder)}
	addBlobs := func(staging string) (map[string]FileEntry, error) {
		blobs := map[string]FileEntry{}
		for _, c := range []*Capsule{a, b} {
			for name, e := range c.Manifest().Files {
				if blobName(name) == "" || blobs[name] == e {
					continue
				}
				if err := copyBlobFile(c, name, e, filepath.Join(staging, filepath.FromSlash(name))); err != nil {
					return nil, err
				}
				blobs[name] = e
			}
		}
		return blobs, nil
	}
	res := &MergeResult{Events: len(events), Forks: journal.Forks(events)}
	if !strings.HasSuffix(out, ".tar") {
		return res, writeNewCapsule(out, m, files, addBlobs)
	}
	tmp, lock, err := newStaging(out)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "capsule")
	if err := writeNewCapsule(dir, m, files, addBlobs); err != nil {
		return nil, err
	}
	c, err := Open(dir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return res, PackFile(c, out, PackOptions{})
}

// verifyForMerge refuses a damaged input; forks are not damage here.
func verifyForMerge(c *Capsule) error {
	rep, err := Verify(c.Path, VerifyOptions{})
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	for _, p := range rep.Issues() {
		if !errors.Is(p.Err, journal.ErrFork) {
			return fmt.Errorf("merge: %s does not verify: %s; run tern capsule verify %s", c.Path, p, c.Path)
		}
	}
	return nil
}

// mergedSnapshot returns the snapshot.json the merged capsule holds: the
// one named by the latest workspace.snapshot event of the readable
// journal whose listing and files either copy holds (a copy taken without
// its blobs holds none yet, and so an empty one until they arrive, as
// capsule.Dir does); with no such event, the copies' identical
// snapshot.json.
func mergedSnapshot(a, b *Capsule, view []*journal.Event) ([]byte, error) {
	if slices.ContainsFunc(view, func(e *journal.Event) bool { return e.Type == SnapshotEventType }) {
		held := func(h string) bool {
			_, inA := a.Manifest().Files[BlobPath(h)]
			_, inB := b.Manifest().Files[BlobPath(h)]
			return inA || inB
		}
		return latestWholeSnapshot(view, held, func(cid string, e *journal.Event) ([]byte, error) { return blobContent(cid, e, a, b) })
	}
	same, data, err := sameBytes(a, b, SnapshotFile)
	if err != nil {
		return nil, err
	}
	if !same {
		return nil, fmt.Errorf("%s: %w", SnapshotFile, ErrDiverged)
	}
	return data, nil
}

// mergedMemory derives the merged capsule's working memory and index from
// the merged view, reusing the vectors of both copies' indexes.
func mergedMemory(a, b *Capsule, view []*journal.Event, files map[string][]byte) (md, index []byte, err error) {
	agent, err := ParseAgent(files[AgentFile])
	if err != nil {
		return nil, nil, err
	}
	prev := memory.MergeIndexes(indexOf(a), indexOf(b))
	var items []memory.Item
	if agent.Memory != nil && agent.Memory.Workspace {
		if snap, err := ParseSnapshot(files[SnapshotFile]); err == nil {
			items = workspaceItems(snap, func(h string) ([]byte, bool) {
				for _, c := range []*Capsule{a, b} {
					if want, ok := c.Manifest().Files[BlobPath(h)]; ok {
						if rc, _, err := c.OpenBlob(h); err == nil {
							if data, err := readAllClose(rc); err == nil && entryOf(data) == want {
								return data, true
							}
						}
					}
				}
				return nil, false
			})
		}
	}
	md, idx, err := memory.Derive(context.Background(), view, agent.EmbedderSpec(), items, prev)
	if err != nil {
		return nil, nil, err
	}
	return md, idx.Encode(), nil
}

// indexOf is c's index, or nil when it has none that parses.
func indexOf(c *Capsule) *memory.Index {
	data, err := c.ReadFile(IndexFile)
	if err != nil {
		return nil
	}
	idx, _ := memory.ParseIndex(data)
	return idx
}

// mergedFile returns the merged content of a file that is equal in both
// copies or, for an editable file, the latest accepted edit.
func mergedFile(a, b *Capsule, view []*journal.Event, name string) ([]byte, error) {
	same, data, err := sameBytes(a, b, name)
	if err != nil || same {
		return data, err
	}
	if isEditable(name) {
		edit, err := latestEdit(view, name, a, b)
		if err != nil || edit != nil {
			return edit, err
		}
	}
	return nil, fmt.Errorf("%s: %w; make the two copies agree on it (for %v: edit one and run tern capsule accept), then merge again", name, ErrDiverged, Editable)
}

// laterHolder picks the holder with the higher epoch; on a tie, the smaller
// peer ID, so that the choice does not depend on argument order.
func laterHolder(a, b Holder) Holder {
	switch {
	case a.Epoch != b.Epoch:
		if a.Epoch > b.Epoch {
			return a
		}
		return b
	case a.Peer <= b.Peer:
		return a
	}
	return b
}

// copyBlobFile copies one blob from c to dst, checking its hash.
func copyBlobFile(c *Capsule, name string, want FileEntry, dst string) error {
	rc, _, err := c.src.open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	h := newHashingReader(rc)
	_, err = io.Copy(f, h)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && h.entry() != want {
		err = fmt.Errorf("%s in %s: %w", name, c.Path, ErrHashMismatch)
	}
	return err
}
