package bench

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
)

// CatchUpTimeout bounds how long CatchUp waits for the node to catch up.
const CatchUpTimeout = 10 * time.Minute

// CatchUpResult is what CatchUp measured.
type CatchUpResult struct {
	Events     int   `json:"events"`      // events node B lacked when it came back
	EventBytes int64 `json:"event_bytes"` // their size as a journal stores them: each line and its newline

	// Seconds is from the call that starts B to B holding every event.
	Seconds float64 `json:"seconds"`
	// WireBytes is every TCP byte between the two nodes, both ways, from
	// B's start until both nodes' sync rounds ended: libp2p's handshake,
	// security and multiplexing, identify, the capsule list and the sync
	// exchanges.
	WireBytes int64 `json:"wire_bytes"`
	// FrameBytes is the bytes of the sync exchanges' frames, both ways,
	// as the nodes' /metrics count them.
	FrameBytes int64 `json:"frame_bytes"`
	// EventsSent is how many events the exchanges carried: more than
	// Events when two exchanges sent the same ones.
	EventsSent int64 `json:"events_sent"`
	Exchanges  int64 `json:"exchanges"` // sync exchanges the two nodes ran

	Ratio float64 `json:"ratio"` // WireBytes over EventBytes

	// VerifySeconds is the limit: one ed25519 verification per event, of
	// its signature over as many bytes as its line, on every core
	// (GOMAXPROCS goroutines), measured in the same run. VerifyRatio is
	// Seconds over it (goal <= 1.5).
	VerifySeconds float64 `json:"verify_seconds"`
	VerifyRatio   float64 `json:"verify_ratio"`
}

// CatchUp measures a node catching up after time offline: node A appends
// that many user messages (about 100 bytes of text each) to a capsule both
// nodes hold, while node B is not running; then B starts, already paired
// with A, and dials it through a relay that counts the bytes. Neither
// node runs a timer round meanwhile: B's round and A's, both started by
// the connection, are the whole catch-up. CatchUp fails if B does not hold
// every event within CatchUpTimeout, or holds a different vector.
func CatchUp(ctx context.Context, events int, opt Options) (res CatchUpResult, err error) {
	if events < 1 {
		return res, fmt.Errorf("bench catch-up: %d events: want at least 1", events)
	}
	dir, err := opt.tempDir("catchup")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if err := catchUp(ctx, dir, events, &res, opt); err != nil {
		return res, fmt.Errorf("bench catch-up: %w", err)
	}
	return res, nil
}

func catchUp(ctx context.Context, dir string, events int, res *CatchUpResult, opt Options) (err error) {
	homeB := home(dir, 1)
	idB, err := node.LoadIdentity(homeB)
	if err != nil {
		return err
	}
	a, err := startNode(home(dir, 0), idleInterval, opt)
	if err != nil {
		return err
	}
	var b *node.Node
	defer func() { closeAll(&err, a, b) }()

	src := filepath.Join(dir, "capsule")
	agent, err := newCapsule(src, "catchup", a.Identity())
	if err != nil {
		return err
	}
	if _, _, err := a.Store().Import(src); err != nil {
		return err
	}
	storeB, err := store.Open(homeB, opt.log())
	if err != nil {
		return err
	}
	_, _, err = storeB.Import(src)
	if cerr := storeB.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// B is a member before the clock starts, as a paired machine that
	// was given the agent is: the catch-up moves only A's events, the
	// capsule's own (its creation, B's membership) among the count.
	if _, err := a.AddMember(ctx, agent, idB.PeerID().String()); err != nil {
		return err
	}
	first, err := a.Store().Events(agent, "")
	if err != nil {
		return err
	}
	if err := appendMessages(ctx, a, agent, max(events-len(first), 0), false); err != nil {
		return err
	}
	evs, err := a.Store().Events(agent, "")
	if err != nil {
		return err
	}
	res.Events, res.EventBytes = len(evs), eventBytes(evs)
	want := journal.VectorOf(evs)
	if res.VerifySeconds, err = verifyAll(evs); err != nil {
		return err
	}

	// B knows A only by the relay's address; A knows B by no address, so
	// only B dials, and every byte between them crosses the relay.
	target, err := tcpAddr(a)
	if err != nil {
		return err
	}
	r, err := newRelay(target)
	if err != nil {
		return err
	}
	defer r.close()
	peersB, err := node.LoadPeers(homeB)
	if err != nil {
		return err
	}
	if err := peersB.Add(node.Peer{ID: a.Info().PeerID, Addrs: []string{r.addr()}}); err != nil {
		return err
	}
	if err := a.Peers().Add(node.Peer{ID: idB.PeerID().String()}); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, CatchUpTimeout)
	defer cancel()
	start := time.Now()
	if b, err = startNode(homeB, idleInterval, opt); err != nil {
		return err
	}
	err = poll(ctx, 10*time.Millisecond, func() (bool, error) {
		held, err := b.Store().Events(agent, "")
		return len(held) >= res.Events, err
	})
	if err != nil {
		return fmt.Errorf("node B did not catch up: %w", err)
	}
	res.Seconds = time.Since(start).Seconds()

	// The round one side started on connect is the whole catch-up (one
	// exchange syncs both ways); wait for it to end before reading the
	// byte counts.
	var c syncCounters
	err = poll(ctx, 10*time.Millisecond, func() (bool, error) {
		ca, err := scrape(ctx, a)
		if err != nil {
			return false, err
		}
		cb, err := scrape(ctx, b)
		c = ca.plus(cb)
		return c.Exchanges >= 1, err
	})
	if err != nil {
		return fmt.Errorf("the sync rounds did not end: %w", err)
	}
	res.WireBytes = r.carried()
	res.FrameBytes = int64(c.FrameBytes)
	res.EventsSent = int64(c.EventsSent + c.EventsReceived)
	res.Exchanges = int64(c.Exchanges)
	res.Ratio = float64(res.WireBytes) / float64(res.EventBytes)
	res.VerifyRatio = res.Seconds / res.VerifySeconds

	got, err := b.Store().Vector(agent)
	if err != nil {
		return err
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("node B holds vector %v, want %v", got, want)
	}
	return nil
}

// verifyAll times one ed25519 verification per event, on every core: the
// event's signature against its machine's key, over its line (as many
// bytes as the signed members; verifying costs the same whether or not
// the signature is over those bytes), the key given as bytes, as the
// journal's reader gives it.
func verifyAll(evs []*journal.Event) (float64, error) {
	keys := map[string]ed25519.PublicKey{}
	sigs := make([][]byte, len(evs))
	for i, e := range evs {
		if _, ok := keys[e.Machine]; !ok {
			k, err := journal.MachineKey(e.Machine)
			if err != nil {
				return 0, err
			}
			keys[e.Machine] = k
		}
		sig, err := base64.StdEncoding.DecodeString(e.Sig)
		if err != nil {
			return 0, err
		}
		sigs[i] = sig
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(evs); i = int(next.Add(1) - 1) {
				ed25519.Verify(keys[evs[i].Machine], evs[i].Line(), sigs[i])
			}
		})
	}
	wg.Wait()
	return time.Since(start).Seconds(), nil
}

// tcpAddr returns host:port of n's first TCP listen address.
func tcpAddr(n *node.Node) (string, error) {
	for _, a := range n.Host().Addrs() {
		if _, err := a.ValueForProtocol(ma.P_TCP); err != nil {
			continue
		}
		na, err := manet.ToNetAddr(a)
		if err != nil {
			continue
		}
		return na.String(), nil
	}
	return "", fmt.Errorf("node %s listens on no TCP address", n.Info().PeerID)
}
