package capsule

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filecopy"
)

// Snapshot is artifacts/snapshot.json: the workspace as a map from relative
// path ("/"-separated) to an entry. File bodies live in the blob store.
type Snapshot struct {
	Entries map[string]SnapshotEntry `json:"entries"`
}

// SnapshotEntry is one file or folder of a workspace snapshot. Mode holds
// the permission bits in octal ("0644"); files also carry their content's
// CID (raw, sha2-256) and size.
type SnapshotEntry struct {
	Type string `json:"type"` // "file" or "dir"
	Mode string `json:"mode"`
	CID  string `json:"cid,omitempty"`
	Size int64  `json:"size,omitempty"`
}

// SnapshotEventType is the journal event that records a new snapshot; its
// body is SnapshotEventBody.
const SnapshotEventType = "workspace.snapshot"

// SnapshotEventBody says which snapshot became current: the CID of the
// snapshot.json bytes (kept as a blob too), and its totals.
type SnapshotEventBody struct {
	Snapshot string `json:"snapshot"`
	Files    int    `json:"files"`
	Bytes    int64  `json:"bytes"`
}

// Encode returns snapshot.json's bytes: indented JSON, sorted, newline-
// terminated, exactly what json.MarshalIndent(s, "", "  ") and a newline
// are, written directly (through encoding/json, a 10,000-file listing took
// a tenth of a snapshot where 100 files changed).
func (s *Snapshot) Encode() ([]byte, error) {
	if s.Entries == nil {
		s.Entries = map[string]SnapshotEntry{}
	}
	if len(s.Entries) == 0 {
		return []byte("{\n  \"entries\": {}\n}\n"), nil
	}
	names := slices.Sorted(maps.Keys(s.Entries))
	b := make([]byte, 0, 32+len(names)*(len(`    "": {\n      "type": "file",\n      "mode": "0644",\n      "cid": "",\n      "size": \n    },\n`)+40+59+12))
	b = append(b, "{\n  \"entries\": {\n"...)
	for i, name := range names {
		e := s.Entries[name]
		b = append(b, "    "...)
		b = appendJSONString(b, name)
		b = append(b, ": {\n      \"type\": "...)
		b = appendJSONString(b, e.Type)
		b = append(b, ",\n      \"mode\": "...)
		b = appendJSONString(b, e.Mode)
		if e.CID != "" {
			b = append(b, ",\n      \"cid\": "...)
			b = appendJSONString(b, e.CID)
		}
		if e.Size != 0 {
			b = append(b, ",\n      \"size\": "...)
			b = strconv.AppendInt(b, e.Size, 10)
		}
		b = append(b, "\n    }"...)
		if i < len(names)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	return append(b, "  }\n}\n"...), nil
}

// appendJSONString appends s as encoding/json writes it: printable ASCII
// other than " \\ < > & as it is, anything else through json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// ParseSnapshot reads snapshot.json strictly: every path relative and
// clean, every entry a file with a blob CID or a folder, modes octal.
func ParseSnapshot(data []byte) (*Snapshot, error) {
	var s Snapshot
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("snapshot: %v", err)
	}
	if s.Entries == nil {
		return nil, fmt.Errorf("snapshot: entries is missing")
	}
	for p, e := range s.Entries {
		if err := checkWorkspacePath(p); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		if _, err := parseMode(e.Mode); err != nil {
			return nil, fmt.Errorf("snapshot: %s: %w", p, err)
		}
		switch e.Type {
		case "file":
			if _, err := ParseBlobCID(e.CID); err != nil {
				return nil, fmt.Errorf("snapshot: %s: %w", p, err)
			}
			if e.Size < 0 {
				return nil, fmt.Errorf("snapshot: %s: negative size", p)
			}
		case "dir":
			if e.CID != "" || e.Size != 0 {
				return nil, fmt.Errorf("snapshot: %s: a folder has no cid or size", p)
			}
		default:
			return nil, fmt.Errorf("snapshot: %s: type %q is neither file nor dir", p, e.Type)
		}
	}
	for p := range s.Entries {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if e, ok := s.Entries[d]; ok && e.Type != "dir" {
				return nil, fmt.Errorf("snapshot: %s is inside %s, which is not a folder", p, d)
			}
		}
	}
	return &s, nil
}

