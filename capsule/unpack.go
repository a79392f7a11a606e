package capsule

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/journal"
)

// Unpack extracts the capsule tar at tarPath into a new folder dir. The tar
// is checked before anything is trusted (see openTar), extracted into a
// sibling staging folder, verified there completely, and only then renamed
// to dir. On any error dir is not created and nothing is left behind. A
// fork in the journal is not an error: it is carried over, for the
// machine that signed it to heal.
func Unpack(tarPath, dir string, lim Limits) error {
	if err := checkNewFolder(dir); err != nil {
		return err
	}
	src, err := openTar(tarPath, lim)
	if err != nil {
		return fmt.Errorf("unpack %s: %w", tarPath, err)
	}
	defer src.close()
	if _, ok := src.entries[ManifestFile]; !ok {
		return fmt.Errorf("unpack %s: %w: no %s", tarPath, ErrNotCapsule, ManifestFile)
	}
	return unpackInto(dir, tarPath, func(staging string) (map[string]FileEntry, error) {
		names, _ := src.list()
		written := make(map[string]FileEntry, len(names))
		for _, name := range names {
			rc, size, err := src.open(name)
			if err != nil {
				return nil, fmt.Errorf("unpack %s: entry %q: %w", tarPath, name, err)
			}
			e, err := writeHashed(rc, size, filepath.Join(staging, filepath.FromSlash(name)))
			rc.Close()
			if err != nil {
				return nil, fmt.Errorf("unpack %s: entry %q: %w", tarPath, name, err)
			}
			written[name] = e
		}
		return written, nil
	})
}

// UnpackFrom is Unpack of a tar read once from r, front to back: a stream
// from a peer or an upload, never written anywhere as a tar. Each header
// is checked as it arrives (as openTar checks them), each file is hashed
// while it is written, so no byte is read twice, and the whole capsule is
// verified before dir appears. r is read up to the tar's end.
func UnpackFrom(r io.Reader, dir string, lim Limits) error {
	return UnpackStreaming(r, dir, lim, nil)
}

// UnpackStreaming is UnpackFrom, passing each blob's bytes as they are
// read to a stream, as capsule.Copy does: once the tar's manifest has been
// read (Pack writes it first), stream is asked for a BlobStream of each
// blob that follows, with the manifest's agent and the blob's size, and
// what it returns gets the blob's bytes, then End with their hash once
// written (with an error if writing failed or the bytes do not hash to the
// blob's name). A nil stream, or a blob before the manifest, streams
// nothing.
func UnpackStreaming(r io.Reader, dir string, lim Limits, stream func(agent string, size int64) BlobStream) error {
	if err := checkNewFolder(dir); err != nil {
		return err
	}
	lim = lim.orDefault()
	return unpackInto(dir, "", func(staging string) (map[string]FileEntry, error) {
		tr := tar.NewReader(r)
		written := map[string]FileEntry{}
		agent := "" // the manifest's, once read
		seen := map[string]bool{}
		var total int64
		for n := 0; ; n++ {
			hdr, err := tr.Next()
			if err == io.EOF {
				return written, nil
			}
			if err != nil {
				if errors.Is(err, io.ErrUnexpectedEOF) {
					return nil, fmt.Errorf("unpack: %w: the tar is truncated after %d entries", ErrUnsafeTar, n)
				}
				return nil, fmt.Errorf("unpack: %w: after %d entries: %w", ErrUnsafeTar, n, err)
			}
			name, err := checkTarEntry(hdr, n, seen, &total, lim)
			if err != nil {
				return nil, fmt.Errorf("unpack: %w", err)
			}
			if name == "" {
				continue // a layout folder
			}
			var s BlobStream
			if stream != nil && agent != "" && blobName(name) != "" {
				s = stream(agent, hdr.Size)
			}
			var from io.Reader = tr
			if s != nil {
				from = io.TeeReader(tr, streamOnly{s})
			}
			dst := filepath.Join(staging, filepath.FromSlash(name))
			e, err := writeHashed(from, hdr.Size, dst)
			if s != nil {
				ended := err
				if ended == nil && e.SHA256 != blobName(name) {
					ended = fmt.Errorf("%w: blob %s holds bytes that hash to %s", ErrHashMismatch, name, e.SHA256)
				}
				s.End(e.SHA256, ended)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("%w: the tar is truncated inside it", ErrUnsafeTar)
			}
			if err != nil {
				return nil, fmt.Errorf("unpack: entry %q: %w", name, err)
			}
			written[name] = e
			if name == ManifestFile && stream != nil {
				if data, err := os.ReadFile(dst); err == nil {
					if m, err := ParseManifest(data); err == nil {
						agent = m.ID
					}
				}
			}
		}
	})
}

