package nemesis

import (
	"errors"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Port is one node's end of the wire: each Read gives one IPv4 packet the
// node sent, each Write hands it one packet (a TUN device opened with
// IFF_TUN|IFF_NO_PI is one). Close ends a Read in progress.
type Port interface {
	io.ReadWriteCloser
}

// Wire carries IPv4 packets between ports, each port having an address,
// as its Plan decides: the packet from port i to the port whose address
// is its destination goes through direction (i, j) of the plan. Packets
// to an address no port has, and packets that are not IPv4, are dropped.
// Its methods are safe for concurrent use.
type Wire struct {
	ports []Port
	addrs []netip.Addr

	mu     sync.Mutex
	plan   *Plan
	dropCh chan struct{} // closed, and replaced, at each drop (dropWait)

	done    chan struct{}
	wg      sync.WaitGroup
	stopped atomic.Bool

	// Counts, for reports.
	Carried, Dropped, Duplicated atomic.Int64
}

// NewWire starts carrying packets between ports, port i having address
// addrs[i], as plan decides. Stop ends it.
func NewWire(plan *Plan, ports []Port, addrs []netip.Addr) (*Wire, error) {
	if len(ports) != len(addrs) || len(ports) != plan.n {
		return nil, errors.New("nemesis: a wire needs one port and one address per node of its plan")
	}
	w := &Wire{ports: ports, addrs: addrs, plan: plan, done: make(chan struct{}), dropCh: make(chan struct{})}
	for i := range ports {
		w.wg.Add(1)
		go w.carry(i)
	}
	return w, nil
}

// Do runs f on the plan under the wire's lock: a cut, a heal, new faults.
func (w *Wire) Do(f func(*Plan)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w.plan)
}

// Stop closes every port and waits until no packet is carried any more.
func (w *Wire) Stop() {
	if w.stopped.Swap(true) {
		return
	}
	close(w.done)
	for _, p := range w.ports {
		p.Close()
	}
	w.wg.Wait()
}

// to is the port whose address is the destination of the IPv4 packet
// pkt, or -1.
func (w *Wire) to(pkt []byte) int {
	if len(pkt) < 20 || pkt[0]>>4 != 4 {
		return -1
	}
	dst := netip.AddrFrom4([4]byte(pkt[16:20]))
	for j, a := range w.addrs {
		if a == dst {
			return j
		}
	}
	return -1
}

// dropped counts a packet the wire dropped and wakes those waiting for
// a drop.
func (w *Wire) dropped() {
	w.Dropped.Add(1)
	w.mu.Lock()
	close(w.dropCh)
	w.dropCh = make(chan struct{})
	w.mu.Unlock()
}

// dropWait returns a channel closed at the next drop.
func (w *Wire) dropWait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropCh
}

func (w *Wire) carry(i int) {
	defer w.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, err := w.ports[i].Read(buf)
		if err != nil {
			return // closed by Stop; any other error ends this port too
		}
		j := w.to(buf[:n])
		if j < 0 || j == i {
			w.dropped()
			continue
		}
		d := Direction{i, j}
		w.mu.Lock()
		fates := w.plan.Decide(d)
		w.mu.Unlock()
		if len(fates) == 0 {
			w.dropped()
			continue
		}
		if len(fates) > 1 {
			w.Duplicated.Add(int64(len(fates) - 1))
		}
		pkt := append([]byte(nil), buf[:n]...)
		for _, after := range fates {
			w.wg.Add(1)
			deliver := func() {
				defer w.wg.Done()
				w.mu.Lock()
				cut := w.plan.IsCut(d)
				w.mu.Unlock()
				select {
				case <-w.done:
					return
				default:
				}
				if cut {
					w.dropped()
					return
				}
				if _, err := w.ports[j].Write(pkt); err == nil {
					w.Carried.Add(1)
				}
			}
			if after <= 0 {
				deliver()
			} else {
				time.AfterFunc(after, deliver)
			}
		}
	}
}

// Addr is node i's address on the wire: 10.77.0.(i+1), in 10.77.0.0/24.
func Addr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 77, 0, byte(i + 1)}) }
