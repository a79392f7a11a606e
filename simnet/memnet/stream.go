package memnet

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/tern-dev/tern/internal/clock"
)

// pipe is one stream: its two ends, on one connection.
type pipe struct {
	num      uint64 // 0 until Sent numbers it
	opener   peer.ID
	acceptor peer.ID
	proto    protocol.ID
	conn     *conn
	dead     bool // reset, or its connection closed: nothing more is delivered
	a, b     *stream
	sent     [2]uint64 // messages sent by each end (b, a)
}

// end returns the opener's end if out, else the acceptor's.
func (p *pipe) end(out bool) *stream {
	if out {
		return p.a
	}
	return p.b
}

// stream is one end of a pipe: a network.Stream. Reads block until the
// network delivers bytes, EOF or a reset, or the read deadline passes.
type stream struct {
	network.Stream // what tern does not use; calling it panics
	net            *Network
	pipe           *pipe
	out            bool // the opener's end
	local, remote  peer.ID

	mu       sync.Mutex
	buf      []byte
	eof      bool  // the other end closed its side
	err      error // reset, or closed for reading
	wroteEOF bool  // this end closed its side
	stopped  bool  // the other end stopped reading before this one closed its side: writes fail
	deadline time.Time
	readable chan struct{} // cap 1: something changed
}

var _ network.Stream = (*stream)(nil)

func newStream(n *Network, p *pipe, out bool, local, remote peer.ID) *stream {
	return &stream{net: n, pipe: p, out: out, local: local, remote: remote, readable: make(chan struct{}, 1)}
}

// signal wakes a blocked reader. s.mu held.
func (s *stream) signal() {
	select {
	case s.readable <- struct{}{}:
	default:
	}
}

// wake wakes a blocked reader to look at its deadline.
func (s *stream) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signal()
}

// receive adds what the network delivered.
func (s *stream) receive(data []byte, eof bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.buf = append(s.buf, data...)
	s.eof = s.eof || eof
	s.signal()
}

// hangUp ends the stream with err: reads and writes fail from now on.
func (s *stream) hangUp(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	s.signal()
}

// stop is the other end's StopSending: what this end has not finished
// writing can no longer be written. s.mu not held.
func (s *stream) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wroteEOF {
		s.stopped = true
	}
}

// errStopped is what writing to a stream the other end stopped reading
// returns, in the words of quic-go, whose streams behave so.
var errStopped = errors.New("memnet: close called for canceled stream (the other end stopped reading)")

// errDeadline is what a read past its deadline returns: a net.Error that
// times out, as a real stream's.
var errDeadline error = os.ErrDeadlineExceeded

func (s *stream) Read(p []byte) (int, error) {
	for {
		s.mu.Lock()
		switch {
		case len(s.buf) > 0:
			k := copy(p, s.buf)
			s.buf = s.buf[k:]
			s.mu.Unlock()
			return k, nil
		case s.err != nil:
			err := s.err
			s.mu.Unlock()
			return 0, err
		case s.eof:
			s.mu.Unlock()
			return 0, io.EOF
		}
		dl := s.deadline
		s.mu.Unlock()
		if dl.IsZero() {
			<-s.readable
			continue
		}
		wait := time.Until(dl)
		if wait <= 0 {
			return 0, errDeadline
		}
		stop := s.net.clock.AfterFunc(wait, s.wake)
		<-s.readable
		stop()
	}
}

func (s *stream) Write(p []byte) (int, error) {
	if err := s.post(Data, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// post sends a message from this end.
func (s *stream) post(k Kind, data []byte) error {
	s.mu.Lock()
	switch {
	case s.err != nil && (k == Data || k == CloseWrite):
		err := s.err
		s.mu.Unlock()
		return err
	case s.stopped && (k == Data || k == CloseWrite):
		s.mu.Unlock()
		return errStopped
	case s.wroteEOF && (k == Data || k == CloseWrite):
		s.mu.Unlock()
		return errors.New("memnet: write on a stream closed for writing")
	}
	if k == CloseWrite {
		s.wroteEOF = true
	}
	s.mu.Unlock()
	n := s.net
	n.mu.Lock()
	defer n.mu.Unlock()
	p := s.pipe
	if p.dead {
		return network.ErrReset
	}
	i := btoi(s.out)
	p.sent[i]++
	m := &Message{Kind: k, From: s.local, To: s.remote, pipe: p, out: s.out, seq: p.sent[i]}
	if k == Data {
		m.Data = append([]byte(nil), data...)
	}
	n.send(m)
	return nil
}

func (s *stream) CloseWrite() error {
	s.mu.Lock()
	done := s.wroteEOF || s.err != nil
	stopped := s.stopped
	s.mu.Unlock()
	switch {
	case stopped:
		return errStopped
	case done:
		return nil
	}
	return s.post(CloseWrite, nil)
}

// CloseRead stops reading. As on QUIC, the other end learns it (a
// StopSending message) unless it had finished writing, and its writes
// fail from then on.
func (s *stream) CloseRead() error {
	s.stopReading(errors.New("memnet: stream closed for reading"))
	return nil
}

// stopReading ends this end's reading with err and tells the other end,
// unless it had closed its side already.
func (s *stream) stopReading(err error) {
	s.mu.Lock()
	tell := !s.eof && s.err == nil
	if s.err == nil {
		s.err = err
	}
	s.signal()
	s.mu.Unlock()
	if tell {
		s.post(StopSending, nil)
	}
}

// Close closes both sides, as go-libp2p's QUIC streams do: it closes the
// writing side and stops reading (see CloseRead); like a real stream, it
// does not wait for the other end.
func (s *stream) Close() error {
	err := s.CloseWrite()
	s.stopReading(errors.New("memnet: stream closed"))
	return err
}

func (s *stream) Reset() error {
	s.mu.Lock()
	already := s.err == network.ErrReset
	s.mu.Unlock()
	if !already {
		s.post(Reset, nil)
	}
	s.hangUp(network.ErrReset)
	return nil
}

func (s *stream) ResetWithError(network.StreamErrorCode) error { return s.Reset() }

func (s *stream) SetDeadline(t time.Time) error { return s.SetReadDeadline(t) }

func (s *stream) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	s.deadline = t
	s.signal()
	s.mu.Unlock()
	return nil
}

// SetWriteDeadline is accepted and ignored: writes never block.
func (s *stream) SetWriteDeadline(time.Time) error { return nil }

func (s *stream) Protocol() protocol.ID { return s.pipe.proto }

// Clock is the network's clock (see Host.Clock).
func (s *stream) Clock() clock.Clock { return s.net.clock }

func (s *stream) Conn() network.Conn { return connView{local: s.local, remote: s.remote} }

func (s *stream) Scope() network.StreamScope { return scope{} }

// connView is what a stream's Conn and a notification show of a
// connection: its two peers.
type connView struct {
	network.Conn // what tern does not use; calling it panics
	local        peer.ID
	remote       peer.ID
}

func (c connView) LocalPeer() peer.ID  { return c.local }
func (c connView) RemotePeer() peer.ID { return c.remote }

// scope grants every memory reservation: the network has no limits.
type scope struct{ network.StreamScope }

func (scope) ReserveMemory(int, uint8) error { return nil }
func (scope) ReleaseMemory(int)              {}
