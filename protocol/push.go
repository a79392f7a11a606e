package protocol

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// PushID is the libp2p protocol ID of blob pushes. A node storing a large
// file as a blob that an event of an agent will name (a file of a snapshot)
// sends its bytes to its peers while it is still reading them for their
// hash, so that a peer has the blob about when the node has it, not a
// whole transfer later. The hash comes last. The peer hashes what it
// receives and keeps it aside, under that hash, only if the pusher's hash
// is the same; nothing it holds changes until an event it accepts names
// the blob. An offer (OfferID) names a blob once it is stored; a push sends
// its bytes before.
//
// On the stream: a frame holding PushHeader, the blob's bytes in data
// frames (as a blob fetch sends them), a frame holding the sha256 hex
// (pushEnd); the peer answers with a frame holding pushAnswer.
const PushID = "/tern/push/1.0.0"

// PushTimeout bounds one push.
const PushTimeout = 30 * time.Minute

// pushIdle is how long a push may send nothing before the peer gives it
// up: a pusher killed over QUIC is otherwise seen only when the
// connection's idle timeout ends it, and its half-pushed file would wait
// in partial/ until then. The pusher waits as long for the answer.
const pushIdle = 10 * time.Second

// PushHeader says what a push carries: size bytes of a blob of agent.
type PushHeader struct {
	Agent string `json:"agent"`
	Size  int64  `json:"size"`
}

type pushEnd struct {
	SHA256 string `json:"sha256"`
}

// pushAnswer is the peer's answer to a whole push: kept, or why not.
type pushAnswer struct {
	Kept  bool   `json:"kept"`
	Error string `json:"error,omitempty"`
}

// maxPushFrame bounds a push's header, end and answer frames.
const maxPushFrame = 4 << 10

func (hd PushHeader) check() error {
	switch {
	case hd.Agent == "":
		return fmt.Errorf("%w: a push names no agent", ErrProtocol)
	case hd.Size <= 0 || hd.Size > MaxBlobSize:
		return fmt.Errorf("%w: a push of %d bytes; 1 to %d are accepted", ErrProtocol, hd.Size, int64(MaxBlobSize))
	}
	return nil
}

// Pushing is a push under way to one peer (see StartPush).
type Pushing struct {
	s    network.Stream
	sent chan error
}

// StartPush opens a push of hd.Size bytes of a blob of hd.Agent to p and
// sends them from r in the background; Sent says when they are sent.
// End or Abort must follow.
func StartPush(ctx context.Context, h host.Host, p peer.ID, hd PushHeader, r io.Reader) (*Pushing, error) {
	if err := hd.check(); err != nil {
		return nil, err
	}
	head, err := json.Marshal(hd)
	if err != nil {
		return nil, err
	}
	s, err := h.NewStream(ctx, p, PushID)
	if err != nil {
		return nil, err
	}
	_ = s.SetDeadline(time.Now().Add(PushTimeout))
	x := &Pushing{s: s, sent: make(chan error, 1)}
	go func() {
		err := WriteFrame(s, head)
		if err == nil {
			err = sendChunks(s, io.LimitReader(r, hd.Size), make([]byte, binary.MaxVarintLen64+BlobChunk))
		}
		x.sent <- err
	}()
	return x, nil
}

// Sent receives once, when every byte has been sent (nil) or sending
// failed.
func (x *Pushing) Sent() <-chan error { return x.sent }

// End, once every byte has been sent, sends the blob's sha256 and waits
// for the peer's answer: nil if it kept the blob.
func (x *Pushing) End(sha256Hex string) error {
	_ = x.s.SetReadDeadline(time.Now().Add(pushIdle))
	var a pushAnswer
	if err := ask(x.s, bufio.NewReader(x.s), pushEnd{sha256Hex}, maxPushFrame, "a push's answer", &a); err != nil {
		x.s.Reset()
		return err
	}
	if err := Finish(x.s); err != nil {
		return err
	}
	if !a.Kept {
		return fmt.Errorf("the peer did not keep the pushed blob: %s", a.Error)
	}
	return nil
}

// Abort ends a push that is not to finish; the peer keeps nothing of it.
func (x *Pushing) Abort() { x.s.Reset() }

// ServePush receives one push from rw. take decides from its header
// whether to receive it: it returns the new file the bytes go to, and
// finish, which ServePush calls once it has received them: with the blob's
// sha256 if they hash to what the pusher says, after closing the file (a
// node moves it where the blob waits for an event), or with "" after
// removing the file (a cut, a broken push, other bytes). The pusher is
// told whether the blob was kept.
func ServePush(rw io.ReadWriter, take func(PushHeader) (f *os.File, finish func(sha256Hex string) error, err error)) error {
	r := bufio.NewReaderSize(rw, fetchReadBuffer)
	var hd PushHeader
	if err := readJSON(r, maxPushFrame, "a push's header", &hd); err != nil {
		return err
	}
	if err := hd.check(); err != nil {
		return err
	}
	f, finish, err := take(hd)
	if err != nil {
		return answerPush(rw, err)
	}
	kept := false
	defer func() {
		if !kept {
			f.Close()
			os.Remove(f.Name())
			finish("")
		}
	}()
	h := sha256.New()
	w := startChunkWriter(f, h, 0, hd.Size, nil)
	err = receiveChunks(r, w, 0, hd.Size)
	if _, werr := w.close(); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	var end pushEnd
	if err := readJSON(r, maxPushFrame, "a push's end", &end); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != end.SHA256 {
		return answerPush(rw, fmt.Errorf("%w: the bytes pushed hash to %s, the pusher says %q", ErrBlobHash, got, end.SHA256))
	}
	if err := f.Close(); err != nil {
		return answerPush(rw, err)
	}
	kept = true
	return answerPush(rw, finish(end.SHA256))
}

// answerPush tells the pusher whether its push was kept, and returns why
// not.
func answerPush(w io.Writer, why error) error {
	a := pushAnswer{Kept: why == nil}
	if why != nil {
		a.Error = why.Error()
	}
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return errors.Join(why, WriteFrame(w, data))
}

// HandlePush serves PushID on h: each push a peer starts goes to take with
// the peer's id (see ServePush).
func HandlePush(h host.Host, take func(p peer.ID, hd PushHeader) (f *os.File, finish func(sha256Hex string) error, err error), log *slog.Logger) {
	h.SetStreamHandler(PushID, func(s network.Stream) {
		_ = s.SetDeadline(time.Now().Add(PushTimeout))
		p := s.Conn().RemotePeer()
		err := ServePush(idleStream{s}, func(hd PushHeader) (*os.File, func(string) error, error) { return take(p, hd) })
		if err != nil {
			s.Reset()
		} else {
			err = Finish(s)
		}
		if err != nil {
			log.Debug("blob push not kept", "peer", p, "err", err)
		}
	})
}

// idleStream is a stream whose every read must start getting bytes within
// pushIdle.
type idleStream struct{ network.Stream }

func (s idleStream) Read(p []byte) (int, error) {
	_ = s.SetReadDeadline(time.Now().Add(pushIdle))
	return s.Stream.Read(p)
}
