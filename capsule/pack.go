package capsule

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

// epoch0 is the modification time of every tar entry, so that packing is
// reproducible.
var epoch0 = time.Unix(0, 0).UTC()

// PackOptions tune Pack. With Signer set, the packed manifest carries an
// ed25519 signature by that machine.
type PackOptions struct {
	Signer journal.Signer

	// BlobsUpTo, if not zero, leaves out every blob over that many bytes
	// (a negative value leaves out all): the capsule is packed as a copy
	// holding only the blobs kept has it, with the latest snapshot whose
	// files are all kept (an empty one if none is) and the memory files
	// derived for it. It is a whole capsule, which wants the blobs left
	// out: the first copy a node takes from a peer, whose large blobs then
	// come one by one, each verified and resumable (protocol.FetchBlob).
	BlobsUpTo int64
}

// Pack writes the capsule as a tar to w. The tar holds manifest.json first,
// then the layout's folders and files in sorted order, at its root, with
// fixed owner, mode and time, in USTAR format (PAX for a file of 8 GiB or
// more); the journal is written in its total order and sealed whole in a
// fresh manifest. Two capsules with
// the same files and the same event set pack to identical bytes, on any
// machine. Every file is hash-checked against the manifest as it is
// copied; a damaged capsule is refused, with an error naming the file.
func Pack(c *Capsule, w io.Writer, opt PackOptions) error {
	p, err := planPack(c, opt)
	if err != nil {
		return err
	}
	m, mdata, rewritten := &p.manifest, p.manifestData, p.rewritten

	tw := tar.NewWriter(w)
	if err := writeTarFile(tw, ManifestFile, int64(len(mdata)), bytes.NewReader(mdata)); err != nil {
		return err
	}
	type item struct {
		name string
		dir  bool
	}
	var items []item
	for _, d := range dirs {
		items = append(items, item{d + "/", true})
	}
	for _, n := range m.Names() {
		items = append(items, item{n, false})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].name < items[j].name })
	for _, it := range items {
		switch {
		case it.dir:
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: it.name, Mode: 0o755, ModTime: epoch0, Format: tar.FormatUSTAR})
		case rewritten[it.name] != nil:
			data := rewritten[it.name]
			err = writeTarFile(tw, it.name, int64(len(data)), bytes.NewReader(data))
		default:
			err = copyChecked(tw, c, it.name, m.Files[it.name])
		}
		if err != nil {
			return fmt.Errorf("pack: %w", err)
		}
	}
	return tw.Close()
}

// packPlan is what Pack writes of a capsule: a fresh manifest (and its
// bytes), and the files whose bytes it rewrites rather than copies (the
// journal in its total order; with BlobsUpTo, the files derived for the
// blobs kept).
type packPlan struct {
	manifest     Manifest
	manifestData []byte
	rewritten    map[string][]byte
}

// planPack reads what Pack and Copy write of c.
func planPack(c *Capsule, opt PackOptions) (*packPlan, error) {
	raw, err := c.ReadFile(JournalFile)
	if err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	if sealed := c.Manifest().Files[JournalFile]; int64(len(raw)) < sealed.Size || entryOf(raw[:sealed.Size]) != sealed {
		return nil, fmt.Errorf("pack: %s: %w: its sealed part does not match the manifest; run tern capsule verify", JournalFile, ErrHashMismatch)
	}
	events, bad, _ := journal.Decode(raw)
	if len(bad) > 0 {
		return nil, fmt.Errorf("pack: %s: %w", JournalFile, bad[0])
	}
	events = journal.Merge(events, nil) // total order, each id once: a repeated line is the same event
	var jbuf bytes.Buffer
	for _, e := range events {
		jbuf.Write(e.Line())
		jbuf.WriteByte('\n')
	}
	jdata := jbuf.Bytes()

	m := *c.Manifest()
	m.Signature = nil
	m.Files = make(map[string]FileEntry, len(c.Manifest().Files))
	for k, v := range c.Manifest().Files {
		if opt.BlobsUpTo == 0 || blobName(k) == "" || v.Size <= opt.BlobsUpTo {
			m.Files[k] = v
		}
	}
	m.Files[JournalFile] = entryOf(jdata)
	rewritten := map[string][]byte{JournalFile: jdata}
	if opt.BlobsUpTo != 0 {
		if err := withBlobsKept(c, m.Files, events, rewritten); err != nil {
			return nil, fmt.Errorf("pack: %w", err)
		}
		for name, data := range rewritten {
			m.Files[name] = entryOf(data)
		}
	}
	if opt.Signer != nil {
		if err := m.Sign(opt.Signer); err != nil {
			return nil, err
		}
	}
	mdata, err := m.Encode()
	if err != nil {
		return nil, err
	}
	return &packPlan{manifest: m, manifestData: mdata, rewritten: rewritten}, nil
}

