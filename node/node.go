package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
)

// InfoFile is written by a running node inside $TERN_HOME (0600): how
// commands reach it.
const InfoFile = "node.json"

// MDNSService is the mDNS service name tern nodes announce on the LAN.
const MDNSService = "_tern-node._udp"

// Config is how a node runs. The zero value listens on every interface on
// free TCP and QUIC ports, serves the API on a free loopback port, and
// finds peers on the LAN.
type Config struct {
	Listen       []string      // multiaddrs; default TCP and QUIC on 0.0.0.0, free ports
	API          string        // host:port on loopback; default 127.0.0.1:0
	NoMDNS       bool          // do not announce or look for peers on the LAN
	NAT          bool          // AutoNAT, port mapping, hole punching, paired peers with addresses as relays
	RelayService bool          // relay connections between paired peers (an always-on machine)
	SyncInterval time.Duration // anti-entropy period; default 30 s

	// newHost makes the libp2p host instead of libp2pHost: tests run nodes
	// on mocknet hosts, whose links they can cut.
	newHost func(*Identity, *gater, Config) (host.Host, error)
}

// Info is node.json: where a running node's API is and who it is.
type Info struct {
	API    string   `json:"api"`
	Token  string   `json:"token"`
	PeerID string   `json:"peer_id"`
	Addrs  []string `json:"addrs"`
}

// Node is a running tern node.
type Node struct {
	home  string
	cfg   Config
	log   *slog.Logger
	id    *Identity
	peers *Peers
	store *Store
	host  host.Host
	api   *http.Server
	info  Info
	stats *metrics

	gossip    *gossip
	transfers *transfers
	// synced holds, per peer and agent, a vector of events both sides held
	// when their last exchange ended: while ours still equals it, the peer
	// holds everything we hold and an exchange is skipped.
	synced *lru.Cache[syncKey, journal.Vector]

	mu      sync.Mutex
	syncing map[peer.ID]bool  // a sync round with that peer is running
	again   map[peer.ID]round // and another was asked for meanwhile
	// responding counts the exchanges peers started that are running, by
	// peer and agent: a timer round leaves those capsules to them.
	responding map[syncKey]int
	blobLocks  map[string]*blobLock // by sha256, while a fetch holds or awaits it

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type syncKey struct {
	peer  peer.ID
	agent string
}

// peerVectors bounds the peers' last vectors kept: a pair of nodes holding
// 1,000 capsules each uses 1,000.
const peerVectors = 1 << 16

// Start runs a node from home until Close: the libp2p host (only paired
// peers get in), the sync protocol, anti-entropy on every connect and on a
// timer, LAN discovery, and the loopback HTTP API. Once listening it writes
// node.json.
func Start(home string, cfg Config, log *slog.Logger) (*Node, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Listen) == 0 {
		cfg.Listen = []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}
	}
	if cfg.API == "" {
		cfg.API = "127.0.0.1:0"
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = 30 * time.Second
	}
	id, err := LoadIdentity(home)
	if err != nil {
		return nil, err
	}
	peers, err := LoadPeers(home)
	if err != nil {
		return nil, err
	}
	store, err := OpenStore(home, log)
	if err != nil {
		return nil, err
	}
	newHost := cfg.newHost
	if newHost == nil {
		newHost = libp2pHost
	}
	h, err := newHost(id, &gater{peers: peers, log: log}, cfg)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("start libp2p host: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	synced, _ := lru.New[syncKey, journal.Vector](peerVectors)
	n := &Node{home: home, cfg: cfg, log: log, id: id, peers: peers, store: store, host: h,
		transfers: newTransfers(), synced: synced, syncing: map[peer.ID]bool{}, again: map[peer.ID]round{},
		responding: map[syncKey]int{}, blobLocks: map[string]*blobLock{},
		ctx: ctx, cancel: cancel}
	n.stats = newMetrics(n)
	if n.gossip, err = startGossip(ctx, n); err != nil {
		cancel()
		h.Close()
		store.Close()
		return nil, err
	}
	ids, err := store.List()
	if err != nil {
		n.Close()
		return nil, err
	}
	for _, id := range ids {
		if err := n.gossip.join(id); err != nil {
			n.Close()
			return nil, err
		}
	}
	protocol.HandleSync(h, offerAware{store, n}, log)
	protocol.HandleBlob(h, servedBlobs{store, n.transfers}, log)
	protocol.HandleCapsules(h, store, log)
	h.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		n.connected(c.RemotePeer())
	}})
	for _, p := range h.Network().Peers() { // connected before the notifications began
		n.connected(p)
	}
	if !cfg.NoMDNS {
		if err := mdns.NewMdnsService(h, MDNSService, n).Start(); err != nil {
			log.Warn("LAN discovery is off", "err", err)
		}
	}
	if err := n.serveAPI(); err != nil {
		n.Close()
		return nil, err
	}
	n.wg.Go(n.antiEntropy)
	log.Info("node running", "peer", h.ID(), "addrs", h.Addrs(), "api", n.info.API)
	return n, nil
}

