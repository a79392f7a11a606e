package memnet

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/internal/clock"
)

func testHost(t *testing.T, n *Network, i byte) *Host {
	t.Helper()
	seed := bytes.Repeat([]byte{i + 1}, ed25519.SeedSize)
	key, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	h, err := n.AddHost(key, ma.StringCast("/ip4/10.0.0.1/tcp/4001"))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// drive delivers everything sent, one message at a time, until nothing
// moves; it returns what it delivered.
func drive(n *Network) []*Message {
	var all []*Message
	for {
		synctest.Wait()
		sent := n.Sent()
		if len(sent) == 0 {
			return all
		}
		for _, m := range sent {
			n.Deliver(m)
			synctest.Wait()
		}
		all = append(all, sent...)
	}
}

func echo(s network.Stream) {
	data, err := io.ReadAll(s)
	if err != nil {
		s.Reset()
		return
	}
	s.Write(data)
	s.Close()
}

func TestAStreamCarriesBytesBothWaysOnlyWhenDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(nil)
		a, b := testHost(t, n, 0), testHost(t, n, 1)
		b.SetStreamHandler("/echo", echo)
		s, err := a.NewStream(context.Background(), b.ID(), "/echo")
		if err != nil {
			t.Fatal(err)
		}
		s.Write([]byte("hello"))
		s.CloseWrite()
		got := make(chan []byte)
		go func() { data, _ := io.ReadAll(s); got <- data }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("the reply came before anything was delivered")
		default:
		}
		msgs := drive(n)
		if string(<-got) != "hello" {
			t.Fatal("the echo did not come back")
		}
		kinds := ""
		for _, m := range msgs {
			kinds += m.Kind.String() + " "
		}
		if want := "open data close data close "; kinds != want {
			t.Fatalf("delivered %q, want %q", kinds, want)
		}
	})
}

func TestLosingAMessageResetsEveryStreamOnItsConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(nil)
		a, b := testHost(t, n, 0), testHost(t, n, 1)
		b.SetStreamHandler("/echo", echo)
		s1, _ := a.NewStream(context.Background(), b.ID(), "/echo")
		s2, _ := a.NewStream(context.Background(), b.ID(), "/echo")
		s1.Write([]byte("x"))
		sent := n.Sent()
		n.Lose(sent[0])
		if n.Connected(a.ID(), b.ID()) {
			t.Fatal("the connection is still up")
		}
		got := make(chan error)
		go func() { _, err := s2.Read(make([]byte, 1)); got <- err }()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("a reader learnt of the loss before its reset was delivered: %v", err)
		default:
		}
		resets := 0
		for _, m := range n.Sent() {
			if m.Kind == Reset {
				resets++
				n.Deliver(m)
			}
		}
		if resets != 4 {
			t.Fatalf("%d resets for two streams, want one to each end", resets)
		}
		if err := <-got; !errors.Is(err, network.ErrReset) {
			t.Fatalf("a stream on the lost connection read %v, want a reset", err)
		}
		if _, err := a.NewStream(context.Background(), b.ID(), "/echo"); err != nil {
			t.Fatalf("could not reconnect after a lost message: %v", err)
		}
	})
}

func TestACutLinkRefusesConnectionsUntilMended(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(nil)
		a, b := testHost(t, n, 0), testHost(t, n, 1)
		n.Cut(a.ID(), b.ID())
		if _, err := a.NewStream(context.Background(), b.ID(), "/echo"); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("opened a stream over a cut link: %v", err)
		}
		n.Mend(a.ID(), b.ID())
		if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID()}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAReadTimesOutAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(nil)
		a, b := testHost(t, n, 0), testHost(t, n, 1)
		b.SetStreamHandler("/echo", echo)
		s, _ := a.NewStream(context.Background(), b.ID(), "/echo")
		start := time.Now()
		s.SetDeadline(start.Add(time.Minute))
		_, err := s.Read(make([]byte, 1))
		if !errors.Is(err, errDeadline) || time.Since(start) != time.Minute {
			t.Fatalf("read returned %v after %v, want a timeout after a minute", err, time.Since(start))
		}
	})
}

