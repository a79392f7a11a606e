package capsule

import (
	"context"
	"crypto/sha256"
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
	root := b.TempDir()
	s := newSigner(b)
	dir := filepath.Join(root, "agent")
	c, err := New(dir, "bench", s)
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	ws := filepath.Join(root, "ws")
	os.MkdirAll(ws, 0o755)
	const files = 64
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, total/files)
	for i := 0; i < files; i++ {
		for j := 0; j+8 <= len(buf); j += 8 {
			v := rng.Uint64()
			for k := 0; k < 8; k++ {
				buf[j+k] = byte(v >> (8 * k))
			}
		}
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprint("f", i)), buf, 0o644); err != nil {
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
	root := b.TempDir()
	s := newSigner(b)
	dir := filepath.Join(root, "agent")
	c, err := New(dir, "tree", s)
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	ws := filepath.Join(root, "ws")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		p := filepath.Join(ws, fmt.Sprintf("src%03d", i/100), fmt.Sprintf("file%05d", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		data := make([]byte, 1024)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
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