// libp2pHost makes the node's host: TCP and QUIC on cfg.Listen, admitting
// only the peers the gater allows, with the NAT traversal and relay
// service cfg asks for.
func libp2pHost(id *Identity, g *gater, cfg Config) (host.Host, error) {
	opts := []libp2p.Option{
		libp2p.Identity(id.PrivKey()),
		libp2p.ListenAddrStrings(cfg.Listen...),
		libp2p.ConnectionGater(g),
	}
	if cfg.NAT {
		opts = append(opts, libp2p.NATPortMap(), libp2p.EnableHolePunching(), libp2p.EnableAutoNATv2())
		// Paired peers with static addresses (an always-on machine at
		// home) are this node's relays when it is not reachable itself.
		if relays := g.peers.dialable(); len(relays) > 0 {
			opts = append(opts, libp2p.EnableAutoRelayWithStaticRelays(relays))
		}
	}
	if !cfg.NAT {
		opts = append(opts, libp2p.DisableRelay())
	}
	h, err := libp2p.New(opts...)
	if err != nil || !cfg.RelayService {
		return h, err
	}
	// The service runs whatever AutoNAT thinks of this machine's
	// reachability: the person who turned it on knows their peers reach it.
	if _, err := relay.New(h, relay.WithInfiniteLimits(), relay.WithACL(pairedOnly{g.peers})); err != nil {
		h.Close()
		return nil, fmt.Errorf("relay service: %w", err)
	}
	return h, nil
}

// pairedOnly lets a relay serve only paired peers, both ends. (The gater
// keeps others from connecting at all; this says so again where it
// matters.)
type pairedOnly struct{ peers *Peers }

func (a pairedOnly) AllowReserve(p peer.ID, _ ma.Multiaddr) bool { return a.peers.Allowed(p) }
func (a pairedOnly) AllowConnect(src peer.ID, _ ma.Multiaddr, dest peer.ID) bool {
	return a.peers.Allowed(src) && a.peers.Allowed(dest)
}

// spawn runs f in the background unless the node is closing. Callbacks
// from libp2p (a new connection, a peer found) can come while Close waits
// for the node's goroutines; this keeps them from adding one then.
func (n *Node) spawn(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() == nil {
		n.wg.Go(f)
	}
}

// HandlePeerFound is the mDNS callback: a paired peer seen on the LAN is
// dialed; anyone else is ignored.
func (n *Node) HandlePeerFound(pi peer.AddrInfo) {
	if pi.ID == n.host.ID() || !n.peers.Allowed(pi.ID) {
		return
	}
	n.spawn(func() {
		ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
		defer cancel()
		if err := n.host.Connect(ctx, pi); err != nil {
			n.log.Debug("could not reach a peer found on the LAN", "peer", pi.ID, "err", err)
		}
	})
}

