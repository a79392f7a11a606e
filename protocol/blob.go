package protocol

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/tern-dev/tern/internal/filecopy"
)

// BlobID is the libp2p protocol ID of blob transfer.
const BlobID = "/tern/blob/1.0.0"

// MaxBlobSize is the largest blob a fetch accepts, as capsule.DefaultLimits
// bounds a file in a capsule: a peer announcing more is refused before a
// byte is written.
const MaxBlobSize = 16 << 30

// BlobChunk is the most file bytes one data frame carries.
const BlobChunk = 1 << 20

// maxBlobFrame bounds a blob frame: a chunk, or a header.
const maxBlobFrame = BlobChunk

// Errors of a blob transfer; match with errors.Is.
var (
	// ErrNoBlob means the peer does not hold the blob.
	ErrNoBlob = errors.New("the peer does not hold that blob")
	// ErrBlobHash means the whole blob did not hash to its name: the peer
	// sent other bytes (the transport is authenticated, so they are the
	// bytes it sent). The partial file is removed; fetch it again,
	// preferably from another peer.
	ErrBlobHash = errors.New("the blob does not match its sha256")
)

// BlobSource is what a node serves blobs from. Blobs are served per
// agent: a peer gets a blob only from a capsule shared with it.
type BlobSource interface {
	// OpenBlob opens the blob with the given sha256 hex name from the
	// agent's capsule, if that capsule is shared with peer and holds it,
	// or returns an error wrapping ErrNoBlob.
	OpenBlob(agent, peer, sha256Hex string) (io.ReadSeekCloser, int64, error)
	// HeldBlobs returns those of hashes that the agent's capsule holds, if
	// it is shared with peer; none otherwise.
	HeldBlobs(agent, peer string, hashes []string) []string
}

// MaxHaveQuery is the most hashes one have query may name.
const MaxHaveQuery = 4096

// maxBlobRequest bounds a request frame: a have query of MaxHaveQuery names.
const maxBlobRequest = 128 + MaxHaveQuery*67

// blobRequest is the first frame of a blob stream: either a fetch of one
// blob from an offset, or a have query.
type blobRequest struct {
	Agent  string     `json:"agent"`
	SHA256 string     `json:"sha256,omitempty"`
	Offset int64      `json:"offset,omitempty"`
	Have   []string   `json:"have,omitempty"`
	Blobs  []BlobWant `json:"blobs,omitempty"` // a fetch of many (FetchBlobs)
}

