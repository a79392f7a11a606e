package nemesis

import (
	"io"
	"net/netip"
	"testing"
	"time"
)

// memPort is a Port in memory: what a test sends comes out of Read, what
// the wire writes goes to got.
type memPort struct {
	in     chan []byte
	got    chan []byte
	closed chan struct{}
}

var _ Port = (*memPort)(nil)

func newMemPort() *memPort {
	return &memPort{in: make(chan []byte, 16), got: make(chan []byte, 16), closed: make(chan struct{})}
}

func (p *memPort) Read(b []byte) (int, error) {
	select {
	case pkt := <-p.in:
		return copy(b, pkt), nil
	case <-p.closed:
		return 0, io.EOF
	}
}

func (p *memPort) Write(b []byte) (int, error) {
	p.got <- append([]byte(nil), b...)
	return len(b), nil
}

func (p *memPort) Close() error { close(p.closed); return nil }

// ipv4 is a minimal IPv4 packet to dst carrying the byte mark.
func ipv4(dst netip.Addr, mark byte) []byte {
	pkt := make([]byte, 21)
	pkt[0] = 0x45
	d := dst.As4()
	copy(pkt[16:20], d[:])
	pkt[20] = mark
	return pkt
}

func testWire(t *testing.T, f Faults) (*Wire, []*memPort, []netip.Addr) {
	t.Helper()
	plan, err := NewPlan(1, 3, f)
	if err != nil {
		t.Fatal(err)
	}
	ports := []*memPort{newMemPort(), newMemPort(), newMemPort()}
	addrs := []netip.Addr{Addr(0), Addr(1), Addr(2)}
	w, err := NewWire(plan, []Port{ports[0], ports[1], ports[2]}, addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w, ports, addrs
}

func receive(t *testing.T, p *memPort) []byte {
	t.Helper()
	select {
	case pkt := <-p.got:
		return pkt
	case <-time.After(10 * time.Second):
		t.Fatal("no packet arrived within 10 s")
		return nil
	}
}

// waitDropped waits until the wire has dropped n packets.
func waitDropped(t *testing.T, w *Wire, n int64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		next := w.dropWait() // before the count: a drop in between closes it
		if w.Dropped.Load() >= n {
			return
		}
		select {
		case <-next:
		case <-deadline:
			t.Fatalf("the wire dropped %d packets, want %d", w.Dropped.Load(), n)
		}
	}
}

func TestTheWireCarriesEachPacketToThePortOfItsDestination(t *testing.T) {
	_, ports, addrs := testWire(t, Faults{})
	ports[0].in <- ipv4(addrs[2], 7)
	if pkt := receive(t, ports[2]); pkt[20] != 7 {
		t.Fatalf("port 2 got %v", pkt)
	}
	ports[2].in <- ipv4(addrs[1], 8)
	if pkt := receive(t, ports[1]); pkt[20] != 8 {
		t.Fatalf("port 1 got %v", pkt)
	}
}

func TestTheWireDropsWhatItCannotPlace(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkt  []byte
	}{
		{"a packet to an address no port has", ipv4(netip.MustParseAddr("10.1.2.3"), 1)},
		{"an IPv6 packet", append([]byte{0x60}, make([]byte, 40)...)},
		{"a runt", []byte{0x45, 0}},
		{"a packet to its own sender", ipv4(Addr(0), 1)},
	} {
		t.Run(tc.name+" is dropped", func(t *testing.T) {
			w, ports, addrs := testWire(t, Faults{})
			ports[0].in <- tc.pkt
			waitDropped(t, w, 1)
			ports[0].in <- ipv4(addrs[1], 9) // the wire goes on
			if pkt := receive(t, ports[1]); pkt[20] != 9 {
				t.Fatalf("port 1 got %v", pkt)
			}
		})
	}
}

func TestACutDropsWhatIsInFlightAndAHealLetsPacketsThrough(t *testing.T) {
	w, ports, addrs := testWire(t, Faults{Delay: 50 * time.Millisecond})
	ports[0].in <- ipv4(addrs[1], 1)
	// Whether the cut comes before the wire decided the packet's fate or
	// while it waits its 50 ms, it is dropped.
	w.Do(func(p *Plan) { p.Cut(Direction{0, 1}) })
	waitDropped(t, w, 1)
	ports[1].in <- ipv4(addrs[0], 2) // the other way is not cut
	if pkt := receive(t, ports[0]); pkt[20] != 2 {
		t.Fatalf("port 0 got %v", pkt)
	}
	select {
	case pkt := <-ports[1].got:
		t.Fatalf("a cut direction delivered %v", pkt)
	default:
	}
	w.Do(func(p *Plan) { p.HealAll() })
	ports[0].in <- ipv4(addrs[1], 3)
	if pkt := receive(t, ports[1]); pkt[20] != 3 {
		t.Fatalf("port 1 got %v after the heal", pkt)
	}
}

func TestADuplicatingWireDeliversTwice(t *testing.T) {
	w, ports, addrs := testWire(t, Faults{Dup: 1})
	ports[0].in <- ipv4(addrs[1], 5)
	for range 2 {
		if pkt := receive(t, ports[1]); pkt[20] != 5 {
			t.Fatalf("port 1 got %v", pkt)
		}
	}
	if w.Duplicated.Load() != 1 {
		t.Fatalf("counted %d duplicates, want 1", w.Duplicated.Load())
	}
}