// IdleCapsule is how long a capsule goes unused before the node closes
// it (see Store.CloseIdle), checked every sync interval.
const IdleCapsule = time.Minute

// antiEntropy dials paired peers at their static addresses and syncs every
// capsule with every connected peer, on a timer: gossip may miss a peer,
// this never does. It also closes the capsules that have gone idle. A
// peer that connects gets its round from the connection (see Start), so
// each tick syncs with the peers connected before it dials the others.
func (n *Node) antiEntropy() {
	t := time.NewTicker(n.cfg.SyncInterval)
	defer t.Stop()
	n.dialPeers()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		for _, p := range n.host.Network().Peers() {
			n.startRound(p, changedOnly)
		}
		n.dialPeers()
		if _, err := n.store.CloseIdle(IdleCapsule); err != nil {
			n.log.Warn("closing idle capsules", "err", err)
		}
	}
}

// dialPeers connects to paired peers that are not connected and have
// static addresses.
func (n *Node) dialPeers() {
	for _, ai := range n.peers.dialable() {
		if n.host.Network().Connectedness(ai.ID) == network.Connected {
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
		if err := n.host.Connect(ctx, ai); err != nil {
			n.log.Debug("paired peer unreachable", "peer", ai.ID, "err", err)
		}
		cancel()
	}
}

// connected starts the round a new connection with p calls for. One
// exchange per capsule brings both sides up to date, so only one side
// starts them (two would send the missing events twice); the other
// fetches the blobs it wants.
func (n *Node) connected(p peer.ID) {
	n.forgetSynced(p) // it may have restarted from another state
	if leads(n.host.ID(), p) {
		n.goSync(p)
	} else {
		n.startRound(p, wantsOnly)
	}
}

// leads reports whether, of two connected peers, self is the one that
// starts the sync exchanges on connect: the lower peer ID, so that both
// sides agree whoever dialed.
func leads(self, other peer.ID) bool { return self < other }

// round is what a sync round with a peer covers; a higher round covers
// what a lower one does.
type round int

const (
	wantsOnly   round = iota + 1 // fetch wanted blobs; exchange no events
	changedOnly                  // and exchange capsules the peer is not known to hold whole
	everything                   // and exchange every capsule, taking those the peer offers
)

// goSync runs a round over every capsule with p in the background.
func (n *Node) goSync(p peer.ID) { n.startRound(p, everything) }

// startRound runs a sync round with p in the background. At most one round
// runs per peer; requests that arrive meanwhile run one more round when it
// ends (covering everything if any of them asked for it), so bursts never
// pile up streams.
func (n *Node) startRound(p peer.ID, r round) {
	if !n.peers.Allowed(p) {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return // closing: Close waits for the goroutines already running
	}
	if n.syncing[p] {
		n.again[p] = max(n.again[p], r)
		return
	}
	n.syncing[p] = true
	n.wg.Go(func() {
		for {
			n.syncRound(n.ctx, p, r)
			n.mu.Lock()
			r = n.again[p]
			delete(n.again, p)
			if r == 0 || n.ctx.Err() != nil {
				delete(n.syncing, p)
				n.mu.Unlock()
				return
			}
			n.mu.Unlock()
		}
	})
}

// SyncPeer takes a copy of every capsule p shares that this node lacks,
// then runs one sync exchange with p for every capsule held, and fetches
// the blobs each one wants that p holds. It returns when they are done
// (a blob another round is fetching meanwhile is waited for).
func (n *Node) SyncPeer(ctx context.Context, p peer.ID) { n.syncRound(ctx, p, everything) }

func (n *Node) syncRound(ctx context.Context, p peer.ID, r round) {
	if r > wantsOnly {
		n.takeMissing(ctx, p)
	}
	ids, err := n.store.List()
	if err != nil {
		n.log.Warn("list capsules", "err", err)
		return
	}
	for _, id := range ids {
		if r == everything || r == changedOnly && !n.peerHoldsAll(p, id) && !n.responds(p, id) {
			st, err := protocol.Sync(ctx, n.host, p, id, n.store)
			n.stats.observe(st, err)
			if err != nil {
				n.log.Debug("sync", "peer", p, "agent", id, "err", err)
				continue
			}
			n.recordSynced(p, id, st.Both)
		}
		n.fetchWanted(ctx, p, id)
	}
}

// takeMissing copies from p every capsule it shares that this node does
// not hold; each tar is checked completely before the capsule appears.
func (n *Node) takeMissing(ctx context.Context, p peer.ID) {
	ids, err := protocol.PeerCapsules(ctx, n.host, p)
	if err != nil {
		n.log.Debug("capsule list", "peer", p, "err", err)
		return
	}
	for _, id := range ids {
		if n.store.Holds(id) || !capsule.ValidAgentID(id) {
			continue
		}
		if err := n.takeCapsule(ctx, p, id); err != nil {
			n.log.Warn("could not take a capsule a peer shares", "peer", p, "agent", id, "err", err)
			continue
		}
		n.log.Info("took a capsule a peer shares", "peer", p, "agent", id)
	}
}

func (n *Node) takeCapsule(ctx context.Context, p peer.ID, id string) error {
	f, err := os.CreateTemp(n.home, ".take-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = protocol.TakeCapsule(ctx, n.host, p, id, f, capsule.DefaultLimits.MaxTotalSize)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if _, _, err = n.store.Import(f.Name()); err != nil {
		return err
	}
	return n.gossip.join(id)
}

// PartialDir holds blobs being fetched, inside $TERN_HOME, named by their
// sha256; a transfer cut short resumes from what is there.
const PartialDir = "partial"

// fetchWanted fetches from p every blob the agent's capsule wants that p
// holds (one have query, then a fetch each), until nothing more is wanted
// or p holds none of what is left. A snapshot's files are wanted once its
// own blob has arrived, hence the rounds.
func (n *Node) fetchWanted(ctx context.Context, p peer.ID, agent string) {
	dir := filepath.Join(n.home, PartialDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		n.log.Warn("blob fetch", "err", err)
		return
	}
	tried := map[string]bool{}
	for ctx.Err() == nil {
		want, err := n.store.Wanted(agent)
		if err != nil {
			n.log.Warn("wanted blobs", "agent", agent, "err", err)
			return
		}
		want = slices.DeleteFunc(want, func(h string) bool { return tried[h] })
		if len(want) == 0 {
			return
		}
		held, err := protocol.PeerHas(ctx, n.host, p, agent, want)
		if err != nil {
			n.log.Debug("have query", "peer", p, "agent", agent, "err", err)
			return
		}
		for _, h := range want {
			tried[h] = true
		}
		progress := false
		for _, h := range held {
			if n.fetchBlob(ctx, p, agent, h, filepath.Join(dir, h)) {
				progress = true
			}
		}
		if !progress {
			return
		}
	}
}

// fetchFor starts fetching from p the blobs that events p just sent name.
// (Whether they are missing, the round finds out: asking now, after every
// batch of a long catch-up, would derive the wants again each time.)
func (n *Node) fetchFor(p peer.ID, agent string, added []*journal.Event) {
	if capsule.NamesBlobs(added) {
		n.startRound(p, wantsOnly)
	}
}

// fetchBlob fetches the agent's blob h from p into partial and adopts
// it, and reports whether the capsule holds it now. One fetch of a blob
// runs at a time (rounds with two peers, or SyncPeer beside a round, may
// want it at once, and there is one partial file): a second waits, then
// finds it held, or resumes from where the first stopped.
func (n *Node) fetchBlob(ctx context.Context, p peer.ID, agent, h, partial string) bool {
	unlock, ok := n.lockBlob(ctx, h)
	if !ok {
		return false
	}
	defer unlock()
	if want, err := n.store.Wanted(agent); err != nil || !slices.Contains(want, h) {
		return err == nil // adopted meanwhile
	}
	track, end := n.transfers.start(Transfer{Direction: "in", Peer: p.String(), Agent: agent, Blob: h})
	got, err := protocol.Fetch(ctx, n.host, p, agent, h, partial, track)
	end()
	n.stats.blobBytes.Add(float64(got))
	if err != nil {
		n.log.Debug("blob fetch", "peer", p, "blob", h, "err", err)
		return false
	}
	if err := n.store.adoptFetched(agent, h, partial); err != nil {
		n.log.Warn("blob fetched but not adopted", "blob", h, "err", err)
		return false
	}
	return true
}

// lockBlob takes the lock of blob h's fetch, waiting at most until ctx
// ends (then ok is false); call unlock when done.
func (n *Node) lockBlob(ctx context.Context, h string) (unlock func(), ok bool) {
	n.mu.Lock()
	l := n.blobLocks[h]
	if l == nil {
		l = &blobLock{held: make(chan struct{}, 1)}
		n.blobLocks[h] = l
	}
	l.users++
	n.mu.Unlock()
	leave := func() {
		n.mu.Lock()
		if l.users--; l.users == 0 {
			delete(n.blobLocks, h)
		}
		n.mu.Unlock()
	}
	select {
	case l.held <- struct{}{}:
		return func() { <-l.held; leave() }, true
	case <-ctx.Done():
		leave()
		return nil, false
	}
}

// blobLock serializes the fetches of one blob.
type blobLock struct {
	held  chan struct{} // holds a token while a fetch runs
	users int           // holders and waiters; n.mu held
}

// recordSynced remembers both, a vector of events p and this node both
// held when an exchange of agent ended.
func (n *Node) recordSynced(p peer.ID, agent string, both journal.Vector) {
	if both != nil {
		n.synced.Add(syncKey{p, agent}, both)
	}
}

// forgetSynced forgets what p was known to hold.
func (n *Node) forgetSynced(p peer.ID) {
	for _, k := range n.synced.Keys() {
		if k.peer == p {
			n.synced.Remove(k)
		}
	}
}

// peerHoldsAll reports whether p is known to hold every event of agent
// this node holds: our vector equals the one both held after the last
// exchange. (What p wrote since, p brings: its own vector moved.)
func (n *Node) peerHoldsAll(p peer.ID, agent string) bool {
	both, ok := n.synced.Get(syncKey{p, agent})
	if !ok {
		return false
	}
	ours, err := n.store.Vector(agent)
	return err == nil && maps.Equal(ours, both)
}

// Append appends drafts to the agent's journal as events signed by this
// node, durably, and gossips them to the peers that share the agent.
// (Anti-entropy brings them to any peer gossip misses.)
func (n *Node) Append(ctx context.Context, agent string, drafts []journal.Draft) ([]*journal.Event, error) {
	evs, err := n.store.Append(ctx, agent, n.id, drafts)
	if err != nil {
		return nil, err
	}
	n.gossip.publish(ctx, agent, evs)
	return evs, nil
}

// offerAware serves sync from the store; a peer syncing an agent this node
// does not hold has just offered it, so the node starts a round with that
// peer, which takes the capsule.
type offerAware struct {
	*Store
	n *Node
}

// Exchanging marks an exchange a peer started as running until end is
// called (protocol.Tracker).
func (o offerAware) Exchanging(agent, from string) (end func()) {
	p, err := peer.Decode(from)
	if err != nil {
		return func() {}
	}
	k := syncKey{p, agent}
	n := o.n
	n.mu.Lock()
	n.responding[k]++
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		if n.responding[k]--; n.responding[k] == 0 {
			delete(n.responding, k)
		}
		n.mu.Unlock()
	}
}

