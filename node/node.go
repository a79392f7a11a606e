package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	evbus "github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/custody"
	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filecopy"
	"github.com/tern-dev/tern/internal/filelock"
	"github.com/tern-dev/tern/internal/flaws"
	"github.com/tern-dev/tern/internal/homelock"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/protocol"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/store"
	"github.com/tern-dev/tern/syncpolicy"
	"github.com/tern-dev/tern/turns"
)

// InfoFile is written by a running node inside $TERN_HOME (0600): how
// commands reach it.
const InfoFile = api.InfoFile

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
	// MetricsPublic serves /metrics without the bearer token, for a
	// Prometheus on this machine (the token changes at every start).
	MetricsPublic bool

	// Strict: a node that starts up holding an agent runs it only after
	// reaching at least one paired peer, instead of running it offline
	// (docs/MIGRATION.md: a disk rolled back to an old backup is the one
	// fault epochs cannot see while offline).
	Strict bool

	// Secrets gives the API keys agents' key_secret names (the keyring of
	// the user running the node, then TERN_SECRET_<NAME>); nil resolves
	// none, and an agent that names one cannot reach its model.
	Secrets provider.Secrets

	// Tick is how often the fencing machines tick; 0 means DefaultTick.
	// Tests and the simulator's libp2p layer tick faster.
	Tick time.Duration
	// loseMigrate, in tests, loses a migrate message this node would
	// send when it returns true: a lost request or a lost reply.
	loseMigrate func(fencing.Message) bool

	// newHost makes the libp2p host instead of libp2pHost: tests run nodes
	// on mocknet hosts, whose links they can cut.
	newHost func(*Identity, *gater, Config) (host.Host, error)

	// Harness runs the node on a harness's network and clock (see
	// Harness); production leaves it nil.
	Harness *Harness

	// Flaw runs a deliberately broken variant of the protocols (a
	// Harness's Flaw wins). Only a tern built with -tags ternflaws sets
	// it, for tern nemesis --flaw to show that its checker catches it.
	Flaw flaws.Flaw
}

// Info is node.json (api.Info).
type Info = api.Info

