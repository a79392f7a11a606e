package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filecopy"
	"github.com/tern-dev/tern/node"
	ternproto "github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/store"
)

// MaxBlobSize bounds Blob's size: the bytes are held in memory.
const MaxBlobSize = 4 << 30

// BlobResult is what Blob measured. Rates are in MB/s (10^6 bytes a
// second) of the blob's bytes.
type BlobResult struct {
	Bytes     int64  `json:"bytes"`     // the blob's size
	Transport string `json:"transport"` // what the nodes and the bare stream ran on (Options.Transport)

	// EndToEnd is node B fetching the blob from node A in one sync round
	// (node.Node.SyncPeer): the exchange that brings the snapshot event,
	// then the snapshot's listing blob and the file's blob over
	// /tern/blob/1.0.0, each chunk hash-checked, written to
	// $TERN_HOME/partial, fsynced, the whole blob hash-checked and adopted
	// into the capsule.
	EndToEnd        float64 `json:"end_to_end_mbps"`
	EndToEndSeconds float64 `json:"end_to_end_seconds"`
	BytesReceived   int64   `json:"bytes_received"` // blob bytes B's /metrics counted in that round: the file and the listing

	// Libp2p is the same bytes on one stream between two plain go-libp2p
	// hosts (default security and muxers, on 127.0.0.1 over the
	// measurement's transport), written
	// in chunks of protocol.BlobChunk and read into a buffer of that size.
	Libp2p float64 `json:"libp2p_mbps"`
	// Disk is writing the same bytes to a new file in the nodes' folder,
	// in chunks of protocol.BlobChunk, with one fsync at the end.
	Disk float64 `json:"disk_mbps"`
	// SHA256 is hashing the bytes in memory on one goroutine; not a limit
	// of the ratio, shown to explain it (the fetch hashes every byte).
	SHA256 float64 `json:"sha256_mbps"`

	Limit string  `json:"limit"` // "libp2p" or "disk": the slower of the two limits
	Ratio float64 `json:"ratio"` // EndToEnd over the slower limit

	// FirstCopy is a new capsule holding the same bytes as a workspace
	// file reaching node B, which lacks it: from node A's import
	// (node.Node.ImportFolder, which pushes the blob to B as it copies it
	// and offers the capsule once it holds it) until B holds it
	// with no blob wanted. FirstCopyRatio is its rate over the slower limit.
	FirstCopySeconds float64 `json:"first_copy_seconds"`
	FirstCopyRatio   float64 `json:"first_copy_ratio"`
	// FirstCopyOfLibp2p is the first copy's rate over the bare libp2p
	// stream of the same transport alone.
	FirstCopyOfLibp2p float64 `json:"first_copy_of_libp2p"`
	// FromFolder is the same first copy timed as a person does it, and as
	// Syncthing is timed from the move of a file into its folder: from the
	// file in a folder, through a new agent whose workspace it becomes
	// (tern capsule snapshot: SnapshotSeconds) and the node's import, until
	// B holds it all. FirstCopySeconds is its part from the import on.
	FromFolderSeconds float64 `json:"from_folder_seconds"`
	SnapshotSeconds   float64 `json:"snapshot_seconds"`
	// ThroughNode is the same again in one pass on A: from the file in a
	// folder, through a new, empty agent node A imports and then
	// snapshots the folder into (node.Node.Snapshot, as tern capsule
	// snapshot AGENT DIR does: each file read and hashed once and written
	// once, or reflinked, straight into A's store), until B holds it all.
	// ThroughNodeSnapshotSeconds is its snapshot.
	ThroughNodeSeconds         float64 `json:"through_node_seconds"`
	ThroughNodeSnapshotSeconds float64 `json:"through_node_snapshot_seconds"`
	// Import is a store of its own, on node A's disk, taking that capsule
	// folder (Store.ImportFolder: node A's import, less the push of its
	// blob to B that FirstCopy includes);
	// Copy is copying the same folder file by file with an fsync of each
	// file and folder, as cp -r and sync do. ImportRatio is Copy over
	// Import (goal >= 0.8).
	ImportSeconds float64 `json:"import_seconds"`
	CopySeconds   float64 `json:"copy_seconds"`
	ImportRatio   float64 `json:"import_ratio"`
	// ImportCopy is how that import copied the blobs into the store
	// (filecopy.Methods: reflink, copy_file_range, o_direct or copy), as the filesystem of
	// the nodes' folder allowed.
	ImportCopy filecopy.Method `json:"import_copy"`
}

