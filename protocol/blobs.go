package protocol

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// A fetch of many blobs asks for them on one stream: the peer answers
// with each in turn, a header naming it (its size, or why it cannot send
// it) then its bytes. A tree of small files then costs a round trip a
// request, not one a file.

// MaxBlobBatch is the most blobs one fetch of many may name.
const MaxBlobBatch = 256

// batchBytes is about how many bytes a peer sends for one fetch of many
// before it ends the stream (the asker asks again for the rest), so that
// one stream of large blobs does not run into BlobTimeout.
const batchBytes = 64 << 20

// BlobWant names one blob of a fetch of many and the offset its partial
// file holds already.
type BlobWant struct {
	SHA256 string `json:"sha256"`
	Offset int64  `json:"offset,omitempty"`
}

// ErrNoBatches means the peer answered a fetch of many as a tern that
// serves one blob a request does: fetch them one by one.
var ErrNoBatches = errors.New("the peer serves one blob a request")

// BlobDone is told the outcome of each blob a fetch of many got to, in
// the order asked: the bytes received and nil (the partial file holds the
// whole blob, checked against its name, not yet fsynced), or an error
// wrapping ErrNoBlob, ErrBlobHash or ErrProtocol, or the stream's (see
// FetchBlob for what each leaves in the partial file).
type BlobDone func(sha256Hex string, got int64, err error)

// FetchBlobs fetches the agent's blobs named hashes over rw, each into the
// partial file partial(name), resuming after the bytes it holds. begin,
// if not nil, is called as a blob's bytes start and returns what follows
// its progress (or nil). done is told each blob's outcome. It returns how
// many of hashes it got to: fewer when the peer ended the stream early
// (after about batchBytes: ask again for the rest) or on an error, which
// it returns; ErrNoBatches (and 0) from a peer that serves one blob a
// request.
func FetchBlobs(rw io.ReadWriter, agent string, hashes []string, partial func(string) string, begin func(string) Progress, done BlobDone) (int, error) {
	return fetchBlobs(rw, agent, hashes, partial, begin, done, nil)
}

func fetchBlobs(rw io.ReadWriter, agent string, hashes []string, partial func(string) string, begin func(string) Progress, done BlobDone, reserve func(int) error) (int, error) {
	if len(hashes) == 0 || len(hashes) > MaxBlobBatch {
		return 0, fmt.Errorf("a fetch of many names 1 to %d blobs, not %d", MaxBlobBatch, len(hashes))
	}
	wants := make([]BlobWant, len(hashes))
	for i, name := range hashes {
		if !isSHA256Hex(name) {
			return 0, fmt.Errorf("%q is not a sha256 hex name", name)
		}
		wants[i].SHA256 = name
		if st, err := os.Stat(partial(name)); err == nil {
			wants[i].Offset = st.Size()
		}
	}
	b, _ := json.Marshal(blobRequest{Agent: agent, Blobs: wants})
	if err := WriteFrame(rw, b); err != nil {
		return 0, err
	}
	r := bufio.NewReaderSize(rw, fetchReadBuffer)
	for i, w := range wants {
		p, err := ReadFrame(r, 1<<10)
		if err == io.EOF && i > 0 {
			return i, nil // the peer sent its share of bytes
		}
		if err != nil {
			return i, err
		}
		var hdr blobHeader
		if err := json.Unmarshal(p, &hdr); err != nil {
			return i, fmt.Errorf("%w: a blob header that is not JSON", ErrProtocol)
		}
		if hdr.SHA256 == "" && i == 0 {
			return 0, ErrNoBatches
		}
		if hdr.SHA256 != w.SHA256 {
			return i, fmt.Errorf("%w: the peer sent blob %q where %s was asked", ErrProtocol, hdr.SHA256, w.SHA256)
		}
		if hdr.Error != "" {
			done(w.SHA256, 0, fmt.Errorf("%w: %s", ErrNoBlob, hdr.Error))
			continue
		}
		got, err := receiveInto(r, w, partial(w.SHA256), hdr.Size, begin, reserve)
		done(w.SHA256, got, err)
		if err != nil && !errors.Is(err, ErrBlobHash) {
			return i + 1, err // the stream is not at a header any more
		}
	}
	return len(wants), nil
}

// receiveInto receives blob w, of size bytes, into its partial file.
func receiveInto(r *bufio.Reader, w BlobWant, path string, size int64, begin func(string) Progress, reserve func(int) error) (int64, error) {
	want, _ := hex.DecodeString(w.SHA256)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := sha256.New()
	offset, err := io.Copy(h, f)
	if err != nil {
		return 0, err
	}
	if offset != w.Offset {
		return 0, fmt.Errorf("the partial file of blob %s changed during its fetch", w.SHA256)
	}
	var progress Progress
	if begin != nil {
		progress = begin(w.SHA256)
	}
	return receiveBlob(r, f, h, want, path, offset, size, progress, reserve)
}

// serveBlobs answers a fetch of many: each blob in turn, a header naming
// it then its bytes from the offset asked, until all are sent or about
// batchBytes have been.
func serveBlobs(rw io.ReadWriter, src BlobSource, peer, agent string, wants []BlobWant, answer func(blobHeader) error) error {
	for _, w := range wants {
		if !isSHA256Hex(w.SHA256) || w.Offset < 0 {
			return fmt.Errorf("%w: bad blob %q in a fetch of many", ErrProtocol, w.SHA256)
		}
	}
	var buf []byte
	var sent int64
	for _, w := range wants {
		if sent >= batchBytes {
			return nil
		}
		f, size, err := src.OpenBlob(agent, peer, w.SHA256)
		if errors.Is(err, ErrNoBlob) {
			if err := answer(blobHeader{SHA256: w.SHA256, Error: "not found"}); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			answer(blobHeader{SHA256: w.SHA256, Error: "cannot read it"})
			return err
		}
		offset := min(w.Offset, size)
		err = answer(blobHeader{SHA256: w.SHA256, Size: size})
		if err == nil {
			_, err = f.Seek(offset, io.SeekStart)
		}
		if err == nil {
			if buf == nil {
				buf = make([]byte, binary.MaxVarintLen64+BlobChunk)
			}
			err = sendChunks(rw, f, buf)
		}
		f.Close()
		if err != nil {
			return err
		}
		sent += size - offset
	}
	return nil
}