// Node is a running tern node.
type Node struct {
	home     string
	homeLock *filelock.Lock // held until Close: one node per home
	cfg      Config
	log      *slog.Logger
	id       *Identity
	peers    *Peers
	store    *store.Store
	host     host.Host
	mdns     mdns.Service // nil with NoMDNS
	httpSrv  *http.Server // serves apiSrv
	apiSrv   *api.Server
	info     Info
	stats    *metrics

	gossip    *gossip
	holders   *custody.Holders // the fencing of every agent held
	transfers *protocol.Transfers
	rt        *turns.Runtime // runs the turns of the agents that run here
	gater     *gater
	// members holds the machines known to be members of each agent held
	// (memberKey), so that a round adds a paired peer only once.
	members sync.Map
	// read holds, by agent, what its last snapshot read of the files of
	// its workspace (capsule.Seen), for as long as the node runs.
	read sync.Map

	mu sync.Mutex
	// policy decides the sync rounds and dials (package syncpolicy); the
	// node carries out what it asks (applyPolicy), never under mu.
	policy     *syncpolicy.Machine[journal.Vector]
	fetches    jobs[syncKey]         // blob fetches, by peer and agent (goFetch)
	prefetches jobs[syncKey]         // fetches of offered blobs (takeOffer)
	offered    map[syncKey][]string  // blobs offered and not yet taken up
	aside      atomic.Int64          // bytes of offered blobs waiting in partial/
	fetchLocks map[string]*fetchLock // by sha256 or capsule, while a fetch holds or awaits it
	seen       map[peer.ID]time.Time // when each paired peer connected last, or when that connection ended
	conns      map[peer.ID]int       // open connections to each peer, for the connect and disconnect log lines
	healing    map[string]bool       // agents whose own chain healSoon is checking
	// dialed is closed once the node's first dials of its paired peers
	// are done (takeOwnChain waits for them).
	dialed chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type syncKey struct {
	peer  peer.ID
	agent string
}

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
	lock, err := homelock.Lock(home)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			lock.Unlock()
		}
	}()
	removeLeftovers(home, log)
	id, err := LoadIdentity(home)
	if err != nil {
		return nil, err
	}
	peers, err := LoadPeers(home)
	if err != nil {
		return nil, err
	}
	capsules, err := store.Open(home, log)
	if err != nil {
		return nil, err
	}
	capsules.ReportDamage()
	newHost := cfg.newHost
	if newHost == nil {
		newHost = libp2pHost
	}
	if hn := cfg.Harness; hn != nil && hn.Host != nil {
		newHost = func(*Identity, *gater, Config) (host.Host, error) { return hn.Host() }
	}
	g := &gater{peers: peers, log: log}
	h, err := newHost(id, g, cfg)
	if err != nil {
		capsules.Close()
		return nil, fmt.Errorf("start libp2p host: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{home: home, homeLock: lock, cfg: cfg, log: log, id: id, peers: peers, store: capsules, host: h,
		transfers: protocol.NewTransfers(), gater: g, fetches: newJobs[syncKey](), prefetches: newJobs[syncKey](), offered: map[syncKey][]string{},
		fetchLocks: map[string]*fetchLock{}, seen: map[peer.ID]time.Time{}, conns: map[peer.ID]int{},
		ctx: ctx, cancel: cancel, dialed: make(chan struct{})}
	pcfg := syncpolicy.Config{Self: string(h.ID()), Peers: n.policyPeers(), Interval: 1, Flaw: cfg.Flaw}
	if hn := cfg.Harness; hn != nil {
		pcfg.Flaw = hn.Flaw
	}
	n.policy, err = syncpolicy.New(pcfg,
		maps.Equal[journal.Vector, journal.Vector])
	if err != nil {
		cancel()
		h.Close()
		capsules.Close()
		return nil, err
	}
	peers.Changed = n.peersChanged
	n.stats = newMetrics(n)
	if n.gossip, err = startGossip(ctx, n); err != nil {
		cancel()
		h.Close()
		capsules.Close()
		return nil, err
	}
	ids, err := capsules.List()
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
	n.rt = turns.New(n.ctx, n, turns.Config{Home: home, Secrets: cfg.Secrets, API: func() string { return n.info.API },
		Spawn: n.spawn, Disabled: n.harnessed(), Log: log})
	ccfg := custody.Config{Home: home, Self: id.Machine(), Host: h, Signer: id, Secrets: cfg.Secrets, Strict: cfg.Strict, Tick: n.tickEvery(),
		Spawn: n.spawn, Wake: n.wake, Clock: n.clock(), Context: n.ctx, Log: log, Off: n.harnessed(), LoseMigrate: cfg.loseMigrate, Flaw: cfg.Flaw}
	if hn := cfg.Harness; hn != nil {
		ccfg.Incarnation, ccfg.Flaw, ccfg.MigrateFate = hn.Incarnation, hn.Flaw, hn.MigrateFate
		ccfg.Saving, ccfg.Event, ccfg.Runs = hn.Saving, hn.Event, hn.Runs
	}
	if n.holders, err = custody.Start(n, n.rt, ccfg); err != nil {
		n.Close()
		return nil, err
	}
	if ids, err := capsules.List(); err == nil {
		for _, id := range ids {
			n.tendMembers(n.ctx, id)
		}
	}
	protocol.HandleMigrate(h, n.holders.Protocol(), log)
	protocol.HandleSync(h, offerAware{capsules, n}, log)
	protocol.HandleBlob(h, protocol.Counted(capsules, n.transfers), log)
	protocol.HandleOffer(h, n.takeOffer, log)
	protocol.HandlePush(h, n.takePush, log)
	protocol.HandleCapsules(h, givingStore{capsules, n}, log)
	h.Network().Notify(&network.NotifyBundle{
		ConnectedF: func(_ network.Network, c network.Conn) {
			p := c.RemotePeer()
			n.mu.Lock()
			n.conns[p]++
			first := n.conns[p] == 1
			n.mu.Unlock()
			if first && !n.harnessed() { // memnet's connections have no addresses
				log.Info("connected to a paired peer", "peer", n.peerName(p), "addr", c.RemoteMultiaddr())
			}
			if !first && !n.harnessed() {
				n.closeDeadConns(p, c)
			}
			n.connected(p)
		},
		DisconnectedF: func(_ network.Network, c network.Conn) {
			p := c.RemotePeer()
			n.mu.Lock()
			n.conns[p]--
			last := n.conns[p] <= 0
			if last {
				delete(n.conns, p)
				n.seen[p] = time.Now() // the time its last connection ended
				n.policy.Disconnected(string(p))
			}
			n.mu.Unlock()
			if last && !n.harnessed() {
				log.Info("disconnected from a paired peer", "peer", n.peerName(p))
			}
		},
	})
	for _, p := range h.Network().Peers() { // connected before the notifications began
		n.connected(p)
	}
	if !n.harnessed() {
		if sub, err := h.EventBus().Subscribe(new(evbus.EvtPeerIdentificationCompleted)); err == nil {
			n.spawn(func() { n.followAddrs(sub) })
		}
	}
	if !cfg.NoMDNS {
		n.mdns = mdns.NewMdnsService(h, MDNSService, n)
		if err := n.mdns.Start(); err != nil {
			log.Warn("LAN discovery is off", "err", err)
		}
	}
	if !n.harnessed() {
		if err := n.serveAPI(); err != nil {
			n.Close()
			return nil, err
		}
	} else {
		n.info.PeerID = h.ID().String()
	}
	if !n.harnessed() {
		capsules.SetBeforeSign(n.takeOwnChain)
	}
	if n.driven() {
		close(n.dialed) // the driver connects the nodes
	}
	if !n.driven() {
		n.wg.Go(n.antiEntropy)
		n.wg.Go(func() { n.holders.Run(n.tickEvery()) })
	}
	log.Info("node running", "peer", h.ID(), "addrs", h.Addrs(), "api", n.info.API)
	started = true
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
		if relays := g.peers.Dialable(); len(relays) > 0 {
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

// tickEvery is how often the node ticks its fencing machines.
func (n *Node) tickEvery() time.Duration {
	if n.cfg.Tick > 0 {
		return n.cfg.Tick
	}
	return DefaultTick
}

// spawn runs f in the background unless the node is closing. Callbacks
// from libp2p (a new connection, a peer found) can come while Close waits
// for the node's goroutines; this keeps them from adding one then.
func (n *Node) spawn(f func()) (started bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return false
	}
	n.wg.Go(n.held(f))
	return true
}

// peerName is how logs name a peer: its name and a short ID, or its ID.
func (n *Node) peerName(p peer.ID) string {
	for _, x := range n.peers.List() {
		if x.ID == p.String() && x.Name != "" {
			id := p.String()
			return x.Name + " (…" + id[max(0, len(id)-6):] + ")"
		}
	}
	return p.String()
}

// dialOutcome tells the sync policy how a dial of a paired peer went (its
// failure is what tern status says of a peer not connected).
func (n *Node) dialOutcome(p peer.ID, err error) {
	n.mu.Lock()
	n.policy.Dialed(string(p), err)
	n.mu.Unlock()
	n.applyPolicy()
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
		err := n.host.Connect(ctx, pi)
		if err != nil {
			n.log.Debug("could not reach a peer found on the LAN", "peer", pi.ID, "err", err)
		}
		n.dialOutcome(pi.ID, err)
	})
}

