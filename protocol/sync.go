package protocol

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/tern-dev/tern/journal"
)

// SyncID is the libp2p protocol ID of the journal sync exchange.
const SyncID = "/tern/sync/1.0.0"

// MaxSyncFrame bounds one frame of a sync exchange: one event line (a large
// tool result included) after its tag byte, or a version vector. Every
// event a tern writes fits (journal.MaxLineSize).
const MaxSyncFrame = 1 + journal.MaxLineSize

// addBatch and addBatchBytes bound how many received events, and how
// many of their bytes, are checked and handed to the store at once, so
// that catching up on a long absence needs bounded memory.
const (
	addBatch      = 1024
	addBatchBytes = 4 << 20
)

// Frame tags: the first byte of every sync frame.
const (
	tagHello  = 'H' // initiator: {"agent", "vector"}
	tagEvent  = 'E' // one event line, exactly as stored
	tagDone   = 'D' // end of the sender's events: {"vector"}
	tagRefuse = 'X' // responder: {"reason"}; the exchange ends
)

// Errors of a sync exchange; match with errors.Is.
var (
	// ErrNotShared is what a Journals returns for an agent it does not hold
	// or does not share with that peer; the exchange is refused.
	ErrNotShared = errors.New("agent not shared with this peer")
	// ErrRefused means the peer refused the exchange.
	ErrRefused = errors.New("the peer refused to sync")
	// ErrProtocol means the peer broke the protocol: a frame out of place,
	// an unknown tag, a malformed message or event. Reset the stream.
	ErrProtocol = errors.New("sync protocol violation")
)

// Journals is what the sync exchange needs from a node.
type Journals interface {
	// Events returns the agent's events if the node shares the agent with
	// peer (a peer ID string), or an error wrapping ErrNotShared.
	Events(agent, peer string) ([]*journal.Event, error)
	// Add stores events received from peer, durably, before returning.
	// Events already held are ignored; a fork is kept and reported.
	Add(ctx context.Context, agent, peer string, events []*journal.Event) error
}

// Rejecter is an optional interface of a Journals: it is told of every
// event a peer sent that did not check (bad signature, bad id, not
// canonical, …) before the exchange is ended, so that a node can keep it
// aside and show it rather than only log it.
type Rejecter interface {
	Reject(agent, peer string, line []byte, err error)
}

// Recorder is an optional interface of a Journals: it is told, after each
// exchange a peer started that succeeded, the vector both sides held when
// it ended (SyncStats.Both), so that a node can skip an exchange with a
// peer that holds everything it holds.
type Recorder interface {
	Synced(agent, peer string, both journal.Vector)
}

// Tracker is an optional interface of a Journals: Respond tells it when
// an exchange a peer started begins, and calls the returned end when it
// ends, however it ends, so that a node can hold back an exchange of its
// own with that peer for that agent meanwhile (it would carry the same
// events again: the peer's vector is not yet what it will be).
type Tracker interface {
	Exchanging(agent, peer string) (end func())
}

// SyncStats says what one exchange moved, in events and in frame bytes.
type SyncStats struct {
	Sent, Received           int
	BytesSent, BytesReceived int64
	// Both is, once the exchange succeeded, a vector of events both sides
	// hold: the initiator's vector after it stored what it received, which
	// is what it announces in its last frame.
	Both journal.Vector
}

type hello struct {
	Agent  string         `json:"agent"`
	Vector journal.Vector `json:"vector"`
}

type done struct {
	Vector journal.Vector `json:"vector"`
}

type refusal struct {
	Reason string `json:"reason"`
}

// stream is one side of an exchange: frames in and out, with counts.
type stream struct {
	r *bufio.Reader
	// w gathers event frames into writes of up to 64 KiB (one write of a
	// libp2p stream is a multiplexer frame and an encrypted record of its
	// own); the control frames (JSON) flush it, since each is followed by
	// a read or the end.
	w      *bufio.Writer
	stats  SyncStats
	unread *frame // a frame read ahead, returned by the next recv
}