// withBlobsKept adds to files the layout files of c as a copy of it
// holding only the blobs kept lists has them (see PackOptions.BlobsUpTo):
// the latest snapshot whose files are all kept, and the notes and index
// derived for it, reusing c's index's vectors.
func withBlobsKept(c *Capsule, kept map[string]FileEntry, events []*journal.Event, files map[string][]byte) error {
	agentData, err := c.ReadFile(AgentFile)
	if err != nil {
		return err
	}
	agent, err := ParseAgent(agentData)
	if err != nil {
		return fmt.Errorf("%s: %w", AgentFile, err)
	}
	view, _ := journal.Readable(events)
	held := func(h string) bool { _, ok := kept[BlobPath(h)]; return ok }
	snap, err := latestWholeSnapshot(view, held, func(cid string, e *journal.Event) ([]byte, error) { return blobContent(cid, e, c) })
	if err != nil {
		return err
	}
	files[SnapshotFile] = snap
	var items []memory.Item
	if agent.Memory != nil && agent.Memory.Workspace {
		if s, err := ParseSnapshot(snap); err == nil {
			items = workspaceItems(s, func(h string) ([]byte, bool) {
				if !held(h) {
					return nil, false
				}
				rc, _, err := c.OpenBlob(h)
				if err != nil {
					return nil, false
				}
				data, err := readAllClose(rc)
				return data, err == nil && entryOf(data) == kept[BlobPath(h)]
			})
		}
	}
	md, idx, err := memory.Derive(context.Background(), view, agent.EmbedderSpec(), items, indexOf(c))
	if err != nil {
		return err
	}
	files[NotesFile], files[IndexFile] = md, idx.Encode()
	return nil
}

// latestWholeSnapshot returns the content of the latest snapshot of view
// whose listing and files are all held (read names a listing's content,
// by CID and the event that names it), or an empty snapshot if none is.
func latestWholeSnapshot(view []*journal.Event, held func(sha256Hex string) bool, read func(cid string, e *journal.Event) ([]byte, error)) ([]byte, error) {
	for i := len(view) - 1; i >= 0; i-- {
		e := view[i]
		if e.Type != SnapshotEventType {
			continue
		}
		var body SnapshotEventBody
		if err := json.Unmarshal(e.Body, &body); err != nil {
			return nil, fmt.Errorf("event %s: bad %s body: %v", e.ID, SnapshotEventType, err)
		}
		if h, err := ParseBlobCID(body.Snapshot); err != nil || !held(h) {
			continue
		}
		data, err := read(body.Snapshot, e)
		if err != nil {
			return nil, err
		}
		l, err := parsedListing(data)
		if err != nil {
			return nil, fmt.Errorf("snapshot blob %s: %w", body.Snapshot, err)
		}
		if !slices.ContainsFunc(l.blobs, func(h string) bool { return !held(h) }) {
			return data, nil
		}
	}
	return (&Snapshot{}).Encode()
}

// maxUSTARSize is the largest file a USTAR header can describe (eleven
// octal digits): 8 GiB - 1.
const maxUSTARSize = 1<<33 - 1

// tarFormat is the header format of a file of size bytes: USTAR, or PAX
// (a USTAR header after an extended header holding the size) when USTAR
// cannot hold the size. Both are deterministic.
func tarFormat(size int64) tar.Format {
	if size > maxUSTARSize {
		return tar.FormatPAX
	}
	return tar.FormatUSTAR
}

func writeTarFile(tw *tar.Writer, name string, size int64, r io.Reader) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: epoch0, Format: tarFormat(size)}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, r)
	if err == nil && n != size {
		err = fmt.Errorf("%s changed size while it was packed", name)
	}
	return err
}

// copyChecked copies one file into the tar while hashing it, and fails if
// it does not match its manifest entry.
func copyChecked(tw *tar.Writer, c *Capsule, name string, want FileEntry) error {
	rc, err := openPacked(c, name, want)
	if err != nil {
		return err
	}
	defer rc.Close()
	h := newHashingReader(rc)
	if err := writeTarFile(tw, name, want.Size, h); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if got := h.entry(); got != want {
		return fmt.Errorf("%s: %w: the manifest lists %d bytes with sha256 %s; run tern capsule verify", name, ErrHashMismatch, want.Size, want.SHA256)
	}
	return nil
}

// openPacked opens the content Pack and Copy take of a file of c that is
// not rewritten: a layout file as ReadFile reads it (a committed update
// not yet installed included), refused if edited by hand and not
// accepted; any other file (a blob) from c's folder or tar.
func openPacked(c *Capsule, name string, want FileEntry) (io.ReadCloser, error) {
	if name == AgentFile || name == EnvironmentFile || name == SnapshotFile || name == NotesFile || name == IndexFile {
		data, err := c.ReadFile(name)
		if err == nil && isEditable(name) && entryOf(data) != want {
			return nil, fmt.Errorf("%s was edited by hand and the edit not accepted: run tern capsule accept %s first (or undo the edit); nothing was packed", name, c.Path)
		}
		return io.NopCloser(bytes.NewReader(data)), err
	}
	rc, _, err := c.src.open(name)
	return rc, err
}

// PackFile packs the capsule to the file at out atomically: a crash or an
// error leaves no partial tar under that name, and what a killed run for
// the same out left beside it is removed first.
func PackFile(c *Capsule, out string, opt PackOptions) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	atomicfile.RemoveLeftovers(abs)
	return atomicfile.Write(abs, 0o644, func(w io.Writer) error {
		bw := newBufferedWriter(w)
		if err := Pack(c, bw, opt); err != nil {
			return err
		}
		return bw.Flush()
	})
}