// Blob measures end-to-end blob transfer between two nodes on 127.0.0.1
// against its two limits, all on the same size random bytes, in one run:
// first a bare libp2p stream, then the disk, then the nodes.
//
// The nodes hold one capsule. A workspace snapshot of one file of size
// bytes is taken outside them and merged into A's copy only, so that B
// learns of it by sync and wants its blobs, as it would if A's agent had
// just snapshotted its workspace. The round is run by the caller's
// goroutine, so its time is the whole round and nothing else. Blob fails
// if B still wants a blob afterwards or the file's blob on B is not the
// size it should be.
func Blob(ctx context.Context, size int64, opt Options) (res BlobResult, err error) {
	if size <= 0 || size > MaxBlobSize {
		return res, fmt.Errorf("bench blob: size %d: want 1 byte to %d", size, int64(MaxBlobSize))
	}
	res.Bytes, res.Transport = size, opt.transportName()
	dir, err := opt.tempDir("blob")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{'t', 'e', 'r', 'n'}).Read(data)

	if res.Libp2p, err = libp2pRate(ctx, data, opt.listen()); err != nil {
		return res, fmt.Errorf("bench blob: bare libp2p: %w", err)
	}
	if res.Disk, err = diskRate(dir, data); err != nil {
		return res, fmt.Errorf("bench blob: disk: %w", err)
	}
	start := time.Now()
	sum := sha256.Sum256(data)
	res.SHA256 = rate(size, time.Since(start))
	if err := nodesBlob(ctx, dir, data, hex.EncodeToString(sum[:]), &res, opt); err != nil {
		return res, fmt.Errorf("bench blob: nodes: %w", err)
	}
	res.Limit, res.Ratio = "libp2p", res.EndToEnd/res.Libp2p
	if res.Disk < res.Libp2p {
		res.Limit, res.Ratio = "disk", res.EndToEnd/res.Disk
	}
	limit := min(res.Disk, res.Libp2p)
	firstCopy := rate(size, time.Duration(res.FirstCopySeconds*float64(time.Second)))
	res.FirstCopyRatio, res.FirstCopyOfLibp2p = firstCopy/limit, firstCopy/res.Libp2p
	res.ImportRatio = res.CopySeconds / res.ImportSeconds
	return res, nil
}

// rate is n bytes in d as MB/s.
func rate(n int64, d time.Duration) float64 {
	return float64(n) / 1e6 / max(d.Seconds(), 1e-9)
}

// nodesBlob runs the end-to-end part of Blob; sha256Hex is data's.
func nodesBlob(ctx context.Context, dir string, data []byte, sha256Hex string, res *BlobResult, opt Options) (err error) {
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(ws, "blob.bin"), data, 0o644); err != nil {
		return err
	}
	a, err := startNode(home(dir, 0), idleInterval, opt)
	if err != nil {
		return err
	}
	b, err := startNode(home(dir, 1), idleInterval, opt)
	if err != nil {
		a.Close()
		return err
	}
	defer closeAll(&err, a, b)
	src := filepath.Join(dir, "capsule")
	agent, err := newCapsule(src, "blob", a.Identity())
	if err != nil {
		return err
	}
	for _, n := range []*node.Node{a, b} {
		if _, _, err := n.Store().Import(src); err != nil {
			return err
		}
	}
	if err := pair(a, b); err != nil {
		return err
	}
	if err := connect(ctx, a, b); err != nil {
		return err
	}
	// Let the round the connection started end (nothing to move: the
	// capsule list shows both hold it alike), so that the measured round
	// runs alone.
	if err := poll(ctx, 5*time.Millisecond, func() (bool, error) {
		ca, err := scrape(ctx, a)
		if err != nil {
			return false, err
		}
		cb, err := scrape(ctx, b)
		return ca.Rounds >= 1 && cb.Rounds >= 1, err
	}); err != nil {
		return fmt.Errorf("first sync round: %w", err)
	}
	if err := snapshotInto(ctx, src, ws, a.Identity(), opt); err != nil {
		return err
	}
	if _, _, err := a.Store().Import(src); err != nil { // the store only: no round starts
		return err
	}

	before, err := scrape(ctx, b)
	if err != nil {
		return err
	}
	start := time.Now()
	b.SyncPeer(ctx, a.Host().ID())
	elapsed := time.Since(start)
	after, err := scrape(ctx, b)
	if err != nil {
		return err
	}
	res.EndToEndSeconds = elapsed.Seconds()
	res.EndToEnd = rate(int64(len(data)), elapsed)
	res.BytesReceived = int64(after.minus(before).BlobBytes)

	want, err := b.Store().Wanted(agent)
	if err != nil {
		return err
	}
	if len(want) > 0 {
		return fmt.Errorf("after the round node B still wants %d blobs (run with a log to see why)", len(want))
	}
	st, err := os.Stat(filepath.Join(home(dir, 1), store.CapsulesDir, agent, filepath.FromSlash(capsule.BlobPath(sha256Hex))))
	if err != nil {
		return fmt.Errorf("the blob on node B: %w", err)
	}
	if st.Size() != int64(len(data)) {
		return fmt.Errorf("the blob on node B has %d bytes, want %d", st.Size(), len(data))
	}
	return firstCopy(ctx, dir, data, a, b, res, opt)
}