type frame struct {
	tag     byte
	payload []byte
}

func newStream(rw io.ReadWriter) *stream {
	return &stream{r: bufio.NewReaderSize(rw, 64<<10), w: bufio.NewWriterSize(rw, 64<<10)}
}

// uvarintLen is the length of n as an unsigned varint.
func uvarintLen(n uint64) int {
	k := 1
	for ; n >= 0x80; n >>= 7 {
		k++
	}
	return k
}

// send writes one frame, its tag then payload, into the stream's buffer.
func (s *stream) send(tag byte, payload []byte) error {
	var head [binary.MaxVarintLen64 + 1]byte
	n := binary.PutUvarint(head[:], uint64(1+len(payload)))
	head[n] = tag
	s.stats.BytesSent += int64(n + 1 + len(payload))
	if _, err := s.w.Write(head[:n+1]); err != nil {
		return err
	}
	_, err := s.w.Write(payload)
	return err
}

// sendJSON sends a control frame and flushes what the buffer holds.
func (s *stream) sendJSON(tag byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := s.send(tag, b); err != nil {
		return err
	}
	return s.w.Flush()
}

func (s *stream) recv() (byte, []byte, error) {
	if f := s.unread; f != nil {
		s.unread = nil
		return f.tag, f.payload, nil
	}
	p, err := ReadFrame(s.r, MaxSyncFrame)
	if err != nil {
		return 0, nil, err
	}
	s.stats.BytesReceived += int64(len(p)) + int64(uvarintLen(uint64(len(p))))
	if len(p) == 0 {
		return 0, nil, fmt.Errorf("%w: empty frame", ErrProtocol)
	}
	return p[0], p[1:], nil
}

// sendMissing sends, in total order (so each chain in its own order),
// every event the peer's vector says it lacks, then our vector, which it
// returns.
func (s *stream) sendMissing(events []*journal.Event, theirs journal.Vector) (journal.Vector, error) {
	for _, e := range journal.Since(events, theirs) {
		if err := s.send(tagEvent, e.Line()); err != nil {
			return nil, err
		}
		s.stats.Sent++
	}
	ours := journal.VectorOf(events)
	return ours, s.sendJSON(tagDone, done{Vector: ours})
}

// receiveEvents reads event frames up to the sender's done frame, checks
// each event completely (journal.ParseLines, a batch at a time on every
// CPU) and hands them to the store in batches, in order, each only once it
// checked. Storing a batch (a write and an fsync) runs on its own
// goroutine, beside the checking of the next one and the reading of the
// one after: at most three batches are held at once. It returns the
// sender's vector once every batch is stored.
func (s *stream) receiveEvents(ctx context.Context, j Journals, agent, peer string) (journal.Vector, error) {
	checked := make(chan []*journal.Event, 1)
	stored := make(chan error, 1)
	var failed atomic.Pointer[error] // the store's first error, for the reader to stop at
	go func() {
		var err error
		for events := range checked {
			if err == nil {
				if err = j.Add(ctx, agent, peer, events); err != nil {
					failed.Store(&err)
				}
			}
		}
		stored <- err
	}()
	// end waits for the batches handed over to be stored, and returns err,
	// or else the store's error.
	end := func(err error) error {
		close(checked)
		if serr := <-stored; err == nil {
			err = serr
		}
		return err
	}
	var lines [][]byte
	size := 0
	check := func() error {
		if err := failed.Load(); err != nil {
			return *err
		}
		if len(lines) == 0 {
			return nil
		}
		events, bad, err := journal.ParseLines(lines)
		if err != nil {
			if r, ok := j.(Rejecter); ok {
				r.Reject(agent, peer, lines[bad], err)
			}
			return fmt.Errorf("%w: event %d from %s: %w", ErrProtocol, s.stats.Received+bad+1, peer, err)
		}
		s.stats.Received += len(events)
		lines, size = lines[:0], 0 // the events hold copies of their lines
		checked <- events
		return nil
	}
	for {
		tag, payload, err := s.recv()
		if err != nil {
			return nil, end(err)
		}
		switch tag {
		case tagEvent:
			lines, size = append(lines, payload), size+len(payload)
			if len(lines) == addBatch || size >= addBatchBytes {
				if err := check(); err != nil {
					return nil, end(err)
				}
			}
		case tagDone:
			var d done
			if err := json.Unmarshal(payload, &d); err != nil {
				return nil, end(fmt.Errorf("%w: done: %v", ErrProtocol, err))
			}
			return d.Vector, end(check())
		default:
			return nil, end(fmt.Errorf("%w: unexpected frame %q while receiving events", ErrProtocol, tag))
		}
	}
}

