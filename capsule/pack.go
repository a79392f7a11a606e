package capsule

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"time"

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

	// WithoutBlobs packs the capsule as a copy that holds none of its
	// blobs has it: no blob entries, an empty workspace snapshot, and the
	// memory files derived for it. It is a whole capsule, which wants
	// every blob its journal names: the first copy a node takes from a
	// peer, whose blobs then come one by one, each verified and resumable
	// (protocol.FetchBlob).
	WithoutBlobs bool
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
	raw, err := c.ReadFile(JournalFile)
	if err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	if sealed := c.Manifest().Files[JournalFile]; int64(len(raw)) < sealed.Size || entryOf(raw[:sealed.Size]) != sealed {
		return fmt.Errorf("pack: %s: %w: its sealed part does not match the manifest; run tern capsule verify", JournalFile, ErrHashMismatch)
	}
	events, bad, _ := journal.Decode(raw)
	if len(bad) > 0 {
		return fmt.Errorf("pack: %s: %w", JournalFile, bad[0])
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
		if !opt.WithoutBlobs || blobName(k) == "" {
			m.Files[k] = v
		}
	}
	m.Files[JournalFile] = entryOf(jdata)
	rewritten := map[string][]byte{JournalFile: jdata}
	if opt.WithoutBlobs {
		if err := withoutBlobs(c, events, rewritten); err != nil {
			return fmt.Errorf("pack: %w", err)
		}
		for name, data := range rewritten {
			m.Files[name] = entryOf(data)
		}
	}
	if opt.Signer != nil {
		if err := m.Sign(opt.Signer); err != nil {
			return err
		}
	}
	mdata, err := m.Encode()
	if err != nil {
		return err
	}

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

// withoutBlobs adds to files the layout files of c as a copy of it
// holding no blob has them (see PackOptions.WithoutBlobs): an empty
// snapshot, and the notes and index derived from events with no workspace
// file, reusing c's index's vectors.
func withoutBlobs(c *Capsule, events []*journal.Event, files map[string][]byte) error {
	agentData, err := c.ReadFile(AgentFile)
	if err != nil {
		return err
	}
	agent, err := ParseAgent(agentData)
	if err != nil {
		return fmt.Errorf("%s: %w", AgentFile, err)
	}
	if files[SnapshotFile], err = (&Snapshot{}).Encode(); err != nil {
		return err
	}
	view, _ := journal.Readable(events)
	md, idx, err := memory.Derive(context.Background(), view, agent.EmbedderSpec(), nil, indexOf(c))
	if err != nil {
		return err
	}
	files[NotesFile], files[IndexFile] = md, idx.Encode()
	return nil
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
	var (
		rc  io.ReadCloser
		err error
	)
	if name == AgentFile || name == EnvironmentFile || name == SnapshotFile || name == NotesFile || name == IndexFile {
		data, rerr := c.ReadFile(name) // picks up a committed update not yet installed
		if rerr == nil && isEditable(name) && entryOf(data) != want {
			return fmt.Errorf("%s was edited by hand and the edit not accepted: run tern capsule accept %s first (or undo the edit); nothing was packed", name, c.Path)
		}
		rc, err = io.NopCloser(bytes.NewReader(data)), rerr
	} else {
		rc, _, err = c.src.open(name)
	}
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

// PackFile packs the capsule to the file at out atomically: a crash or an
// error leaves no partial tar under that name, and what a killed run for
// the same out left beside it is removed first.
func PackFile(c *Capsule, out string, opt PackOptions) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	removeLeftovers(abs)
	return WriteAtomic(abs, 0o644, func(w io.Writer) error {
		bw := newBufferedWriter(w)
		if err := Pack(c, bw, opt); err != nil {
			return err
		}
		return bw.Flush()
	})
}