// firstCopy measures the import and the first copy of Blob: a new capsule
// whose workspace holds a file of data's size (data with its first byte
// changed: new bytes, as a new capsule has), copied as cp -r and sync
// would, imported into a, and taken by b.
func firstCopy(ctx context.Context, dir string, data []byte, a, b *node.Node, res *BlobResult, opt Options) error {
	ws := filepath.Join(dir, "first-workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		return err
	}
	// Made and flushed before the clock starts, as the side-by-side script
	// does for Syncthing: a file still being written back would share the
	// disk with the copy.
	if err := atomicfile.WriteFile(filepath.Join(ws, "blob.bin"), append([]byte{data[0] ^ 1}, data[1:]...), 0o644); err != nil {
		return err
	}
	src := filepath.Join(dir, "first")
	start := time.Now() // the file is in its folder
	agent, err := newCapsule(src, "first", a.Identity())
	if err != nil {
		return err
	}
	if err := snapshotInto(ctx, src, ws, a.Identity(), opt); err != nil {
		return err
	}
	res.SnapshotSeconds = time.Since(start).Seconds()
	start = time.Now()
	if err := copyTree(src, filepath.Join(dir, "first-copy")); err != nil {
		return fmt.Errorf("copy the capsule folder: %w", err)
	}
	res.CopySeconds = time.Since(start).Seconds()
	defer os.RemoveAll(filepath.Join(dir, "first-copy"))

	if res.ImportSeconds, res.ImportCopy, err = importAlone(dir, src); err != nil {
		return err
	}

	start = time.Now()
	if _, _, _, err := a.ImportFolder(src); err != nil {
		return err
	}
	err = poll(ctx, 5*time.Millisecond, func() (bool, error) {
		if !b.Store().Holds(agent) {
			return false, nil
		}
		want, err := b.Store().Wanted(agent)
		return err == nil && len(want) == 0, nil
	})
	res.FirstCopySeconds = time.Since(start).Seconds()
	if err != nil {
		return fmt.Errorf("node B taking the new capsule: %w", err)
	}
	// The cp -r measure between the snapshot and the import is no part of
	// what a person does: the two parts add up to their time.
	res.FromFolderSeconds = res.SnapshotSeconds + res.FirstCopySeconds
	return throughNode(ctx, dir, data, a, b, res)
}

// importAlone times a store of its own, in dir, taking the capsule folder
// src, as node A's store does but without a peer to push its blobs to: the
// work cp -r and sync are compared with.
func importAlone(dir, src string) (float64, filecopy.Method, error) {
	home := filepath.Join(dir, "import-alone")
	defer os.RemoveAll(home)
	s, err := store.Open(home, nil)
	if err != nil {
		return 0, "", err
	}
	defer s.Close()
	start := time.Now()
	_, _, copied, err := s.ImportFolder(src, nil)
	return time.Since(start).Seconds(), copied, err
}

