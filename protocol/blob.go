package protocol

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// BlobID is the libp2p protocol ID of blob transfer.
const BlobID = "/tern/blob/1.0.0"

// BlobChunk is the most file bytes one data frame carries.
const BlobChunk = 256 << 10

// maxBlobFrame bounds a blob frame: a chunk and its hash, or a header.
const maxBlobFrame = BlobChunk + sha256.Size + 1

// Errors of a blob transfer; match with errors.Is.
var (
	// ErrNoBlob means the peer does not hold the blob.
	ErrNoBlob = errors.New("the peer does not hold that blob")
	// ErrBadChunk means a chunk did not match the hash sent with it: the
	// chunk is dropped, what came before it is kept, and the transfer can
	// resume from there.
	ErrBadChunk = errors.New("a chunk did not match its hash")
	// ErrBlobHash means the whole blob did not hash to its name: the peer
	// sent other bytes. The partial file is removed; fetch it again,
	// preferably from another peer.
	ErrBlobHash = errors.New("the blob does not match its sha256")
)

// BlobSource is what a node serves blobs from.
type BlobSource interface {
	// OpenBlob opens the blob with the given sha256 hex name, or returns an
	// error wrapping ErrNoBlob.
	OpenBlob(sha256Hex string) (io.ReadSeekCloser, int64, error)
}

type blobRequest struct {
	SHA256 string `json:"sha256"`
	Offset int64  `json:"offset"`
}

type blobHeader struct {
	Size  int64  `json:"size"`
	Error string `json:"error,omitempty"`
}

// ServeBlob answers one blob request on rw: a header with the blob's size
// (or an error), then the bytes from the requested offset in frames of at
// most BlobChunk bytes, each preceded by its sha256.
func ServeBlob(rw io.ReadWriter, src BlobSource) error {
	r := bufio.NewReader(rw)
	p, err := ReadFrame(r, 1<<10)
	if err != nil {
		return err
	}
	var req blobRequest
	if err := json.Unmarshal(p, &req); err != nil || len(req.SHA256) != 64 || req.Offset < 0 {
		return fmt.Errorf("%w: bad blob request", ErrProtocol)
	}
	f, size, err := src.OpenBlob(req.SHA256)
	if err != nil {
		h, _ := json.Marshal(blobHeader{Error: "not found"})
		WriteFrame(rw, h)
		return err
	}
	defer f.Close()
	h, _ := json.Marshal(blobHeader{Size: size})
	if err := WriteFrame(rw, h); err != nil {
		return err
	}
	if req.Offset > size {
		req.Offset = size
	}
	if _, err := f.Seek(req.Offset, io.SeekStart); err != nil {
		return err
	}
	buf := make([]byte, BlobChunk)
	frame := make([]byte, 0, sha256.Size+BlobChunk)
	for {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			sum := sha256.Sum256(buf[:n])
			frame = append(append(frame[:0], sum[:]...), buf[:n]...)
			if werr := WriteFrame(rw, frame); werr != nil {
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

// FetchBlob fetches the blob named sha256Hex over rw into the partial file
// at partial, resuming after the bytes it already holds. Each chunk is
// checked against its hash as it arrives and fsynced before the next
// request could resume after it; the whole file is checked against the
// blob's name at the end. It returns the number of bytes received. On
// ErrBadChunk or a broken stream, partial keeps every good byte; on
// ErrBlobHash it is removed.
func FetchBlob(rw io.ReadWriter, sha256Hex, partial string) (int64, error) {
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
	req, _ := json.Marshal(blobRequest{SHA256: sha256Hex, Offset: offset})
	if err := WriteFrame(rw, req); err != nil {
		return 0, err
	}
	r := bufio.NewReaderSize(rw, 64<<10)
	p, err := ReadFrame(r, 1<<10)
	if err != nil {
		return 0, err
	}
	var hdr blobHeader
	if err := json.Unmarshal(p, &hdr); err != nil {
		return 0, fmt.Errorf("%w: blob header: %v", ErrProtocol, err)
	}
	if hdr.Error != "" {
		return 0, fmt.Errorf("%w: %s", ErrNoBlob, hdr.Error)
	}
	var got int64
	defer f.Sync()
	for offset < hdr.Size {
		p, err := ReadFrame(r, maxBlobFrame)
		if err != nil {
			return got, err
		}
		if len(p) <= sha256.Size {
			return got, fmt.Errorf("%w: empty chunk", ErrProtocol)
		}
		sum, chunk := p[:sha256.Size], p[sha256.Size:]
		if s := sha256.Sum256(chunk); !bytes.Equal(s[:], sum) {
			return got, fmt.Errorf("%w at byte %d", ErrBadChunk, offset)
		}
		if offset+int64(len(chunk)) > hdr.Size {
			return got, fmt.Errorf("%w: more bytes than the announced %d", ErrProtocol, hdr.Size)
		}
		if _, err := f.Write(chunk); err != nil {
			return got, err
		}
		h.Write(chunk)
		offset += int64(len(chunk))
		got += int64(len(chunk))
	}
	if err := f.Sync(); err != nil {
		return got, err
	}
	if !bytes.Equal(h.Sum(nil), want) {
		f.Close()
		os.Remove(partial)
		return got, fmt.Errorf("%w: %s", ErrBlobHash, sha256Hex)
	}
	return got, nil
}
