package protocol

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/internal/clock"
	"github.com/tern-dev/tern/simnet/memnet"
)

// An exchange over a host that keeps its own clock (the simulator's
// memnet) times out when that clock's timers fire, not when the real
// clock's time has passed: the simulator decides when, and in what order,
// the exchanges it runs wake.
func TestAnExchangeIsTimedOnItsHostsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c clock.Manual
		n := memnet.New(&c)
		var hosts [2]*memnet.Host
		for i := range hosts {
			key, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{byte(i + 1)}, ed25519.SeedSize)))
			if err != nil {
				t.Fatal(err)
			}
			if hosts[i], err = n.AddHost(key, ma.StringCast("/ip4/10.0.0.1/tcp/4001")); err != nil {
				t.Fatal(err)
			}
		}
		a, b := hosts[0], hosts[1]
		defer func() { a.Close(); b.Close() }() // every stream ends
		// A peer that never answers.
		b.SetStreamHandler(SyncID, func(s network.Stream) { io.Copy(io.Discard, s) })
		done := make(chan error, 1)
		go func() {
			_, err := Sync(context.Background(), a, b.ID(), agent, newMem(agent))
			done <- err
		}()
		deliver := func() {
			for synctest.Wait(); ; synctest.Wait() {
				sent := n.Sent()
				if len(sent) == 0 {
					return
				}
				for _, m := range sent {
					n.Deliver(m)
				}
			}
		}
		deliver()
		time.Sleep(2 * SyncTimeout) // synctest: the bubble's time passes; only the host's clock may end the exchange
		select {
		case err := <-done:
			t.Fatalf("the exchange ended before its host's clock fired: %v", err)
		default:
		}
		fired := 0 // the exchange's context, and its stream's read
		for c.Fire(time.Now()) {
			fired++
			synctest.Wait()
		}
		if fired < 2 {
			t.Fatalf("%d timers on the host's clock, want the exchange's context's and its read's", fired)
		}
		if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the exchange with a silent peer ended with %v, want a timeout", err)
		}
	})
}