// responds reports whether an exchange of agent that p started is running.
func (n *Node) responds(p peer.ID, agent string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.responding[syncKey{p, agent}] > 0
}

// Synced records what a peer that started an exchange now holds
// (protocol.Recorder).
func (o offerAware) Synced(agent, from string, both journal.Vector) {
	if p, err := peer.Decode(from); err == nil {
		o.n.recordSynced(p, agent, both)
	}
}

// Add stores events a peer sent in an exchange it started, and fetches
// the blobs they name.
func (o offerAware) Add(ctx context.Context, agent, from string, events []*journal.Event) error {
	added, err := o.Store.add(ctx, agent, from, events)
	if p, derr := peer.Decode(from); derr == nil {
		o.n.fetchFor(p, agent, added)
	}
	return err
}

func (o offerAware) Events(agent, from string) ([]*journal.Event, error) {
	evs, err := o.Store.Events(agent, from)
	if errors.Is(err, protocol.ErrNotShared) && capsule.ValidAgentID(agent) && !o.Store.Holds(agent) {
		if p, derr := peer.Decode(from); derr == nil {
			o.n.goSync(p)
		}
	}
	return evs, err
}

// Import takes a capsule tar or folder into the store (merging it with a
// copy already held) and offers it to every connected peer at once.
func (n *Node) Import(path string) (string, bool, error) {
	id, merged, err := n.store.Import(path)
	if err != nil {
		return "", false, err
	}
	if err := n.gossip.join(id); err != nil {
		return "", false, err
	}
	for _, p := range n.host.Network().Peers() {
		n.goSync(p)
	}
	return id, merged, nil
}