// throughNode measures ThroughNode of Blob: a file of data's size (data
// with its first byte changed otherwise than firstCopy's) in a folder, a
// new agent imported empty into a, the folder snapshotted into it through
// a, until b holds it all.
func throughNode(ctx context.Context, dir string, data []byte, a, b *node.Node, res *BlobResult) error {
	ws := filepath.Join(dir, "through-workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		return err
	}
	changed := append([]byte{data[0] ^ 2}, data[1:]...)
	if err := atomicfile.WriteFile(filepath.Join(ws, "blob.bin"), changed, 0o644); err != nil { // flushed, as firstCopy's
		return err
	}
	src := filepath.Join(dir, "through")
	start := time.Now() // the file is in its folder
	agent, err := newCapsule(src, "through", a.Identity())
	if err != nil {
		return err
	}
	if _, _, _, err := a.ImportFolder(src); err != nil {
		return err
	}
	snap := time.Now()
	if _, _, err := a.Snapshot(ctx, agent, ws, capsule.SnapshotOptions{}); err != nil {
		return fmt.Errorf("snapshot through node A: %w", err)
	}
	res.ThroughNodeSnapshotSeconds = time.Since(snap).Seconds()
	err = poll(ctx, 5*time.Millisecond, func() (bool, error) {
		if !b.Store().Holds(agent) {
			return false, nil
		}
		want, err := b.Store().Wanted(agent)
		if err != nil || len(want) > 0 {
			return false, nil
		}
		v, err := b.Store().Vector(agent)
		if err != nil {
			return false, nil
		}
		va, err := a.Store().Vector(agent)
		return err == nil && maps.Equal(v, va), nil
	})
	res.ThroughNodeSeconds = time.Since(start).Seconds()
	if err != nil {
		return fmt.Errorf("node B taking the snapshot made through node A: %w", err)
	}
	return nil
}

// copyTree copies the folder src to dst file by file, fsyncing each file
// and then each folder: what cp -r followed by sync costs.
func copyTree(src, dst string) error {
	var dirs []string
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			dirs = append(dirs, to)
			return os.Mkdir(to, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, in)
		if err == nil {
			err = out.Sync()
		}
		return errors.Join(err, out.Close())
	})
	for _, d := range dirs {
		if f, derr := os.Open(d); derr == nil {
			err = errors.Join(err, f.Sync(), f.Close())
		}
	}
	return err
}

// benchProtocol is the stream protocol of the bare libp2p limit.
const benchProtocol = protocol.ID("/tern-bench/stream/1.0.0")

// libp2pRate streams data from one plain libp2p host to another on
// 127.0.0.1, both listening on listen, and returns MB/s, from opening the
// stream to the receiver reading the last byte. Connecting is not timed.
func libp2pRate(ctx context.Context, data []byte, listen string) (float64, error) {
	src, err := libp2p.New(libp2p.ListenAddrStrings(listen))
	if err != nil {
		return 0, err
	}
	defer src.Close()
	dst, err := libp2p.New(libp2p.ListenAddrStrings(listen))
	if err != nil {
		return 0, err
	}
	defer dst.Close()
	type received struct {
		n   int64
		err error
	}
	got := make(chan received, 1)
	dst.SetStreamHandler(benchProtocol, func(s network.Stream) {
		buf := make([]byte, ternproto.BlobChunk)
		var n int64
		for {
			k, err := s.Read(buf)
			n += int64(k)
			if err == io.EOF {
				s.Close()
				got <- received{n, nil}
				return
			}
			if err != nil {
				s.Reset()
				got <- received{n, err}
				return
			}
		}
	})
	if err := src.Connect(ctx, peer.AddrInfo{ID: dst.ID(), Addrs: dst.Addrs()}); err != nil {
		return 0, err
	}
	start := time.Now()
	s, err := src.NewStream(ctx, dst.ID(), benchProtocol)
	if err != nil {
		return 0, err
	}
	for off := 0; off < len(data); off += ternproto.BlobChunk {
		if _, err := s.Write(data[off:min(off+ternproto.BlobChunk, len(data))]); err != nil {
			s.Reset()
			return 0, err
		}
	}
	if err := s.CloseWrite(); err != nil {
		s.Reset()
		return 0, err
	}
	var r received
	select {
	case r = <-got:
	case <-ctx.Done():
		s.Reset()
		return 0, ctx.Err()
	}
	elapsed := time.Since(start)
	s.Close()
	if r.err != nil {
		return 0, r.err
	}
	if r.n != int64(len(data)) {
		return 0, fmt.Errorf("the receiver read %d bytes, want %d", r.n, len(data))
	}
	return rate(r.n, elapsed), nil
}

// diskRate writes data to a new file in dir in chunks, fsyncs it once and
// returns MB/s from creating the file to the end of the fsync.
func diskRate(dir string, data []byte) (float64, error) {
	start := time.Now()
	f, err := os.CreateTemp(dir, "disk-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	for off := 0; off < len(data); off += ternproto.BlobChunk {
		if _, err := f.Write(data[off:min(off+ternproto.BlobChunk, len(data))]); err != nil {
			f.Close()
			return 0, err
		}
	}
	err = f.Sync()
	elapsed := time.Since(start)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return rate(int64(len(data)), elapsed), err
}
