package capsule

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// benchBytes is the size of the workspace behind BenchmarkVerify:
// TERN_BENCH_VERIFY_BYTES, or 1 GiB.
func benchBytes() int64 {
	if s := os.Getenv("TERN_BENCH_VERIFY_BYTES"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	}
	return 1 << 30
}

// BenchmarkVerify compares verifying a capsule holding benchBytes of blobs
// (64 files) with plain sha256 over the same files in the same run:
//
//	go test ./capsule -run '^$' -bench BenchmarkVerify -benchtime 3x
//
// Each sub-benchmark reports MB/s; the ratio verify/sha256 is the figure.
func BenchmarkVerify(b *testing.B) {
	total := benchBytes()
	dir := benchCapsule(b, 64, total/64)
	var blobPaths []string
	for name := range mustOpen(b, dir).Manifest().Files {
		blobPaths = append(blobPaths, filepath.Join(dir, filepath.FromSlash(name)))
	}

	b.Run("sha256-1core", func(b *testing.B) {
		b.SetBytes(total)
		hbuf := make([]byte, 1<<20)
		for b.Loop() {
			for _, p := range blobPaths {
				f, err := os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				h := sha256.New()
				io.CopyBuffer(h, f, hbuf)
				f.Close()
				h.Sum(nil)
			}
		}
	})
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("verify-%dcore", workers), func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				rep, err := Verify(dir, VerifyOptions{Workers: workers})
				if err != nil || !rep.OK() {
					b.Fatal(err, rep.Problems)
				}
			}
		})
	}
}

// BenchmarkATreeOpenedAndVerifiedAfterAnUnpack: a capsule whose workspace
// is 10,000 files of 1 KiB, opened as a node opens a capsule it holds
// (OpenDir, which recovers what a crash left) and verified as an unpack
// verifies its new folder (every hash taken while written):
//
//	go test ./capsule -run '^$' -bench ATreeOpenedAndVerified
func BenchmarkATreeOpenedAndVerifiedAfterAnUnpack(b *testing.B) {
	dir := benchCapsule(b, 10000, 1024)
	written := map[string]FileEntry{}
	for name, e := range mustOpen(b, dir).Manifest().Files {
		written[name] = e
	}
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		b.Fatal(err)
	}
	written[ManifestFile] = entryOf(data)
	b.Run("OpenDir", func(b *testing.B) {
		for b.Loop() {
			d, err := OpenDir(context.Background(), dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			d.Close()
		}
	})
	b.Run("Verify", func(b *testing.B) {
		for b.Loop() {
			rep, err := Verify(dir, VerifyOptions{written: written})
			if err != nil || !rep.OK() {
				b.Fatal(err, rep.Problems)
			}
		}
	})
}

// benchCapsule is a new capsule whose workspace snapshot holds files
// files of size random bytes each, in folders of 100.
func benchCapsule(b *testing.B, files int, size int64) string {
	root := b.TempDir()
	s := newSigner(b)
	dir := filepath.Join(root, "agent")
	c, err := New(dir, "bench", s)
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	ws := filepath.Join(root, "ws")
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, size)
	for i := range files {
		for j := 0; j+8 <= len(buf); j += 8 {
			binary.LittleEndian.PutUint64(buf[j:], rng.Uint64())
		}
		p := filepath.Join(ws, fmt.Sprintf("d%03d", i/100), fmt.Sprint("f", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.Snapshot(context.Background(), s, ws); err != nil {
		b.Fatal(err)
	}
	d.Close()
	os.RemoveAll(ws)
	return dir
}
