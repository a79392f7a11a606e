package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
)

// Options are what every measurement shares. The zero value is usable.
type Options struct {
	// Dir is where the measurement makes its temporary folder: the nodes'
	// homes and every file it writes. Blob measures the disk limit there
	// too, so it should be on the disk a node would use. Default
	// os.TempDir().
	Dir string
	// Log receives the nodes' logs. Default: discarded.
	Log *slog.Logger
	// Transport is what the nodes, and the bare libp2p stream they are
	// measured against, listen on: "tcp" (the default) or "quic", one
	// only, so that it is the one used.
	Transport string
}

// Transports are the names Options.Transport takes.
var Transports = []string{"tcp", "quic"}

// transportName names the measurement's transport: "tcp" or "quic".
func (o Options) transportName() string {
	if o.Transport == "quic" {
		return "quic"
	}
	return "tcp"
}

// listen is the multiaddr a node or host of the measurement listens on.
func (o Options) listen() string {
	if o.Transport == "quic" {
		return "/ip4/127.0.0.1/udp/0/quic-v1"
	}
	return "/ip4/127.0.0.1/tcp/0"
}

func (o Options) log() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// tempDir makes the measurement's folder under o.Dir.
func (o Options) tempDir(what string) (string, error) {
	dir, err := os.MkdirTemp(o.Dir, "tern-bench-"+what+"-*")
	if err != nil {
		return "", fmt.Errorf("bench %s: %w", what, err)
	}
	return dir, nil
}

// idleInterval is the anti-entropy period of the nodes of a measurement
// that starts every sync round itself: long enough that no timer round
// runs during it.
const idleInterval = time.Hour

// startNode runs a node from home on a free port of 127.0.0.1 on
// opt.Transport, without LAN discovery.
func startNode(home string, interval time.Duration, opt Options) (*node.Node, error) {
	n, err := node.Start(home, node.Config{Listen: []string{opt.listen()}, NoMDNS: true, SyncInterval: interval}, opt.log())
	if err != nil {
		return nil, fmt.Errorf("start a node in %s: %w", home, err)
	}
	return n, nil
}

// closeAll closes every node, and keeps the first error in *err.
func closeAll(err *error, nodes ...*node.Node) {
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if cerr := n.Close(); cerr != nil && *err == nil {
			*err = fmt.Errorf("close node: %w", cerr)
		}
	}
}

// hostAddrs returns the multiaddrs n listens on.
func hostAddrs(n *node.Node) []string {
	var out []string
	for _, a := range n.Host().Addrs() {
		out = append(out, a.String())
	}
	return out
}

// pair lets a and b in to each other, each knowing the other's addresses.
func pair(a, b *node.Node) error {
	if err := a.Peers().Add(node.Peer{ID: b.Info().PeerID, Addrs: hostAddrs(b)}); err != nil {
		return err
	}
	return b.Peers().Add(node.Peer{ID: a.Info().PeerID, Addrs: hostAddrs(a)})
}

// connect dials b from a.
func connect(ctx context.Context, a, b *node.Node) error {
	if err := a.Host().Connect(ctx, peer.AddrInfo{ID: b.Host().ID(), Addrs: b.Host().Addrs()}); err != nil {
		return fmt.Errorf("connect %s to %s: %w", a.Host().ID(), b.Host().ID(), err)
	}
	return nil
}

// newCapsule creates a new capsule folder at dir held by holder and
// returns its agent id.
func newCapsule(dir, name string, holder journal.Signer, members ...*node.Node) (string, error) {
	c, err := capsule.New(dir, name, holder)
	if err != nil {
		return "", err
	}
	c.Close()
	if len(members) == 0 {
		return c.ID(), nil
	}
	d, err := capsule.OpenDir(context.Background(), dir, nil)
	if err != nil {
		return "", err
	}
	for _, m := range members {
		if _, err = d.AddMember(context.Background(), holder, m.Identity().Machine()); err != nil {
			break
		}
	}
	return c.ID(), errors.Join(err, d.Close())
}

// snapshotInto snapshots the folder ws into the capsule folder dir (held
// by no node), signed by s: as if the agent had just snapshotted its
// workspace.
func snapshotInto(ctx context.Context, dir, ws string, s journal.Signer, opt Options) error {
	d, err := capsule.OpenDir(ctx, dir, opt.log())
	if err != nil {
		return err
	}
	_, err = d.Snapshot(ctx, s, ws)
	return errors.Join(err, d.Close())
}

// appendBatch is how many events one append call writes.
const appendBatch = 1000

// messageText is the text of every benchmark message: the length of a
// short chat turn.
const messageText = "Please look at the failing test in the sync package and tell me which change broke it, with the line."

// appendMessages appends count user messages to agent's journal on n,
// signed by n, in batches. With push the node offers them to its
// connected peers at once (node.Node.Append); without, only the store
// changes and peers learn of them at the next sync round.
func appendMessages(ctx context.Context, n *node.Node, agent string, count int, push bool) error {
	tag := n.Info().PeerID
	tag = tag[len(tag)-6:]
	for done := 0; done < count; {
		k := min(appendBatch, count-done)
		drafts := make([]journal.Draft, k)
		for i := range drafts {
			body, err := json.Marshal(map[string]any{"role": "user", "content": []any{
				map[string]string{"type": "text", "text": fmt.Sprintf("%s %s %d", messageText, tag, done+i)}}})
			if err != nil {
				return err
			}
			drafts[i] = journal.Draft{Type: "message", Session: "bench", Body: body}
		}
		var err error
		if push {
			_, err = n.Append(ctx, agent, drafts)
		} else {
			_, err = n.Store().Append(ctx, agent, n.Identity(), 0, drafts)
		}
		if err != nil {
			return fmt.Errorf("append to %s: %w", agent, err)
		}
		done += k
	}
	return nil
}

// eventBytes is the size of events as a journal stores them: each line
// and its newline.
func eventBytes(evs []*journal.Event) int64 {
	var n int64
	for _, e := range evs {
		n += int64(len(e.Line())) + 1
	}
	return n
}

// poll calls done every interval until it reports true or fails, or ctx
// ends.
func poll(ctx context.Context, interval time.Duration, done func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// home returns the folder for the i-th node's $TERN_HOME inside dir.
func home(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("node%d", i)) }