// checkNewFolder refuses a dir that exists: an unpack makes a new folder.
func checkNewFolder(dir string) error {
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("unpack: %s already exists; name a new folder", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unpack: %w", err)
	}
	return nil
}

// unpackInto makes the folder dir from the files extract writes into a
// sibling staging folder (returning the entry of each, as hashed while
// written, without an fsync): it makes the files and the folders durable,
// verifies the capsule completely,
// counting on those hashes instead of reading the files again, and renames
// the staging folder to dir. On any error nothing is left behind. from
// names the tar file in errors ("" for a stream).
func unpackInto(dir, from string, extract func(staging string) (map[string]FileEntry, error)) (err error) {
	parent := filepath.Dir(dir)
	staging, lock, err := newStaging(dir)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	defer lock.Unlock()
	defer func() {
		if err != nil {
			os.RemoveAll(staging)
		}
	}()
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(staging, filepath.FromSlash(d)), 0o755); err != nil {
			return err
		}
	}
	written, err := extract(staging)
	if err != nil {
		return err
	}
	if _, ok := written[ManifestFile]; !ok {
		return fmt.Errorf("%s: %w: no %s", unpackOf(from), ErrNotCapsule, ManifestFile)
	}
	// The files were written without an fsync each: made durable together
	// (one sync of the filesystem for a tree of small files, not one
	// journal commit a file), before the staging folder may be renamed.
	paths := make([]string, 0, len(written))
	for name := range written {
		paths = append(paths, filepath.Join(staging, filepath.FromSlash(name)))
	}
	if err := atomicfile.SyncFiles(staging, paths); err != nil {
		return err
	}
	for _, d := range append([]string{"."}, dirs...) {
		if err := atomicfile.SyncDir(filepath.Join(staging, filepath.FromSlash(d))); err != nil {
			return err
		}
	}
	rep, err := Verify(staging, VerifyOptions{written: written})
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	// A fork is no damage of the tar: it is carried over, to be healed by
	// the machine that signed it (ForksOf names them).
	issues := slices.DeleteFunc(rep.Issues(), func(p Problem) bool { return errors.Is(p.Err, journal.ErrFork) })
	if len(issues) > 0 {
		p := issues[0]
		more := ""
		if len(issues) > 1 {
			more = fmt.Sprintf(" (and %d more)", len(issues)-1)
			if from != "" {
				more = fmt.Sprintf(" (and %d more; tern capsule verify %s lists them)", len(issues)-1, from)
			}
		}
		return fmt.Errorf("%s: entry %q: %w%s", unpackOf(from), p.File, p.Err, more)
	}
	lock.Unlock()
	if err := os.Rename(staging, dir); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	return atomicfile.SyncDir(parent)
}

// unpackOf is how an unpack's errors begin: "unpack FILE", or "unpack"
// for a stream.
func unpackOf(from string) string {
	if from == "" {
		return "unpack"
	}
	return "unpack " + from
}

// writeHashed writes size bytes of r to the new file dst and returns its
// entry as hashed on the way. It does not fsync: unpackInto makes an
// unpack's files durable together.
func writeHashed(r io.Reader, size int64, dst string) (FileEntry, error) {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return FileEntry{}, err
	}
	h := newHashingReader(r)
	n, err := io.Copy(f, io.LimitReader(h, size))
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return h.entry(), err
}
