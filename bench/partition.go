package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
)

// PartitionEvents is how many events each node appends while the
// partition lasts.
const PartitionEvents = 50

// PartitionTimeout bounds each wait of Partition: for a side to converge,
// and for all nodes to converge after the heal.
const PartitionTimeout = 2 * time.Minute

// PartitionResult is what Partition measured.
type PartitionResult struct {
	Nodes  int `json:"nodes"`  // nodes, paired with every other
	Events int `json:"events"` // events every node holds at the end: PartitionEvents per node

	// Seconds is from the heal (every link between the sides dialed at
	// once) to every node holding every event, with the same vector.
	Seconds float64 `json:"seconds"`
	// Missing is how many events the nodes lacked at the heal, summed over
	// the nodes: each lacked the other side's.
	Missing int64 `json:"missing"`
	// EventsSent is how many events the heal's sync exchanges carried,
	// counted once the exchanges stopped: more than Missing when several
	// peers sent a node the same events.
	EventsSent int64 `json:"events_sent"`
	Exchanges  int64 `json:"exchanges"` // sync exchanges the nodes ran from the heal on
}

// Partition measures convergence after a partition heals. nodes nodes
// (at least 2), each paired with every other, hold one capsule. The
// partition splits them into two halves: every node unpairs the other
// side's nodes (node.Peers.Remove) and closes its connections to them, so
// that the connection gater keeps them apart. Each node then appends
// PartitionEvents events, pushed at once to its own side, and each side
// converges. The heal pairs the sides again, then dials every link
// between them at once, as each node's anti-entropy timer would on its
// next tick; the clock runs from the dials until all nodes hold the same
// events. The timer is left at its 30 s default, so only the rounds the
// heal's connections start take part.
func Partition(ctx context.Context, nodes int, opt Options) (res PartitionResult, err error) {
	if nodes < 2 {
		return res, fmt.Errorf("bench partition: %d nodes: want at least 2", nodes)
	}
	dir, err := opt.tempDir("partition")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if err := partition(ctx, dir, nodes, &res, opt); err != nil {
		return res, fmt.Errorf("bench partition: %w", err)
	}
	return res, nil
}

func partition(ctx context.Context, dir string, count int, res *PartitionResult, opt Options) (err error) {
	res.Nodes, res.Events = count, count*PartitionEvents
	var all []*node.Node
	defer func() { closeAll(&err, all...) }()
	for i := range count {
		n, err := startNode(home(dir, i), 30*time.Second, opt)
		if err != nil {
			return err
		}
		all = append(all, n)
	}
	src := filepath.Join(dir, "capsule")
	agent, err := newCapsule(src, "partition", all[0].Identity(), all[1:]...)
	if err != nil {
		return err
	}
	for _, n := range all {
		if _, _, err := n.Store().Import(src); err != nil {
			return err
		}
	}
	// The capsule's own events (its creation, its members): every node
	// holds them before the first append.
	first, err := all[0].Store().Events(agent, "")
	if err != nil {
		return err
	}
	base := len(first)
	for i, a := range all {
		for _, b := range all[i+1:] {
			if err := pair(a, b); err != nil {
				return err
			}
			if err := connect(ctx, a, b); err != nil {
				return err
			}
		}
	}

	left, right := all[:count/2], all[count/2:]
	for _, a := range left {
		for _, b := range right {
			if err := unpair(a, b); err != nil {
				return err
			}
		}
	}
	for _, n := range all {
		if err := appendMessages(ctx, n, agent, PartitionEvents, true); err != nil {
			return err
		}
	}
	for _, side := range [][]*node.Node{left, right} {
		if _, err := waitConverged(ctx, agent, base+len(side)*PartitionEvents, side); err != nil {
			return fmt.Errorf("a side of the partition: %w", err)
		}
	}
	// No event crossed: each side holds only its own.
	for _, n := range all {
		evs, err := n.Store().Events(agent, "")
		if err != nil {
			return err
		}
		if len(evs) == base+res.Events {
			return fmt.Errorf("node %s holds every event before the heal: the partition leaked", n.Info().PeerID)
		}
	}
	res.Missing = int64(len(left)*len(right)*PartitionEvents) * 2
	before, err := scrapeAll(ctx, all...)
	if err != nil {
		return err
	}

	for _, a := range left {
		for _, b := range right {
			if err := pair(a, b); err != nil {
				return err
			}
		}
	}
	start := time.Now()
	if err := connectAll(ctx, left, right); err != nil {
		return err
	}
	if _, err := waitConverged(ctx, agent, base+res.Events, all); err != nil {
		return fmt.Errorf("after the heal: %w", err)
	}
	res.Seconds = time.Since(start).Seconds()

	after, err := quiet(ctx, all)
	if err != nil {
		return err
	}
	d := after.minus(before)
	res.EventsSent = int64(d.EventsSent + d.EventsReceived)
	res.Exchanges = int64(d.Exchanges)
	return nil
}

// connectAll dials every node of right from every node of left, all at
// once.
func connectAll(ctx context.Context, left, right []*node.Node) error {
	errs := make(chan error, len(left)*len(right))
	for _, a := range left {
		for _, b := range right {
			go func() { errs <- connect(ctx, a, b) }()
		}
	}
	var first error
	for range len(left) * len(right) {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// unpair cuts a and b apart: each removes the other from its allowlist and
// closes their connections.
func unpair(a, b *node.Node) error {
	for _, x := range [][2]*node.Node{{a, b}, {b, a}} {
		if _, err := x[0].Peers().Remove(x[1].Info().PeerID); err != nil {
			return err
		}
		if err := x[0].Host().Network().ClosePeer(x[1].Host().ID()); err != nil {
			return err
		}
	}
	if a.Host().Network().Connectedness(b.Host().ID()) == network.Connected {
		return fmt.Errorf("%s and %s are still connected", a.Info().PeerID, b.Info().PeerID)
	}
	return nil
}

// waitConverged waits until every node holds want events with the same
// vector, and returns that vector.
func waitConverged(ctx context.Context, agent string, want int, nodes []*node.Node) (journal.Vector, error) {
	ctx, cancel := context.WithTimeout(ctx, PartitionTimeout)
	defer cancel()
	var v journal.Vector
	err := poll(ctx, 5*time.Millisecond, func() (bool, error) {
		v = nil
		for _, n := range nodes {
			evs, err := n.Store().Events(agent, "")
			if err != nil || len(evs) != want {
				return false, err
			}
			nv := journal.VectorOf(evs)
			if v != nil && !maps.Equal(v, nv) {
				return false, nil
			}
			v = nv
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%d nodes did not converge on %d events: %w", len(nodes), want, err)
	}
	return v, nil
}

// quietFor is how long the nodes' exchange counters must stay still for
// quiet to call them idle.
const quietFor = 300 * time.Millisecond

// quiet waits until no sync exchange has ended on any node for quietFor,
// and returns the summed counters.
func quiet(ctx context.Context, nodes []*node.Node) (syncCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, PartitionTimeout)
	defer cancel()
	last, err := scrapeAll(ctx, nodes...)
	if err != nil {
		return last, err
	}
	since := time.Now()
	err = poll(ctx, 20*time.Millisecond, func() (bool, error) {
		c, err := scrapeAll(ctx, nodes...)
		if err != nil {
			return false, err
		}
		if c != last {
			last, since = c, time.Now()
		}
		return time.Since(since) >= quietFor, nil
	})
	return last, err
}