// Append appends drafts to the agent's journal as events signed by this
// node, durably, and gossips them to the peers that share the agent.
// (Anti-entropy brings them to any peer gossip misses.)
//
// While the agent runs here the events carry its holder epoch; on a node
// that holds a copy they are offline edits (epoch 0). While a migration
// has frozen the agent here, appends fail with ErrFrozen.
func (n *Node) Append(ctx context.Context, agent string, drafts []journal.Draft) ([]*journal.Event, error) {
	epoch, release, err := n.holders.AppendEpoch(agent)
	if err != nil {
		return nil, err
	}
	defer release()
	evs, err := n.store.Append(ctx, agent, n.id, epoch, drafts)
	if err != nil {
		return nil, err
	}
	n.gossip.publish(ctx, agent, evs)
	return evs, nil
}

// Accept accepts the hand edits of agent.json and environment/spec.json in
// the node's copy of the agent (see capsule.Dir.AcceptEdits), as the
// node, its one writer, and returns the names of the files it accepted.
// The file.updated events reach the peers by anti-entropy.
func (n *Node) Accept(ctx context.Context, agent string) ([]string, error) {
	// Held like an append, so a freeze for a migration waits for it; the
	// file.updated events are signed at epoch 0, as every edit by hand is.
	_, release, err := n.holders.AppendEpoch(agent)
	if err != nil {
		return nil, err
	}
	defer release()
	var names []string
	err = n.store.Sign(ctx, agent, n.id.Machine(), false, func(d *capsule.Dir) error {
		var err error
		names, err = d.AcceptEdits(ctx, n.id)
		return err
	})
	return names, err
}

