package protocol

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tern-dev/tern/journal"
)

// CapsuleID is the libp2p protocol ID with which a node learns which
// capsules a peer holds and takes a copy of one it lacks.
const CapsuleID = "/tern/capsule/1.0.0"

// ErrNoCapsule means the peer does not share that capsule.
var ErrNoCapsule = errors.New("the peer does not share that capsule")

// Capsules is what a node shares with a peer.
type Capsules interface {
	// Shared returns the ids of the agents shared with peer.
	Shared(peer string) ([]string, error)
	// Vector returns the vector of the agent's journal (cheaply: a round
	// over idle capsules must not open them).
	Vector(agent string) (journal.Vector, error)
	// Export writes the agent's capsule as a tar to w, with every blob,
	// or with only the blobs of at most SmallBlob bytes unless all
	// (capsule.PackOptions.BlobsUpTo), or returns an error wrapping
	// ErrNoCapsule when it is not shared with peer.
	Export(agent, peer string, all bool, w io.Writer) error
}

// SmallBlob is the size of the largest blob that travels inside a first
// copy's tar; larger ones follow over BlobID as wants (a stream each,
// resumable), and smaller ones would cost a stream each for little.
const SmallBlob = BlobChunk

type capsuleRequest struct {
	Op    string `json:"op"` // "list" or "get"
	Agent string `json:"agent,omitempty"`
	// SmallBlobsOnly asks for the capsule with only its blobs of at most
	// SmallBlob bytes; the asker fetches the others over BlobID as its
	// wants (added in tern 0.x; an older peer sends them all in the tar,
	// which is a capsule too).
	SmallBlobsOnly bool `json:"small_blobs_only,omitempty"`
}

type capsuleAnswer struct {
	Agents []string `json:"agents,omitempty"`
	// Vectors has the VectorDigest of each listed agent's journal, so
	// that a peer holding the same events needs no exchange (added in
	// tern 0.x; a list without it is answered by an exchange each).
	Vectors map[string]string `json:"vectors,omitempty"`
	Error   string            `json:"error,omitempty"`
}

// VectorDigest names a journal's vector in 32 hex digits: two nodes whose
// digests of an agent are equal hold the same events of it (each machine's
// chain up to the same head).
func VectorDigest(v journal.Vector) string {
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// ServeCapsules answers one request on rw: the list of shared agents, or
// one capsule as a tar (a header frame, then the tar's bytes in frames).
func ServeCapsules(rw io.ReadWriter, c Capsules, peer string) error {
	p, err := ReadFrame(bufio.NewReader(rw), 1<<10)
	if err != nil {
		return err
	}
	var req capsuleRequest
	if err := json.Unmarshal(p, &req); err != nil {
		return fmt.Errorf("%w: capsule request: %v", ErrProtocol, err)
	}
	answer := func(a capsuleAnswer) error {
		b, _ := json.Marshal(a)
		return WriteFrame(rw, b)
	}
	switch req.Op {
	case "list":
		ids, err := c.Shared(peer)
		if err != nil {
			answer(capsuleAnswer{Error: "cannot list"})
			return err
		}
		if ids == nil {
			ids = []string{}
		}
		vectors := make(map[string]string, len(ids))
		for _, id := range ids {
			if v, err := c.Vector(id); err == nil {
				vectors[id] = VectorDigest(v)
			}
		}
		return answer(capsuleAnswer{Agents: ids, Vectors: vectors})
	case "get":
		ids, err := c.Shared(peer)
		if err != nil {
			return err
		}
		shared := false
		for _, id := range ids {
			shared = shared || id == req.Agent
		}
		if !shared {
			return answer(capsuleAnswer{Error: "not shared"})
		}
		if err := answer(capsuleAnswer{}); err != nil {
			return err
		}
		fw := &frameWriter{w: rw}
		if err := c.Export(req.Agent, peer, !req.SmallBlobsOnly, fw); err != nil {
			return err // the stream is reset: the fetcher sees a cut, not a capsule
		}
		return fw.flush()
	default:
		return fmt.Errorf("%w: capsule request op %q", ErrProtocol, req.Op)
	}
}

// frameWriter cuts a byte stream into frames of at most BlobChunk bytes;
// an empty frame ends it.
type frameWriter struct {
	w   io.Writer
	buf []byte
}

func (f *frameWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(BlobChunk-len(f.buf), len(p))
		f.buf = append(f.buf, p[:k]...)
		p = p[k:]
		if len(f.buf) == BlobChunk {
			if err := WriteFrame(f.w, f.buf); err != nil {
				return 0, err
			}
			f.buf = f.buf[:0]
		}
	}
	return n, nil
}

func (f *frameWriter) flush() error {
	if len(f.buf) > 0 {
		if err := WriteFrame(f.w, f.buf); err != nil {
			return err
		}
	}
	return WriteFrame(f.w, nil)
}

// ListCapsules asks the peer on rw which agents it shares with us, and
// the VectorDigest of each (none from a peer that does not send them).
func ListCapsules(rw io.ReadWriter) ([]string, map[string]string, error) {
	var a capsuleAnswer
	if err := ask(rw, bufio.NewReader(rw), capsuleRequest{Op: "list"}, 16<<20, "capsule list", &a); err != nil {
		return nil, nil, err
	}
	if a.Error != "" {
		return nil, nil, fmt.Errorf("capsule list: %s", a.Error)
	}
	return a.Agents, a.Vectors, nil
}

// FetchCapsule asks the peer on rw for the agent's capsule, with all its
// blobs or its small ones only (see capsuleRequest), and writes the tar
// to w, at most max bytes. The caller checks the tar (capsule.UnpackFrom verifies
// everything before a capsule appears).
func FetchCapsule(rw io.ReadWriter, agent string, all bool, w io.Writer, max int64) (int64, error) {
	r := bufio.NewReaderSize(rw, 64<<10)
	var a capsuleAnswer
	if err := ask(rw, r, capsuleRequest{Op: "get", Agent: agent, SmallBlobsOnly: !all}, 1<<10, "capsule header", &a); err != nil {
		return 0, err
	}
	if a.Error != "" {
		return 0, fmt.Errorf("%w: %s", ErrNoCapsule, a.Error)
	}
	var n int64
	for {
		p, err := ReadFrame(r, BlobChunk)
		if err != nil {
			return n, err
		}
		if len(p) == 0 {
			return n, nil
		}
		if n += int64(len(p)); n > max {
			return n, fmt.Errorf("capsule %s is over the limit of %d bytes", agent, max)
		}
		if _, err := w.Write(p); err != nil {
			return n, err
		}
	}
}