// Blobs returns the sha256 hex names of the blobs the snapshot refers to, sorted.
func (s *Snapshot) Blobs() []string {
	out := make([]string, 0, len(s.Entries))
	for _, e := range s.Entries {
		if e.Type == "file" {
			h, _ := ParseBlobCID(e.CID)
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func checkWorkspacePath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("empty path")
	case path.IsAbs(p) || filepath.IsAbs(p):
		return fmt.Errorf("absolute path %q", p)
	case path.Clean(p) != p:
		return fmt.Errorf("path %q is not clean", p)
	case p == ".." || len(p) > 2 && p[:3] == "../":
		return fmt.Errorf("path %q escapes the workspace", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == 0 || p[i] == '\\' {
			return fmt.Errorf("path %q holds a NUL or backslash", p)
		}
	}
	return nil
}

func parseMode(s string) (fs.FileMode, error) {
	if len(s) != 4 || s[0] != '0' {
		return 0, fmt.Errorf("mode %q is not four octal digits like 0644", s)
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %q is not octal", s)
	}
	return fs.FileMode(v), nil
}

func formatMode(m fs.FileMode) string { return fmt.Sprintf("%04o", m.Perm()) }

// takeSnapshot stores every file under workspace as a blob of the capsule
// folder dir and returns the snapshot and the entries of the blobs it wrote
// or found. Only regular files and folders are taken: a symbolic link, a
// device or a socket is refused with an error naming it.
// SnapshotOptions choose what of a workspace a snapshot leaves out, on
// top of what it always leaves out (see Excluded).
type SnapshotOptions struct {
	Exclude []string // patterns, as in .ternignore
	// Stored, if set, is told each blob the snapshot stores, as soon as
	// its file is whole under its name in the capsule (not yet durable:
	// the snapshot's blobs are synced together, then listed in the
	// manifest, which commits last), from several goroutines at once. A node names them to its peers (an offer), so
	// that they fetch a tree while the rest of it is still being stored.
	Stored func(sha256Hex string)
	// AllStored, if set with Stored, is called once every blob has been
	// told to Stored, before the snapshot's event is written: a node
	// sends its last offer, so that its peers have every blob named
	// before the event that names them reaches them.
	AllStored func()
	// Seen, if set, is what the last snapshot of this folder with it read
	// (see Seen): a file whose stat is the same is not read again.
	Seen *Seen
	// Stream, if set, is called with the size of each file the snapshot
	// is about to store, from several goroutines at once. What it returns
	// (nil for nothing) is given the file's bytes as the snapshot reads
	// them to hash them, in order and once, then told the blob's sha256.
	// A node pushes a large file's bytes to its peers as it is read.
	Stream func(size int64) BlobStream
}

// A BlobStream gets a file's bytes as a snapshot reads them (see
// SnapshotOptions.Stream). Its Write must not keep p; its errors stop
// nothing but itself.
type BlobStream interface {
	io.Writer
	// End says the bytes written hashed to sha256Hex when err is nil; the
	// snapshot stored them under that name.
	End(sha256Hex string, err error)
}

// IgnoreFile is the file in a workspace's root that lists patterns of
// paths its snapshots leave out, one per line (# starts a comment).
const IgnoreFile = ".ternignore"

// DefaultExclude is left out of every snapshot: a repository's history is
// not the agent's workspace, and it is often larger than the rest.
var DefaultExclude = []string{".git/"}

// excluded reports whether rel (slash-separated, relative to the
// workspace) matches one of patterns: a pattern ending in / matches
// folders only; a pattern with a / elsewhere matches the whole path
// (path.Match); any other matches the name at any depth ("*.log",
// "node_modules/").
func excluded(patterns []string, rel string, isDir bool) bool {
	for _, p := range patterns {
		dirOnly := strings.HasSuffix(p, "/")
		p = strings.TrimSuffix(p, "/")
		if p == "" || dirOnly && !isDir {
			continue
		}
		subject := path.Base(rel)
		if strings.Contains(p, "/") {
			subject, p = rel, strings.TrimPrefix(p, "/")
		}
		if ok, _ := path.Match(p, subject); ok {
			return true
		}
	}
	return false
}

// ErrBadWorkspace marks a snapshot refused for what the workspace is or
// holds (not a folder, a symbolic link or device inside, a pattern that is
// no pattern): the caller's input, not the capsule's fault.
var ErrBadWorkspace = errors.New("the workspace cannot be snapshotted")

// badWorkspace is a refusal that says what was wrong and is ErrBadWorkspace.
type badWorkspace struct{ error }

func (badWorkspace) Is(target error) bool { return target == ErrBadWorkspace }

// readIgnore returns the patterns of the workspace's .ternignore, if any.
func readIgnore(workspace string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(workspace, IgnoreFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := path.Match(strings.Trim(line, "/"), ""); err != nil {
			return nil, fmt.Errorf("%s line %d: %q is not a pattern: %v", IgnoreFile, i+1, line, err)
		}
		out = append(out, line)
	}
	return out, nil
}

// takeSnapshot stores the workspace's files as blobs of the capsule in dir,
// whose manifest lists held, and returns the snapshot, the blobs and the
// paths it left out. It walks
// the workspace first and refuses what it cannot store (a symbolic link, a
// device) before writing any blob, so a refused snapshot leaves none.
func takeSnapshot(dir string, held map[string]FileEntry, workspace string, opt SnapshotOptions) (*Snapshot, map[string]FileEntry, []string, error) {
	ignore, err := readIgnore(workspace)
	if err != nil {
		return nil, nil, nil, badWorkspace{fmt.Errorf("snapshot %s: %w", workspace, err)}
	}
	for _, p := range opt.Exclude {
		if _, err := path.Match(strings.Trim(p, "/"), ""); err != nil {
			return nil, nil, nil, badWorkspace{fmt.Errorf("snapshot: --exclude %q is not a pattern: %v", p, err)}
		}
	}
	patterns := append(append(slices.Clone(DefaultExclude), ignore...), opt.Exclude...)
	snap := &Snapshot{Entries: map[string]SnapshotEntry{}}
	type file struct {
		rel, path string
		mode      fs.FileMode
		size      int64
		info      fs.FileInfo
	}
	began := time.Now()
	var files []file
	var left []string
	err = filepath.WalkDir(workspace, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == workspace {
			return nil
		}
		rel, err := filepath.Rel(workspace, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if excluded(patterns, rel, d.IsDir()) {
			if d.IsDir() {
				left = append(left, rel+"/")
				return filepath.SkipDir
			}
			left = append(left, rel)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			snap.Entries[rel] = SnapshotEntry{Type: "dir", Mode: formatMode(info.Mode())}
			return nil
		case info.Mode().IsRegular():
			files = append(files, file{rel, p, info.Mode(), info.Size(), info})
			return nil
		}
		return badWorkspace{fmt.Errorf("snapshot %s: %s is a %s; only regular files and folders can be snapshotted (replace it with a copy, remove it, or leave it out with --exclude or %s)", workspace, rel, kindOf(info.Mode()), IgnoreFile)}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	prev := currentSnapshot(dir)
	entries := make([]FileEntry, len(files))
	stored := make([]bool, len(files))
	seen := opt.Seen.next(began)
	err = forEachAtOnce(len(files), snapshotWorkers, func(i int) error {
		f := files[i]
		if h, ok := opt.Seen.unchanged(f.path, f.info); ok {
			if was, ok := heldEntry(held, prev, f.rel, f.size); ok && was == h {
				entries[i] = FileEntry{SHA256: h, Size: f.size}
				seen.read(f.path, f.info, h)
				return nil
			}
		}
		if e, ok := unchangedBlob(held, prev, f.rel, f.path, f.size); ok {
			entries[i] = e
			seen.read(f.path, f.info, e.SHA256)
			return nil
		}
		r, err := os.Open(f.path)
		if err != nil {
			return err
		}
		entries[i], _, err = putFileBlob(dir, r, opt.Stream)
		r.Close()
		if err != nil {
			return fmt.Errorf("snapshot %s: %s: %w", workspace, f.rel, err)
		}
		stored[i] = true
		seen.read(f.path, f.info, entries[i].SHA256)
		if opt.Stored != nil {
			opt.Stored(entries[i].SHA256)
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	// The blobs written, made durable together: an fsync each was most of
	// the time of a tree of small files.
	var written []string
	for i, ok := range stored {
		if ok {
			written = append(written, filepath.Join(dir, filepath.FromSlash(BlobPath(entries[i].SHA256))))
		}
	}
	if err := atomicfile.SyncFiles(dir, written); err != nil {
		return nil, nil, nil, err
	}
	opt.Seen.keep(seen)
	blobs := map[string]FileEntry{}
	for i, f := range files {
		e := entries[i]
		blobs[BlobPath(e.SHA256)] = e
		snap.Entries[f.rel] = SnapshotEntry{Type: "file", Mode: formatMode(f.mode), CID: BlobCID(e.SHA256), Size: e.Size}
	}
	return snap, blobs, left, nil
}

// currentSnapshot is the capsule's snapshot.json in dir, or an empty one;
// shared (see parsedListing), never to be changed.
func currentSnapshot(dir string) *Snapshot {
	if data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(SnapshotFile))); err == nil {
		if l, err := parsedListing(data); err == nil {
			return l.snap
		}
	}
	return &Snapshot{}
}

// heldEntry returns the hash prev's file rel had, if it had size bytes
// and the capsule holds its blob whole: held (its manifest's files) lists
// it at that size. (A stat of the blob was half a snapshot's system calls
// where few files changed.)
func heldEntry(held map[string]FileEntry, prev *Snapshot, rel string, size int64) (string, bool) {
	p, ok := prev.Entries[rel]
	if !ok || p.Type != "file" || p.Size != size {
		return "", false
	}
	sum, err := ParseBlobCID(p.CID)
	if err != nil {
		return "", false
	}
	if e, ok := held[BlobPath(sum)]; !ok || e.Size != size {
		return "", false
	}
	return sum, true
}

// unchangedBlob returns the entry of the file at path (rel in the
// workspace, of size bytes) if prev lists it at that size and its bytes
// still hash to the blob prev names, which dir holds: a snapshot of a
// tree where few files changed reads each file once and writes only the
// changed ones, instead of storing every file again.
func unchangedBlob(held map[string]FileEntry, prev *Snapshot, rel, path string, size int64) (FileEntry, bool) {
	sum, ok := heldEntry(held, prev, rel, size)
	if !ok {
		return FileEntry{}, false
	}
	if fileReread != nil {
		fileReread()
	}
	e, err := hashFile(path, -1)
	if err != nil || e.SHA256 != sum {
		return FileEntry{}, false
	}
	return e, true
}

// snapshotWorkers is how many files a snapshot stores at once: a small
// file costs mostly its fsync, and fsyncs issued together share the
// filesystem's journal commits.
const snapshotWorkers = 8

// forEachAtOnce calls f(0) … f(n-1), at most workers at a time, and
// returns the first error; after one, the calls not yet started are not.
func forEachAtOnce(n, workers int, f func(i int) error) error {
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
		failed   atomic.Bool
		wg       sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { firstErr = err; failed.Store(true) })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// Materialize writes the capsule's workspace snapshot to out, which must
// not exist. Every blob is copied by filecopy (a reflink where the
// filesystem allows it, else copy_file_range) and hash-checked as it is
// read; out appears only when the whole workspace has been written (it is
// built in a sibling staging folder and renamed).
func (c *Capsule) Materialize(out string) error {
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("materialize: %s already exists; name a new folder", out)
	}
	snap, err := c.Snapshot()
	if err != nil {
		return fmt.Errorf("materialize: %w", err)
	}
	staging, lock, err := newStaging(out)
	if err != nil {
		return fmt.Errorf("materialize: %w", err)
	}
	defer lock.Unlock()
	defer os.RemoveAll(staging)

	paths := make([]string, 0, len(snap.Entries))
	for p := range snap.Entries {
		paths = append(paths, p)
	}
	sort.Strings(paths) // parents before children
	for _, p := range paths {
		e := snap.Entries[p]
		dst := filepath.Join(staging, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("materialize: %w", err)
		}
		if e.Type == "dir" {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fmt.Errorf("materialize: %w", err)
			}
			continue
		}
		if err := c.copyBlob(e, dst); err != nil {
			return fmt.Errorf("materialize %s: %w", p, err)
		}
	}
	// Folder modes last, deepest first, so a read-only folder is still filled.
	for i := len(paths) - 1; i >= 0; i-- {
		e := snap.Entries[paths[i]]
		if e.Type == "dir" {
			mode, _ := parseMode(e.Mode)
			if err := os.Chmod(filepath.Join(staging, filepath.FromSlash(paths[i])), mode); err != nil {
				return fmt.Errorf("materialize: %w", err)
			}
		}
	}
	lock.Unlock()
	if err := os.Rename(staging, out); err != nil {
		return fmt.Errorf("materialize: %w", err)
	}
	return atomicfile.SyncDir(filepath.Dir(out))
}

func (c *Capsule) copyBlob(e SnapshotEntry, dst string) error {
	sum, err := ParseBlobCID(e.CID)
	if err != nil {
		return err
	}
	rc, size, err := c.OpenBlob(sum)
	if err != nil {
		return fmt.Errorf("blob %s: %w", e.CID, err)
	}
	defer rc.Close()
	mode, _ := parseMode(e.Mode)
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	var n int64
	if src, ok := rc.(*os.File); ok { // a folder's blob: reflinked where the filesystem allows
		_, err = filecopy.Copy(f, src, size, h)
		n = size
	} else {
		n, err = io.Copy(io.MultiWriter(f, h), rc)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum || n != e.Size {
		return fmt.Errorf("blob %s: %w (got sha256 %s, %d bytes)", e.CID, ErrHashMismatch, got, n)
	}
	return os.Chmod(dst, mode)
}

// UpdateWorkspace brings the folder dir, which holds the workspace of
// snapshot have as Materialize (or an earlier UpdateWorkspace) wrote it and
// nothing else has changed since, to the capsule's current snapshot, and
// returns that snapshot. Only what differs is written: files whose blob or
// mode changed (each hash-checked as it is copied, written beside its
// final name and renamed over it) and folders; entries the snapshot no
// longer has are removed. With have nil, dir must not exist, and the whole
// workspace is materialized there. It is for a workspace kept up to date
// across snapshots (a node preparing an agent that migrates to it); a
// crash in the middle leaves dir between the two snapshots, so the caller
// must materialize anew after one.
func (c *Capsule) UpdateWorkspace(dir string, have *Snapshot) (*Snapshot, error) {
	snap, err := c.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("update workspace: %w", err)
	}
	if have == nil {
		return snap, c.Materialize(dir)
	}
	// Remove what is gone or changed kind, deepest first.
	old := make([]string, 0, len(have.Entries))
	for p := range have.Entries {
		old = append(old, p)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(old)))
	for _, p := range old {
		e, keep := snap.Entries[p]
		if keep && e.Type == have.Entries[p].Type {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			return nil, fmt.Errorf("update workspace: %w", err)
		}
	}
	paths := make([]string, 0, len(snap.Entries))
	for p := range snap.Entries {
		paths = append(paths, p)
	}
	sort.Strings(paths) // parents before children
	for _, p := range paths {
		e := snap.Entries[p]
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if e.Type == "dir" {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return nil, fmt.Errorf("update workspace: %w", err)
			}
			continue
		}
		if prev, ok := have.Entries[p]; ok && prev == e {
			continue
		}
		tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+atomicfile.TempPrefix+"update")
		os.Remove(tmp)
		if err := c.copyBlob(e, tmp); err != nil {
			os.Remove(tmp)
			return nil, fmt.Errorf("update workspace %s: %w", p, err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			return nil, fmt.Errorf("update workspace: %w", err)
		}
	}
	for i := len(paths) - 1; i >= 0; i-- {
		if e := snap.Entries[paths[i]]; e.Type == "dir" {
			mode, _ := parseMode(e.Mode)
			if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(paths[i])), mode); err != nil {
				return nil, fmt.Errorf("update workspace: %w", err)
			}
		}
	}
	return snap, atomicfile.SyncDir(dir)
}