// Snapshot records the files of the folder workspace, on this machine, as
// the agent's current workspace snapshot (see capsule.Dir.SnapshotWith),
// signed by the node, its one writer: under the holder's epoch while the
// agent runs here, as an offline edit otherwise. It waits for a tool call
// of the agent to finish (and its own snapshot to be recorded). When the
// agent's working folder ($TERN_HOME/workspaces/AGENT) exists and is not
// workspace itself, it is then replaced by the new snapshot, so the tools
// go on from what was recorded. The peers connected are offered it at
// once, as an import is (a sync round of everything with each).
// A workspace that cannot be snapshotted fails with
// capsule.ErrBadWorkspace, and nothing is recorded.
func (n *Node) Snapshot(ctx context.Context, agent, workspace string, opt capsule.SnapshotOptions) (capsule.SnapshotEventBody, []string, error) {
	var body capsule.SnapshotEventBody
	unlock, err := n.rt.LockWorkspace(ctx, agent)
	if err != nil {
		return body, nil, err
	}
	defer unlock()
	epoch, release, err := n.holders.AppendEpoch(agent)
	if err != nil {
		return body, nil, err
	}
	defer release()
	own := filepath.Join(n.home, WorkspacesDir, agent)
	var left []string
	if opt.Seen == nil {
		opt.Seen = n.seenOf(agent)
	}
	o := n.offer(agent)
	if then := opt.Stored; then != nil {
		opt.Stored = func(h string) { o.stored(h); then(h) }
	} else {
		opt.Stored = o.stored
	}
	opt.AllStored = o.sent
	if opt.Stream == nil {
		opt.Stream = o.stream
	}
	err = n.store.Sign(ctx, agent, n.id.Machine(), false, func(d *capsule.Dir) error {
		var err error
		body, left, err = d.SnapshotWith(ctx, n.id, epoch, workspace, opt)
		return err
	})
	o.end()
	if err != nil {
		return body, left, err
	}
	// Offered at once, as an import is: its blobs are bulk a peer should
	// start taking now, not at the next round, nor after the working
	// folder is refreshed (a second write of the workspace where the
	// filesystem cannot reflink).
	n.mu.Lock()
	n.policy.Imported()
	n.mu.Unlock()
	n.applyPolicy()
	if same, err := sameFolder(workspace, own); same || errors.Is(err, fs.ErrNotExist) {
		return body, left, nil
	}
	d, done, err := n.store.Use(agent)
	if err != nil {
		return body, left, err
	}
	defer done()
	return body, left, n.replaceWorkspace(d, own)
}

// replaceWorkspace writes d's current snapshot in place of the folder ws:
// materialized beside it, then swapped in by two renames; the old folder
// is removed in the background. A crash between the renames leaves no
// folder, which the runtime materializes again from the capsule.
func (n *Node) replaceWorkspace(d *capsule.Dir, ws string) error {
	stamp := fmt.Sprint(time.Now().UnixNano())
	fresh, old := ws+".new-"+stamp, ws+".old-"+stamp
	if err := d.Materialize(fresh); err != nil {
		return fmt.Errorf("refreshing the agent's working folder: %w", err)
	}
	if err := os.Rename(ws, old); err != nil {
		os.RemoveAll(fresh)
		return fmt.Errorf("refreshing the agent's working folder: %w", err)
	}
	if err := os.Rename(fresh, ws); err != nil {
		return fmt.Errorf("refreshing the agent's working folder: %w", err)
	}
	n.spawn(func() { os.RemoveAll(old) })
	return nil
}

// sameFolder reports whether a and b are one folder; an error when either
// cannot be read (fs.ErrNotExist when it does not exist).
func sameFolder(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}

// Heal heals the forks of this node's own chain in the agent's capsule
// and gossips the events it appended (see Store.Heal).
func (n *Node) Heal(ctx context.Context, agent string) ([]*journal.Event, error) {
	evs, err := n.store.Heal(ctx, agent, n.id)
	if err != nil {
		return nil, err
	}
	n.gossip.publish(ctx, agent, evs)
	return evs, nil
}

// Import takes a capsule tar or folder into the store (merging it with a
// copy already held) and offers it to every connected peer at once.
func (n *Node) Import(path string) (string, bool, error) {
	return n.imported(n.store.Import(path))
}

// ImportFolder is Import of a capsule folder, copied into the store
// without a tar; it also says how the blobs were copied (see
// Store.ImportFolder). A large blob goes to the connected peers that
// share the agent while it is copied (see push), so that the peer's copy
// starts while the import runs; a peer keeps it aside until it takes the
// capsule, once the import has ended whole.
func (n *Node) ImportFolder(dir string) (string, bool, filecopy.Method, error) {
	id, merged, copied, err := n.store.ImportFolder(dir, n.importPush())
	id, merged, err = n.imported(id, merged, err)
	if err != nil {
		copied = ""
	}
	return id, merged, copied, err
}

