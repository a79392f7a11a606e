package capsule

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
)

// hashingReader hashes and counts what is read through it.
type hashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func newHashingReader(r io.Reader) *hashingReader { return &hashingReader{r: r, h: sha256.New()} }

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (h *hashingReader) entry() FileEntry {
	return FileEntry{SHA256: hex.EncodeToString(h.h.Sum(nil)), Size: h.n}
}

func newBufferedWriter(w io.Writer) *bufio.Writer { return bufio.NewWriterSize(w, 1<<20) }

// readAllClose reads r to the end and closes it.
func readAllClose(r io.ReadCloser) ([]byte, error) {
	defer r.Close()
	return io.ReadAll(r)
}