func TestAReadWaitsForItsDeadlineOnTheNetworksClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c clock.Manual
		n := New(&c)
		a, b := testHost(t, n, 0), testHost(t, n, 1)
		if a.Clock() != &c {
			t.Fatal("a host's clock is not its network's")
		}
		b.SetStreamHandler("/echo", echo)
		s, _ := a.NewStream(context.Background(), b.ID(), "/echo")
		s.SetDeadline(time.Now().Add(time.Minute))
		read := make(chan error, 1)
		go func() {
			_, err := s.Read(make([]byte, 1))
			read <- err
		}()
		time.Sleep(time.Hour) // synctest: fake time passes, exactly; nobody fires the clock's timer, so nothing may end
		select {
		case err := <-read:
			t.Fatalf("the read returned %v before the clock's timer fired", err)
		default:
		}
		if due, ok := c.Next(); !ok || !due.Equal(s.(*stream).deadline) {
			t.Fatalf("the clock's next timer is due %v (%v), want at the read's deadline", due, ok)
		}
		c.Fire(time.Now())
		if err := <-read; !errors.Is(err, errDeadline) {
			t.Fatalf("the read returned %v, want a timeout", err)
		}
		s.Reset()
		drive(n)
	})
}

func TestGossipReachesEveryoneOnceThroughAcceptingPeers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(nil)
		a, b, c := testHost(t, n, 0), testHost(t, n, 1), testHost(t, n, 2)
		got := map[peer.ID]int{}
		accept := func(h *Host) Validator {
			return func(_ context.Context, _, origin peer.ID, data []byte) pubsub.ValidationResult {
				got[h.ID()]++
				return pubsub.ValidationAccept
			}
		}
		pub, _ := a.Join("t", accept(a))
		b.Join("t", accept(b))
		c.Join("t", accept(c))
		// a reaches c only through b.
		n.Connect(a.ID(), b.ID())
		n.Connect(b.ID(), c.ID())
		pub(context.Background(), []byte("event"))
		drive(n)
		if got[b.ID()] != 1 || got[c.ID()] != 1 || got[a.ID()] != 0 {
			t.Fatalf("validations: %v, want b and c once, a never", got)
		}
	})
}

func TestSentIsInTheSameOrderHoweverGoroutinesRan(t *testing.T) {
	order := func() string {
		var s string
		synctest.Test(t, func(t *testing.T) {
			n := New(nil)
			a, b := testHost(t, n, 0), testHost(t, n, 1)
			b.SetStreamHandler("/echo", echo)
			for i := range 8 {
				go func() {
					s, _ := a.NewStream(context.Background(), b.ID(), "/echo")
					s.Write([]byte{byte(i)})
				}()
			}
			synctest.Wait()
			for _, m := range n.Sent() {
				s += m.String() + ";"
			}
		})
		return s
	}
	first := order()
	for range 20 {
		if o := order(); o != first {
			t.Fatalf("order changed:\n%s\n%s", first, o)
		}
	}
}

// A stream closed by a reader that has its answer, while the other end has
// not closed its side, stops that end's writing, as QUIC's streams do: its
// Close then fails. A stream whose other end finished writing first is
// closed quietly.
func TestClosingBeforeThePeerFinishedWritingStopsItsWritesAsQUICDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(nil)
		a, b := testHost(t, n, 0), testHost(t, n, 1)
		closed, release := make(chan error, 1), make(chan struct{})
		b.SetStreamHandler("/answer", func(s network.Stream) {
			s.Write([]byte("answer"))
			<-release // the asker closes first
			closed <- s.Close()
		})
		s, err := a.NewStream(context.Background(), b.ID(), "/answer")
		if err != nil {
			t.Fatal(err)
		}
		s.Write([]byte("q"))
		go func() {
			buf := make([]byte, 6)
			io.ReadFull(s, buf)
			s.Close() // before the answerer closed its side: it stops the answerer's writes
		}()
		drive(n)
		close(release)
		if err := <-closed; err == nil {
			t.Fatal("the answerer closed a stream the asker had stopped reading, without an error")
		}

		quiet := make(chan error, 1)
		b.SetStreamHandler("/done", func(s network.Stream) {
			s.Write([]byte("answer"))
			quiet <- s.CloseWrite()
		})
		s, _ = a.NewStream(context.Background(), b.ID(), "/done")
		s.Write([]byte("q"))
		read := make(chan error, 1)
		go func() {
			data, err := io.ReadAll(s)
			if err == nil && string(data) != "answer" {
				err = errors.New("read " + string(data))
			}
			if err == nil {
				err = s.Close()
			}
			read <- err
		}()
		drive(n)
		if err := <-read; err != nil {
			t.Fatalf("reading the answer, then closing after the other end finished: %v", err)
		}
		if err := <-quiet; err != nil {
			t.Fatalf("the answerer's close: %v", err)
		}
	})
}