// ImportFrom is Import of a capsule tar read from r (see Store.ImportFrom);
// its large blobs are pushed to the peers as ImportFolder's are.
func (n *Node) ImportFrom(r io.Reader) (string, bool, error) {
	return n.imported(n.store.ImportFrom(r, n.importPush()))
}

// importPush is what an import gives each blob's bytes to as it takes
// them: a push to the connected peers that share the agent, for a large
// one (see push). Under a harness, nothing.
func (n *Node) importPush() func(agent string, size int64) capsule.BlobStream {
	if n.harnessed() {
		return nil
	}
	kept := &pushedBlobs{to: map[peer.ID]map[string]bool{}}
	return func(agent string, size int64) capsule.BlobStream { return n.push(agent, size, kept) }
}

// imported runs the agent's fencing and offers it to the connected peers,
// once the store has taken it.
func (n *Node) imported(id string, merged bool, err error) (string, bool, error) {
	if err != nil {
		return "", false, err
	}
	n.tendMembers(context.Background(), id)
	if err := n.holders.Adopt(id); err != nil {
		n.log.Warn("no fencing for an imported capsule", "agent", id, "err", err)
	}
	if err := n.gossip.join(id); err != nil {
		return "", false, err
	}
	if merged {
		n.healSoon(id) // the copy may hold another branch of this machine's chain
	}
	n.mu.Lock()
	n.policy.Imported()
	n.mu.Unlock()
	n.applyPolicy()
	return id, merged, nil
}

// Pair adds p to the allowlist and dials it at once if it has addresses.
func (n *Node) Pair(p Peer) error {
	if err := n.peers.Add(p); err != nil {
		return err
	}
	n.repeer(!n.driven()) // a driving harness connects the nodes itself
	return nil
}

// Peers returns the node's allowlist; changes take effect at once.
func (n *Node) Peers() *Peers { return n.peers }

// Store returns the node's capsule store.
func (n *Node) Store() *store.Store { return n.store }

// Host returns the libp2p host.
func (n *Node) Host() host.Host { return n.host }

// Identity returns the node's identity.
func (n *Node) Identity() *Identity { return n.id }

// Info returns what node.json holds.
func (n *Node) Info() Info { return n.info }

// Close stops the node: the API, then, for up to handOnWithin, a last
// exchange of what changed with every connected peer (handOn), the host,
// every capsule; it removes node.json. Nothing acknowledged is lost:
// appends are durable when acked, and on a connected peer once Close
// returns.
func (n *Node) Close() error {
	n.mu.Lock()
	n.cancel() // under mu: spawn and startRound add no goroutine after this
	n.mu.Unlock()
	var errs []error
	if n.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, n.httpSrv.Shutdown(ctx))
		cancel()
	}
	n.handOn() // after the API: nothing is appended meanwhile
	if n.mdns != nil {
		errs = append(errs, n.mdns.Close()) // it announces the host: before the host
	}
	errs = append(errs, n.host.Close())
	n.wg.Wait()
	if n.rt != nil {
		n.rt.Wait()
	}
	errs = append(errs, n.store.Close())
	if err := os.Remove(filepath.Join(n.home, InfoFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	errs = append(errs, n.homeLock.Unlock()) // last: another node may start now
	return errors.Join(errs...)
}

// LoginURL mints a one-time login code for the web page, as tern ui asks
// for one (the demo's --web prints it).
func (n *Node) LoginURL() api.LoginCode { return n.apiSrv.LoginURL() }

// serveAPI starts the loopback HTTP API (package api) and the turn relay
// it follows moved turns with, and writes node.json.
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
	n.apiSrv = api.New(api.Config{Node: n, Runtime: n.rt, Home: n.home, Info: n.info,
		Metrics: n.stats.handler(), MetricsPublic: n.cfg.MetricsPublic, Log: n.log})
	n.host.SetStreamHandler(api.TurnRelayID, n.serveTurnRelay)
	n.httpSrv = &http.Server{Handler: n.apiSrv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	n.wg.Go(func() {
		if err := n.httpSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("API stopped", "err", err)
		}
	})
	data, err := json.MarshalIndent(n.info, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(n.home, InfoFile), append(data, '\n'), 0o600)
}