// Initiate runs the initiator's side of a sync exchange for one agent with
// peer over rw: it sends its vector, receives and stores what it lacks,
// then sends what the peer lacks. On return both sides hold the union of
// the two event sets (as of the exchange), unless an error says otherwise.
func Initiate(ctx context.Context, rw io.ReadWriter, j Journals, peer, agent string) (SyncStats, error) {
	s := newStream(rw)
	ours, err := j.Events(agent, peer)
	if err != nil {
		return s.stats, err
	}
	if err := s.sendJSON(tagHello, hello{Agent: agent, Vector: journal.VectorOf(ours)}); err != nil {
		return s.stats, err
	}
	// A refusal comes instead of the first event frame.
	tag, payload, err := s.recv()
	if err != nil {
		return s.stats, err
	}
	if tag == tagRefuse {
		var r refusal
		_ = json.Unmarshal(payload, &r)
		return s.stats, fmt.Errorf("%w: %s", ErrRefused, r.Reason)
	}
	s.unread = &frame{tag, payload}
	theirs, err := s.receiveEvents(ctx, j, agent, peer)
	if err != nil {
		return s.stats, err
	}
	if ours, err = j.Events(agent, peer); err != nil { // now with what we received
		return s.stats, err
	}
	both, err := s.sendMissing(ours, theirs)
	if err == nil {
		s.stats.Both = both
	}
	return s.stats, err
}

// Respond runs the responder's side of a sync exchange with peer over rw:
// it reads the initiator's hello, refuses an agent it does not share,
// sends what the initiator lacks and stores what the initiator sends back.
func Respond(ctx context.Context, rw io.ReadWriter, j Journals, peer string) (SyncStats, error) {
	s := newStream(rw)
	tag, payload, err := s.recv()
	if err != nil {
		return s.stats, err
	}
	if tag != tagHello {
		return s.stats, fmt.Errorf("%w: first frame %q is not a hello", ErrProtocol, tag)
	}
	var h hello
	if err := json.Unmarshal(payload, &h); err != nil || h.Agent == "" {
		return s.stats, fmt.Errorf("%w: bad hello: %v", ErrProtocol, err)
	}
	if t, ok := j.(Tracker); ok {
		defer t.Exchanging(h.Agent, peer)()
	}
	ours, err := j.Events(h.Agent, peer)
	if err != nil {
		reason := "agent not shared"
		if !errors.Is(err, ErrNotShared) {
			reason = "internal error"
		}
		_ = s.sendJSON(tagRefuse, refusal{Reason: reason})
		return s.stats, err
	}
	if _, err := s.sendMissing(ours, h.Vector); err != nil {
		return s.stats, err
	}
	both, err := s.receiveEvents(ctx, j, h.Agent, peer)
	if err != nil {
		return s.stats, err
	}
	s.stats.Both = both
	if r, ok := j.(Recorder); ok {
		r.Synced(h.Agent, peer, both)
	}
	return s.stats, nil
}