// Pair adds p to the allowlist and dials it at once if it has addresses.
func (n *Node) Pair(p Peer) error {
	if err := n.peers.Add(p); err != nil {
		return err
	}
	n.spawn(n.dialPeers)
	return nil
}

// Peers returns the node's allowlist; changes take effect at once.
func (n *Node) Peers() *Peers { return n.peers }

// Store returns the node's capsule store.
func (n *Node) Store() *Store { return n.store }

// Host returns the libp2p host.
func (n *Node) Host() host.Host { return n.host }

// Identity returns the node's identity.
func (n *Node) Identity() *Identity { return n.id }

// Info returns what node.json holds.
func (n *Node) Info() Info { return n.info }

// Close stops the node: the API, the host, every capsule; it removes
// node.json. Nothing acknowledged is lost: appends are durable when acked.
func (n *Node) Close() error {
	n.mu.Lock()
	n.cancel() // under mu: spawn and startRound add no goroutine after this
	n.mu.Unlock()
	var errs []error
	if n.api != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, n.api.Shutdown(ctx))
		cancel()
	}
	errs = append(errs, n.host.Close())
	n.wg.Wait()
	errs = append(errs, n.store.Close())
	if err := os.Remove(filepath.Join(n.home, InfoFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// serveAPI starts the loopback HTTP API and writes node.json.
func (n *Node) serveAPI() error {
	host, _, err := net.SplitHostPort(n.cfg.API)
	if err != nil {
		return fmt.Errorf("--api %q: %v", n.cfg.API, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--api %q: the API listens on loopback only (127.0.0.1 or ::1)", n.cfg.API)
	}
	l, err := net.Listen("tcp", n.cfg.API)
	if err != nil {
		return fmt.Errorf("API: %w", err)
	}
	var tok [32]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return err
	}
	n.info = Info{API: "http://" + l.Addr().String(), Token: hex.EncodeToString(tok[:]), PeerID: n.host.ID().String()}
	for _, a := range n.host.Addrs() {
		n.info.Addrs = append(n.info.Addrs, a.String()+"/p2p/"+n.host.ID().String())
	}
	n.api = &http.Server{Handler: n.routes(), ReadHeaderTimeout: 10 * time.Second}
	n.wg.Go(func() {
		if err := n.api.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("API stopped", "err", err)
		}
	})
	data, err := json.MarshalIndent(n.info, "", "  ")
	if err != nil {
		return err
	}
	return capsule.WriteFileAtomic(filepath.Join(n.home, InfoFile), append(data, '\n'), 0o600)
}
