package capsule

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tern-dev/tern/internal/filecopy"
	"github.com/tern-dev/tern/internal/filecopy/filecopytest"
)

// Copy makes from a folder the capsule UnpackFrom makes of its tar, by
// the method each filesystem offers, and refuses a blob whose bytes are
// not its name on every method, leaving nothing behind.
func TestCopyMakesWhatAnUnpackOfThePackMakesAndRefusesADamagedBlobOnEveryMethod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src, dst string // filesystems; "" is the test's temporary folder
		want     filecopy.Method
	}{
		{"reflinked on XFS", "xfs", "xfs", filecopy.Reflink},
		{"reflinked on btrfs", "btrfs", "btrfs", filecopy.Reflink},
		{"by copy_file_range on ext4", "ext4", "ext4", filecopy.CopyFileRange},
		{"read and written from tmpfs to ext4", "tmpfs", "ext4", filecopy.Plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			made := fullCapsule(t, newSigner(t))
			src := filepath.Join(filecopytest.Folder(t, tc.src), "agent")
			if err := os.CopyFS(src, os.DirFS(made)); err != nil {
				t.Fatal(err)
			}
			root := filecopytest.Folder(t, tc.dst)
			if tc.src == tc.dst {
				root = filepath.Dir(src)
			}
			tarBytes := packTo(t, src, filepath.Join(t.TempDir(), "a.tar"), PackOptions{})
			unpacked := filepath.Join(t.TempDir(), "unpacked")
			if err := UnpackFrom(bytes.NewReader(tarBytes), unpacked, Limits{}); err != nil {
				t.Fatal(err)
			}

			copied := filepath.Join(root, "copied")
			m, err := Copy(mustOpen(t, src), copied, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m != tc.want {
				t.Errorf("copied by %q, want %q", m, tc.want)
			}
			mustVerify(t, copied)
			if !bytes.Equal(packTo(t, copied, filepath.Join(t.TempDir(), "b.tar"), PackOptions{}), tarBytes) {
				t.Error("the copy packs to other bytes than the folder it was copied from")
			}
			sameTree(t, copied, unpacked)

			blob := damageABlob(t, src)
			damaged := filepath.Join(root, "damaged")
			_, err = Copy(mustOpen(t, src), damaged, nil)
			if err == nil || !strings.Contains(err.Error(), blob) || !strings.Contains(err.Error(), "sha256") {
				t.Fatalf("a blob whose bytes differ from its name: %v", err)
			}
			if _, err := os.Lstat(damaged); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused copy left %s: %v", damaged, err)
			}
			if left, _ := filepath.Glob(filepath.Join(root, ".damaged*")); len(left) > 0 {
				t.Errorf("the refused copy left %v", left)
			}
		})
	}
}

// Copy passes each blob's bytes, as they are read, to the stream asked
// for it with the blob's size, and ends the stream with the blob's hash
// once the copy is written; a blob whose bytes are not its name ends its
// stream with the mismatch, whatever else the copy does with it.
func TestCopyPassesEachBlobToItsStreamAndEndsItWithTheHash(t *testing.T) {
	src := fullCapsule(t, newSigner(t))
	var mu sync.Mutex // Copy asks for streams from several goroutines at once
	var streams []*recordedStream
	stream := func(size int64) BlobStream {
		mu.Lock()
		defer mu.Unlock()
		s := &recordedStream{size: size}
		streams = append(streams, s)
		return s
	}
	if _, err := Copy(mustOpen(t, src), filepath.Join(t.TempDir(), "copied"), stream); err != nil {
		t.Fatal(err)
	}
	blobs := streamedEachBlob(t, mustOpen(t, src), streams)

	damaged := blobName(damageABlob(t, src))
	streams = nil
	if _, err := Copy(mustOpen(t, src), filepath.Join(t.TempDir(), "damaged"), stream); err == nil {
		t.Fatal("a damaged blob was copied")
	}
	i := slices.IndexFunc(streams, func(s *recordedStream) bool { return s.size == blobs[damaged] && s.ended == 1 && s.sum != damaged })
	if i < 0 {
		t.Fatal("no stream ended with the damaged blob's bytes")
	}
	if !errors.Is(streams[i].err, ErrHashMismatch) {
		t.Errorf("the damaged blob's stream ended with %v, want ErrHashMismatch", streams[i].err)
	}
}

// An unpack from a stream passes each blob after the manifest to a stream
// asked for it with the manifest's agent and the blob's size, and ends it
// with the blob's hash: what Copy does for a folder, for a tar.
func TestUnpackStreamingPassesEachBlobToItsStreamWithTheAgent(t *testing.T) {
	src := fullCapsule(t, newSigner(t))
	tarBytes := packTo(t, src, filepath.Join(t.TempDir(), "a.tar"), PackOptions{})
	var streams []*recordedStream
	var agents []string
	stream := func(agent string, size int64) BlobStream {
		s := &recordedStream{size: size}
		streams, agents = append(streams, s), append(agents, agent)
		return s
	}
	if err := UnpackStreaming(bytes.NewReader(tarBytes), filepath.Join(t.TempDir(), "unpacked"), Limits{}, stream); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, src)
	streamedEachBlob(t, c, streams)
	for i, agent := range agents {
		if agent != c.ID() {
			t.Errorf("stream %d was asked for agent %q, want %q", i, agent, c.ID())
		}
	}
}