type blobHeader struct {
	SHA256 string   `json:"sha256,omitempty"` // in an answer to a fetch of many: which blob follows
	Size   int64    `json:"size"`
	Have   []string `json:"have,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// Progress is told, after each chunk is written, how many bytes of the
// blob are on disk and its whole size. It is called from the goroutine
// that writes, one call at a time, and never after FetchBlob returns.
type Progress func(done, size int64)

func isSHA256Hex(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}

// ServeBlob answers one request from peer on rw. A have query gets the
// subset of its names that the agent's capsule holds. A fetch gets a
// header with the blob's size (or an error), then the bytes from the
// requested offset in frames of at most BlobChunk bytes.
func ServeBlob(rw io.ReadWriter, src BlobSource, peer string) error {
	r := bufio.NewReader(rw)
	p, err := ReadFrame(r, maxBlobRequest)
	if err != nil {
		return err
	}
	var req blobRequest
	if err := json.Unmarshal(p, &req); err != nil || req.Agent == "" || req.Offset < 0 || len(req.Have) > MaxHaveQuery || len(req.Blobs) > MaxBlobBatch {
		return fmt.Errorf("%w: bad blob request", ErrProtocol)
	}
	answer := func(h blobHeader) error {
		b, _ := json.Marshal(h)
		return WriteFrame(rw, b)
	}
	if len(req.Blobs) > 0 {
		return serveBlobs(rw, src, peer, req.Agent, req.Blobs, answer)
	}
	if req.SHA256 == "" {
		for _, h := range req.Have {
			if !isSHA256Hex(h) {
				return fmt.Errorf("%w: have query names %q", ErrProtocol, h)
			}
		}
		held := src.HeldBlobs(req.Agent, peer, req.Have)
		if held == nil {
			held = []string{}
		}
		return answer(blobHeader{Have: held})
	}
	if !isSHA256Hex(req.SHA256) {
		return fmt.Errorf("%w: bad blob name %q", ErrProtocol, req.SHA256)
	}
	f, size, err := src.OpenBlob(req.Agent, peer, req.SHA256)
	if errors.Is(err, ErrNoBlob) {
		return answer(blobHeader{Error: "not found"}) // an answer, not a failure: the stream closes cleanly
	}
	if err != nil {
		answer(blobHeader{Error: "cannot read it"})
		return err
	}
	defer f.Close()
	if err := answer(blobHeader{Size: size}); err != nil {
		return err
	}
	if req.Offset > size {
		req.Offset = size
	}
	if _, err := f.Seek(req.Offset, io.SeekStart); err != nil {
		return err
	}
	return sendChunks(rw, f, make([]byte, binary.MaxVarintLen64+BlobChunk))
}

// sendChunks sends what is left of f in data frames of at most BlobChunk
// bytes, each read in place into buf behind room for its length, so that
// a frame is one Write and nothing is copied or allocated per chunk.
func sendChunks(rw io.Writer, f io.Reader, buf []byte) error {
	data := buf[binary.MaxVarintLen64:]
	var length [binary.MaxVarintLen64]byte
	for {
		n, err := io.ReadFull(f, data)
		if n > 0 {
			l := binary.PutUvarint(length[:], uint64(n))
			start := binary.MaxVarintLen64 - l
			copy(buf[start:], length[:l])
			if _, werr := rw.Write(buf[start : binary.MaxVarintLen64+n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// AskHave asks which of hashes the peer holds for agent, over rw (one
// query of at most MaxHaveQuery names).
func AskHave(rw io.ReadWriter, agent string, hashes []string) ([]string, error) {
	if len(hashes) > MaxHaveQuery {
		return nil, fmt.Errorf("a have query names at most %d blobs, not %d", MaxHaveQuery, len(hashes))
	}
	var hdr blobHeader
	if err := ask(rw, bufio.NewReader(rw), blobRequest{Agent: agent, Have: hashes}, maxBlobRequest, "have answer", &hdr); err != nil {
		return nil, err
	}
	asked := make(map[string]bool, len(hashes))
	for _, h := range hashes {
		asked[h] = true
	}
	for _, h := range hdr.Have {
		if !asked[h] {
			return nil, fmt.Errorf("%w: have answer names %q, which was not asked", ErrProtocol, h)
		}
	}
	return hdr.Have, nil
}

// FetchBlob fetches the agent's blob named sha256Hex over rw into the
// partial file at partial, resuming after the bytes it already holds. The
// bytes are hashed as they are written; on return without error the
// whole file has been checked against the blob's name, and is not yet
// fsynced: the caller makes it durable before it lists it anywhere, with
// the other blobs it adopts at once (capsule.Dir.AdoptCheckedBlobs). It
// returns the number of bytes received. On a broken stream partial keeps
// every byte received (fsynced, for the next attempt to resume after); on
// ErrBlobHash or ErrProtocol it is removed. progress, if not nil, follows
// the transfer.
func FetchBlob(rw io.ReadWriter, agent, sha256Hex, partial string, progress Progress) (int64, error) {
	return fetchBlob(rw, agent, sha256Hex, partial, progress, nil)
}

// fetchBlob is FetchBlob that, once the blob's size is known, calls
// reserve (if not nil) with the bytes of memory its transfer will hold,
// and gives up if it fails.
func fetchBlob(rw io.ReadWriter, agent, sha256Hex, partial string, progress Progress, reserve func(int) error) (int64, error) {
	want, err := hex.DecodeString(sha256Hex)
	if err != nil || len(want) != sha256.Size {
		return 0, fmt.Errorf("%q is not a sha256 hex name", sha256Hex)
	}
	f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := sha256.New()
	offset, err := io.Copy(h, f) // the bytes a previous attempt kept
	if err != nil {
		return 0, err
	}
	r := bufio.NewReaderSize(rw, fetchReadBuffer)
	var hdr blobHeader
	if err := ask(rw, r, blobRequest{Agent: agent, SHA256: sha256Hex, Offset: offset}, 1<<10, "blob header", &hdr); err != nil {
		return 0, err
	}
	if hdr.Error != "" {
		return 0, fmt.Errorf("%w: %s", ErrNoBlob, hdr.Error)
	}
	return receiveBlob(r, f, h, want, partial, offset, hdr.Size, progress, reserve)
}

// receiveBlob receives the bytes from offset to size of the blob whose
// sha256 is want from r into f (the partial file at partial, holding the
// bytes before offset, already in h): see FetchBlob for what a cut, a
// broken protocol or other bytes leave.
func receiveBlob(r *bufio.Reader, f *os.File, h hash.Hash, want []byte, partial string, offset, size int64, progress Progress, reserve func(int) error) (int64, error) {
	if size < 0 || size > MaxBlobSize {
		return 0, fmt.Errorf("%w: the peer announces a blob of %d bytes; at most %d are accepted", ErrProtocol, size, int64(MaxBlobSize))
	}
	if offset > size {
		return 0, fmt.Errorf("%w: the peer announces a blob of %d bytes, and %d are here already", ErrProtocol, size, offset)
	}
	chunk, buffers := chunkPlan(offset, size)
	if reserve != nil {
		if err := reserve(buffers*int(chunk) + fetchReadBuffer); err != nil {
			return 0, err
		}
	}
	w := startChunkWriter(f, h, offset, size, progress)
	err := receiveChunks(r, w, offset, size)
	got, werr := w.close()
	if err == nil {
		err = werr
	}
	if err != nil && !errors.Is(err, ErrProtocol) {
		if serr := f.Sync(); serr != nil {
			err = fmt.Errorf("%w (and keeping what came: %v)", err, serr)
		}
	}
	if errors.Is(err, ErrProtocol) {
		// A peer that breaks the protocol may have sent anything before;
		// nothing of it is kept to resume from.
		f.Close()
		os.Remove(partial)
		return got, err
	}
	if err != nil {
		return got, err // partial keeps what was written, fsynced, to resume after
	}
	if !bytes.Equal(h.Sum(nil), want) {
		f.Close()
		os.Remove(partial)
		return got, fmt.Errorf("%w: %s", ErrBlobHash, hex.EncodeToString(want))
	}
	return got, nil
}

// receiveChunks reads the data frames of the bytes from offset to size
// into w's buffers and hands them to w, until size or an error (w's
// included).
func receiveChunks(r *bufio.Reader, w *chunkWriter, offset, size int64) error {
	for offset < size {
		var buf []byte
		select {
		case <-w.failed:
			return nil // close returns the error
		default:
		}
		select {
		case buf = <-w.free:
		case <-w.failed:
			return nil
		}
		n, err := readFrameInto(r, buf)
		if errors.Is(err, ErrFrameTooLarge) {
			// The buffer holds what is left of the blob, or a whole chunk.
			return fmt.Errorf("%w: more bytes than the announced %d: %v", ErrProtocol, size, err)
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: empty chunk", ErrProtocol)
		}
		if offset+int64(n) > size {
			return fmt.Errorf("%w: more bytes than the announced %d", ErrProtocol, size)
		}
		w.full <- buf[:n]
		offset += int64(n)
	}
	return nil
}

// chunkWriterBuffers is how many chunks can be in flight between the
// goroutine that reads them from the stream and the one that writes them.
const chunkWriterBuffers = 4

// writebackEvery is how many bytes a chunkWriter writes before it starts
// their writeback to disk (see startWriteback).
const writebackEvery = 8 << 20

// chunkWriter writes a blob's chunks to its file and hashes them on its
// own goroutine, so that the next chunk is read from the stream
// meanwhile. Buffers come from free and go back to it once written; a
// write error closes failed, and the chunks after it are dropped.
type chunkWriter struct {
	free, full chan []byte
	failed     chan struct{}
	done       chan struct{}
	written    int64 // read only after done
	err        error // read only after done
	pooled     bool  // its buffers go back to chunkPool at close
}

// fetchReadBuffer is the size of a fetch's read buffer.
const fetchReadBuffer = 64 << 10

// chunkPlan returns the size and number of the buffers a transfer of the
// bytes from offset to size writes through: a small blob needs one of its
// size; a large one borrows full-sized ones from chunkPool (a tree of
// small files would otherwise allocate 4 MiB a file).
func chunkPlan(offset, size int64) (chunk int64, buffers int) {
	if rest := size - offset; rest < BlobChunk {
		return max(rest, 1), 1
	}
	return BlobChunk, chunkWriterBuffers
}

// chunkPool holds full-sized chunk buffers between fetches.
var chunkPool = sync.Pool{New: func() any { b := filecopy.AlignedBuffer(BlobChunk); return &b }}

func startChunkWriter(f *os.File, h io.Writer, offset, size int64, progress Progress) *chunkWriter {
	w := &chunkWriter{
		free:   make(chan []byte, chunkWriterBuffers),
		full:   make(chan []byte, chunkWriterBuffers),
		failed: make(chan struct{}),
		done:   make(chan struct{}),
	}
	chunk, n := chunkPlan(offset, size)
	for range n {
		if chunk == BlobChunk {
			w.free <- *chunkPool.Get().(*[]byte)
		} else {
			w.free <- make([]byte, chunk)
		}
	}
	w.pooled = chunk == BlobChunk
	// Full chunks are written past the page cache where they can be (see
	// filecopy.Direct); a small blob's one write goes through it.
	write, end := f.WriteAt, func() bool { return false }
	if w.pooled {
		d := filecopy.StartDirect(f)
		write, end = d.WriteAt, d.End
	}
	go func() {
		defer close(w.done)
		defer end()
		flushed := offset // the bytes before it are being written to disk
		for chunk := range w.full {
			if w.err == nil {
				if _, w.err = write(chunk, offset+w.written); w.err != nil {
					close(w.failed)
				} else {
					h.Write(chunk)
					w.written += int64(len(chunk))
					if end := offset + w.written; end-flushed >= writebackEvery {
						startWriteback(f, flushed, end-flushed)
						flushed = end
					}
					if progress != nil {
						progress(offset+w.written, size)
					}
				}
			}
			w.free <- chunk[:cap(chunk)]
		}
	}()
	return w
}

// close waits for the chunks handed over to be written, and returns how
// many bytes were and the first write error.
func (w *chunkWriter) close() (int64, error) {
	close(w.full)
	<-w.done
	if w.pooled {
		for len(w.free) > 0 {
			b := <-w.free
			chunkPool.Put(&b)
		}
	}
	return w.written, w.err
}
