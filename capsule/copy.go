package capsule

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/tern-dev/tern/internal/filecopy"
)

// Copy makes the new folder dir hold what UnpackFrom of c's Pack would
// hold, without a tar: the manifest and the journal Pack writes, the
// layout files Pack takes, and each blob copied straight from c's folder
// by filecopy.Copy (a reflink where the filesystem allows it, else
// O_DIRECT writes or copy_file_range, else a plain copy), hashed as it is
// read. The files and folders are made durable together at the end, as
// an unpack's are, and the whole capsule is verified as an unpack is (the
// hashes taken while copying stand for the files): a blob whose bytes do
// not match its name, or any other damage, is refused with the error
// UnpackFrom gives, and dir is not created. It returns the method, of
// those any blob was copied by, that comes last in filecopy.Methods (""
// when c has no blob; filecopy.Plain for a tar, whose blobs are read and
// written).
//
// stream, if not nil, is asked for a BlobStream of each blob's size
// before the blob is read, from several goroutines at once (blobs are
// copied copyWorkers at a time); what it returns gets the blob's bytes as
// they are hashed, then End with the hash once the copy is written (with an
// error if the copy failed or the bytes do not hash to the blob's name),
// as a snapshot's streams do (see SnapshotOptions.Stream).
func Copy(c *Capsule, dir string, stream func(size int64) BlobStream) (filecopy.Method, error) {
	if err := checkNewFolder(dir); err != nil {
		return "", err
	}
	p, err := planPack(c, PackOptions{})
	if err != nil {
		return "", err
	}
	var method filecopy.Method
	err = unpackInto(dir, "", func(staging string) (map[string]FileEntry, error) {
		written := make(map[string]FileEntry, len(p.manifest.Files)+1)
		e, err := writeHashed(bytes.NewReader(p.manifestData), int64(len(p.manifestData)), filepath.Join(staging, ManifestFile))
		if err != nil {
			return nil, fmt.Errorf("unpack: entry %q: %w", ManifestFile, err)
		}
		written[ManifestFile] = e
		var blobs []string
		for _, name := range p.manifest.Names() {
			dst := filepath.Join(staging, filepath.FromSlash(name))
			switch data, ok := p.rewritten[name]; {
			case ok:
				e, err = writeHashed(bytes.NewReader(data), int64(len(data)), dst)
			case blobName(name) != "":
				blobs = append(blobs, name)
				continue
			default:
				e, err = copyLayoutFile(c, name, p.manifest.Files[name], dst)
			}
			if err != nil {
				return nil, fmt.Errorf("unpack: entry %q: %w", name, err)
			}
			written[name] = e
		}
		// The blobs, copyWorkers at a time: a tree of small files is
		// mostly the system calls of each file, one after another.
		var mu sync.Mutex
		var failed error
		var wg sync.WaitGroup
		next := make(chan string)
		for range min(copyWorkers, len(blobs)) {
			wg.Go(func() {
				for name := range next {
					e, m, err := copyBlob(c, name, filepath.Join(staging, filepath.FromSlash(name)), stream)
					mu.Lock()
					if err != nil && failed == nil {
						failed = fmt.Errorf("unpack: entry %q: %w", name, err)
					}
					written[name] = e
					method = filecopy.Slower(method, m)
					mu.Unlock()
				}
			})
		}
		for _, name := range blobs {
			mu.Lock()
			stop := failed != nil
			mu.Unlock()
			if stop {
				break
			}
			next <- name
		}
		close(next)
		wg.Wait()
		if failed != nil {
			return nil, failed
		}
		return written, nil
	})
	if err != nil {
		return "", err
	}
	return method, nil
}

// copyWorkers is how many blobs Copy copies at once.
const copyWorkers = 4

// copyLayoutFile writes to dst the layout file Pack takes of c.
func copyLayoutFile(c *Capsule, name string, want FileEntry, dst string) (FileEntry, error) {
	rc, err := openPacked(c, name, want)
	if err != nil {
		return FileEntry{}, err
	}
	defer rc.Close()
	return writeHashed(rc, want.Size, dst)
}

// copyBlob copies the blob name of c, whole whatever its manifest says
// (the verification compares), to the new file dst by filecopy (a tar's
// blob is read and written), and returns its entry as hashed from the
// source while copied. stream is as Copy's.
func copyBlob(c *Capsule, name, dst string, stream func(size int64) BlobStream) (e FileEntry, m filecopy.Method, err error) {
	rc, size, err := c.src.open(name)
	if err != nil {
		return FileEntry{}, "", err
	}
	defer rc.Close()
	var s BlobStream
	if stream != nil {
		s = stream(size)
	}
	if s != nil {
		defer func() {
			ended := err
			if ended == nil && e.SHA256 != blobName(name) {
				ended = fmt.Errorf("%w: blob %s holds bytes that hash to %s", ErrHashMismatch, name, e.SHA256)
			}
			s.End(e.SHA256, ended)
		}()
	}
	src, ok := rc.(*os.File)
	if !ok {
		if s != nil {
			rc = io.NopCloser(io.TeeReader(rc, streamOnly{s}))
		}
		e, err = writeHashed(rc, size, dst)
		return e, filecopy.Plain, err
	}
	f, err := filecopy.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return FileEntry{}, "", err
	}
	h := sha256.New()
	var w io.Writer = h
	if s != nil {
		w = alsoTo{h, s}
	}
	m, err = filecopy.Copy(f, src, size, w)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return FileEntry{SHA256: hex.EncodeToString(h.Sum(nil)), Size: size}, m, err
}