// streamedEachBlob fails the test unless streams are one for each blob of
// c, each passed the blob's bytes and ended once with their hash and no
// error; it returns c's blobs and their sizes.
func streamedEachBlob(t *testing.T, c *Capsule, streams []*recordedStream) map[string]int64 {
	t.Helper()
	blobs := map[string]int64{}
	for n, e := range c.Manifest().Files {
		if h := blobName(n); h != "" {
			blobs[h] = e.Size
		}
	}
	if len(streams) != len(blobs) || len(blobs) == 0 {
		t.Fatalf("%d streams asked for, for %d blobs", len(streams), len(blobs))
	}
	for _, s := range streams {
		sum := sha256.Sum256(s.Bytes())
		if h := hex.EncodeToString(sum[:]); s.sum != h || s.err != nil || s.ended != 1 || blobs[h] != s.size || int64(s.Len()) != s.size {
			t.Errorf("a stream of %d bytes got %d bytes hashing to %s, ended %d times with %q, %v", s.size, s.Len(), h, s.ended, s.sum, s.err)
		}
	}
	return blobs
}

// recordedStream is a BlobStream that keeps what it is passed.
type recordedStream struct {
	bytes.Buffer
	size  int64
	sum   string
	err   error
	ended int
}

func (s *recordedStream) End(sha256Hex string, err error) {
	s.sum, s.err = sha256Hex, err
	s.ended++
}

// Copy refuses a folder that exists.
func TestCopyRefusesAnExistingTarget(t *testing.T) {
	src := fullCapsule(t, newSigner(t))
	dst := t.TempDir()
	if _, err := Copy(mustOpen(t, src), dst, nil); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("err %v", err)
	}
}

// damageABlob changes one byte of the largest blob of the capsule folder
// dir, keeping its size, and returns its capsule name.
func damageABlob(t *testing.T, dir string) string {
	t.Helper()
	var name string
	var size int64 = -1
	for n, e := range mustOpen(t, dir).Manifest().Files {
		if blobName(n) != "" && e.Size > size {
			name, size = n, e.Size
		}
	}
	if size < 1 {
		t.Fatal("the capsule has no blob with bytes")
	}
	p := filepath.Join(dir, filepath.FromSlash(name))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[0] ^= 0xff
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// sameTree fails the test unless folders a and b hold the same files with
// the same bytes.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	files := func(root string) map[string]string {
		out := map[string]string{}
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				data, _ := os.ReadFile(p)
				rel, _ := filepath.Rel(root, p)
				out[rel] = string(data)
			}
			return err
		})
		return out
	}
	fa, fb := files(a), files(b)
	if len(fa) != len(fb) {
		t.Errorf("%s holds %d files, %s %d", a, len(fa), b, len(fb))
	}
	for n, data := range fa {
		if fb[n] != data {
			t.Errorf("%s differs", n)
		}
	}
}

// A snapshot stores each workspace file as a blob by the cheapest method
// the two filesystems offer, named by the hash of the bytes it holds.
func TestASnapshotStoresEachFileByTheCheapestMethod(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ws, to string // filesystems of the workspace and the capsule
		want   filecopy.Method
	}{
		{"reflinked on XFS", "xfs", "xfs", filecopy.Reflink},
		{"reflinked on btrfs", "btrfs", "btrfs", filecopy.Reflink},
		{"written with O_DIRECT on ext4", "ext4", "ext4", filecopy.Direct},
		{"read from tmpfs and written with O_DIRECT to ext4", "tmpfs", "ext4", filecopy.Direct},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wsFS := filecopytest.Folder(t, tc.ws)
			dir := filepath.Join(wsFS, "agent")
			if tc.to != tc.ws {
				dir = filepath.Join(filecopytest.Folder(t, tc.to), "agent")
			}
			c, err := New(dir, "snap", newSigner(t))
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			data := bytes.Repeat([]byte("tern reflink "), 300_000) // about 4 MB: several chunks
			src := filepath.Join(wsFS, "file.bin")
			if err := os.WriteFile(src, data, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(src)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			e, m, err := putFileBlob(dir, f, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m != tc.want {
				t.Errorf("stored by %q, want %q", m, tc.want)
			}
			if e != entryOf(data) {
				t.Errorf("entry %+v, want %+v", e, entryOf(data))
			}
			if got, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(BlobPath(e.SHA256)))); !bytes.Equal(got, data) {
				t.Error("the blob does not hold the file's bytes")
			}
		})
	}
}
