package capsule

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filecopy"
)

// ErrHashMismatch means bytes did not hash to the name they were stored or
// asked for under.
var ErrHashMismatch = errors.New("content does not match its hash")

// CIDFromSHA256 converts a blob's sha256 hex name to its CIDv1 (raw codec,
// sha2-256 multihash), the form blobs have on the wire.
func CIDFromSHA256(hexSum string) (cid.Cid, error) {
	digest, err := hex.DecodeString(hexSum)
	if err != nil || len(digest) != sha256.Size {
		return cid.Undef, fmt.Errorf("%q is not a sha256 hex digest", hexSum)
	}
	mh, err := multihash.Encode(digest, multihash.SHA2_256)
	if err != nil {
		return cid.Undef, err
	}
	return cid.NewCidV1(cid.Raw, mh), nil
}

// SHA256FromCID converts a blob CID back to its sha256 hex name. Only CIDv1
// with the raw codec and a sha2-256 multihash name a blob.
func SHA256FromCID(c cid.Cid) (string, error) {
	if c.Version() != 1 || c.Type() != cid.Raw {
		return "", fmt.Errorf("CID %s is not a raw CIDv1", c)
	}
	d, err := multihash.Decode(c.Hash())
	if err != nil {
		return "", fmt.Errorf("CID %s: %w", c, err)
	}
	if d.Code != multihash.SHA2_256 || len(d.Digest) != sha256.Size {
		return "", fmt.Errorf("CID %s is not sha2-256", c)
	}
	return hex.EncodeToString(d.Digest), nil
}

// ParseBlobCID parses a CID string and returns the sha256 hex name it refers to.
func ParseBlobCID(s string) (string, error) {
	c, err := cid.Decode(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a CID: %w", s, err)
	}
	return SHA256FromCID(c)
}

// BlobCID returns the CID string of the blob with the given sha256 hex name.
// The name must already be valid.
func BlobCID(hexSum string) string {
	c, err := CIDFromSHA256(hexSum)
	if err != nil {
		panic(err)
	}
	return c.String()
}

// putBlob stores r's bytes under dir/artifacts/blobs/<sha256> atomically
// and returns their sha256 hex and size. A blob already present is not
// written again.
func putBlob(dir string, r io.Reader) (FileEntry, error) {
	return storeBlob(dir, true, func(f *os.File, h hash.Hash) (int64, error) {
		return io.Copy(io.MultiWriter(f, h), r)
	})
}

// putFileBlob is putBlob of the file src, copied by filecopy.Copy (a
// reflink where the filesystem allows it, else copy_file_range, else a
// plain copy) and hashed as it is read: its bytes need not pass through
// user space. It returns how they were copied. A file that changes while
// it is copied is read again from its start and stored as putBlob stores
// a reader's bytes (filecopy.Plain). It does not fsync the blob: the
// caller makes its blobs durable together (atomicfile.SyncFiles) before it
// lists them.
//
// stream, if not nil, is asked for a BlobStream of the file's size before
// the file is read; what it returns gets the bytes as they are hashed,
// then End (see SnapshotOptions.Stream).
func putFileBlob(dir string, src *os.File, stream func(size int64) BlobStream) (e FileEntry, m filecopy.Method, err error) {
	var s BlobStream
	defer func() {
		if s != nil {
			s.End(e.SHA256, err)
		}
	}()
	e, err = storeBlob(dir, false, func(f *os.File, h hash.Hash) (int64, error) {
		st, err := src.Stat()
		if err != nil {
			return 0, err
		}
		var w io.Writer = h
		if stream != nil {
			if s = stream(st.Size()); s != nil {
				w = alsoTo{h, s}
			}
		}
		m, err = filecopy.Copy(f, src, st.Size(), w)
		return st.Size(), err
	})
	if errors.Is(err, filecopy.ErrChanged) {
		// What s got was read while the file changed: its bytes hash to
		// another name than the blob stored now, and a peer keeps none.
		if _, err := src.Seek(0, io.SeekStart); err != nil {
			return FileEntry{}, "", err
		}
		e, err = putBlob(dir, src)
		return e, filecopy.Plain, err
	}
	return e, m, err
}

// streamOnly writes to a BlobStream, whose errors are its own business.
type streamOnly struct{ s BlobStream }

func (w streamOnly) Write(p []byte) (int, error) {
	w.s.Write(p)
	return len(p), nil
}

// alsoTo writes to h and to s, whose errors are its own business.
type alsoTo struct {
	h hash.Hash
	s io.Writer
}

func (w alsoTo) Write(p []byte) (int, error) {
	w.h.Write(p)
	w.s.Write(p)
	return len(p), nil
}

// blobStored, if set (by a test), is called for each blob storeBlob
// writes.
var blobStored func()

// storeBlob stores as a blob of the capsule in dir what fill writes to a
// new temporary file beside the blobs, hashing it in h and returning its
// size: fsynced if durable, then renamed to its name unless a blob of that
// name and size is there already. The caller fsyncs the blob folder once
// for the batch (and, if not durable, the blobs: a crash before then may
// leave a blob under its name with part of its bytes, which no manifest
// lists and the next open checks and removes).
func storeBlob(dir string, durable bool, fill func(f *os.File, h hash.Hash) (int64, error)) (FileEntry, error) {
	if blobStored != nil {
		blobStored()
	}
	blobs := filepath.Join(dir, filepath.FromSlash(BlobDir))
	f, err := os.CreateTemp(blobs, atomicfile.TempPrefix+"*")
	if err != nil {
		return FileEntry{}, err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	h := sha256.New()
	n, err := fill(f, h)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return FileEntry{}, err
	}
	e := FileEntry{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}
	final := filepath.Join(blobs, e.SHA256)
	if st, err := os.Stat(final); err == nil && st.Size() == n {
		return e, nil
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return FileEntry{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return FileEntry{}, err
	}
	return e, nil
}

// hashFile returns the sha256 and size of a file's first limit bytes, or of
// the whole file when limit < 0.
func hashFile(path string, limit int64) (FileEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return FileEntry{}, err
	}
	defer f.Close()
	var r io.Reader = f
	if limit >= 0 {
		r = io.LimitReader(f, limit)
	}
	return hashReader(r)
}

func hashReader(r io.Reader) (FileEntry, error) {
	h := sha256.New()
	n, err := copyHash(h, r)
	if err != nil {
		return FileEntry{}, err
	}
	return FileEntry{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// hashBuffers holds the 1 MiB read buffers of copyHash: large enough to
// keep sha256 busy, reused so that hashing allocates nothing per file.
var hashBuffers = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// copyHash feeds r into h.
func copyHash(h hash.Hash, r io.Reader) (int64, error) {
	buf := hashBuffers.Get().(*[]byte)
	defer hashBuffers.Put(buf)
	return io.CopyBuffer(h, r, *buf)
}
