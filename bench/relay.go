package bench

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
)

// relay is a TCP relay on 127.0.0.1 that counts every byte it carries,
// both ways: put between two nodes, it measures what really crosses the
// wire (libp2p's security and multiplexing, identify and every protocol
// included). Safe for concurrent use.
type relay struct {
	l      net.Listener
	target string
	bytes  atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// newRelay listens on a free port of 127.0.0.1 and forwards every
// connection to target (host:port).
func newRelay(target string) (*relay, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{l: l, target: target, conns: map[net.Conn]bool{}}
	r.wg.Go(r.serve)
	return r, nil
}

// addr returns the relay's multiaddr.
func (r *relay) addr() string {
	a := r.l.Addr().(*net.TCPAddr)
	return "/ip4/127.0.0.1/tcp/" + strconv.Itoa(a.Port)
}

// carried returns the bytes carried so far, both ways.
func (r *relay) carried() int64 { return r.bytes.Load() }

func (r *relay) serve() {
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		r.wg.Go(func() { r.forward(c) })
	}
}

func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		c.Close()
		return false
	}
	r.conns[c] = true
	return true
}

func (r *relay) forward(in net.Conn) {
	if !r.track(in) {
		return
	}
	out, err := net.Dial("tcp", r.target)
	if err != nil || !r.track(out) {
		in.Close()
		return
	}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		io.Copy(counter{dst, &r.bytes}, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}
	wg.Go(func() { pipe(out, in) })
	wg.Go(func() { pipe(in, out) })
	wg.Wait()
	r.mu.Lock()
	delete(r.conns, in)
	delete(r.conns, out)
	r.mu.Unlock()
	in.Close()
	out.Close()
}

// counter adds the bytes written through it to n.
type counter struct {
	w io.Writer
	n *atomic.Int64
}

func (c counter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n.Add(int64(k))
	return k, err
}

// close stops the relay and cuts its connections.
func (r *relay) close() error {
	err := r.l.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
