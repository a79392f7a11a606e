package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/internal/filecopy"
	"github.com/tern-dev/tern/internal/filelock"
	"github.com/tern-dev/tern/internal/flaws"
	"github.com/tern-dev/tern/internal/secrets"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
)

// nodeFlaw, set only in a tern built with -tags ternflaws (flaws_on.go),
// puts the flaw TERN_FLAW names into a node's config; flawsBuilt says it
// is there.
var (
	nodeFlaw   func(*node.Config) error
	flawsBuilt bool
)

func nodeCmd(e *env) *cobra.Command {
	var flags node.Config
	var newIdentity bool
	var logFormat string
	c := &cobra.Command{
		Use:     "node [--listen MULTIADDR]... [--api HOST:PORT]",
		Example: "  tern node &\n  tern node --listen /ip4/0.0.0.0/tcp/4001 --log-format json",
		Short:   "Run this machine's tern node until interrupted",
		Long: "Runs the node: a libp2p host that only paired peers can reach, syncing every capsule it\n" +
			"holds with them, and a loopback API (its address and token in $TERN_HOME/node.json).\n" +
			"Settings come from $TERN_HOME/config.json when it exists; flags override them. Its keys:\n" +
			"listen, api, mdns, nat, relay_service, sync_interval (\"30s\"), metrics_public, strict.\n" +
			"Without --listen or \"listen\" it listens on port 4001 (TCP and QUIC), or the next free one,\n" +
			"and writes that into config.json's \"listen\", so that it listens there at every start.\n" +
			"/metrics on the API address serves Prometheus; like the rest of the API it needs the\n" +
			"token of node.json, which changes at every start, unless --metrics-public (or\n" +
			"\"metrics_public\": true) lets any program on this machine read it without one.\n" +
			"SIGINT or SIGTERM stops it cleanly.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Every flag is checked before anything is touched: a bad one
			// takes no port, key or file.
			log := slog.New(newLineHandler(e.stderr, slog.LevelInfo, true))
			switch logFormat {
			case "text":
			case "json":
				log = slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			default:
				return fmt.Errorf("--log-format %q: use text or json", logFormat)
			}
			if cmd.Flags().Changed("sync-interval") && flags.SyncInterval <= 0 {
				return fmt.Errorf("--sync-interval %s: must be positive", flags.SyncInterval)
			}
			home, err := node.Home()
			if err != nil {
				return err
			}
			cfg, err := node.LoadConfig(home)
			if err != nil {
				return err
			}
			set := cmd.Flags().Changed
			if set("listen") {
				cfg.Listen = flags.Listen
			}
			if set("api") {
				cfg.API = flags.API
			}
			if set("no-mdns") {
				cfg.NoMDNS = flags.NoMDNS
			}
			if set("nat") {
				cfg.NAT = flags.NAT
			}
			if set("relay-service") {
				cfg.RelayService = flags.RelayService
			}
			if set("metrics-public") {
				cfg.MetricsPublic = flags.MetricsPublic
			}
			if set("strict") {
				cfg.Strict = flags.Strict
			}
			if set("sync-interval") {
				cfg.SyncInterval = flags.SyncInterval
			}
			if newIdentity {
				if running, pid, _ := node.Running(home); running {
					return fmt.Errorf("--new-identity: a node is running on this TERN_HOME (process %d); stop it first", pid)
				}
				id, err := node.NewHomeIdentity(home)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "new identity: this machine is now %s; paired machines must pair this peer ID\n", id.Machine())
			}
			chosePort := len(cfg.Listen) == 0
			if chosePort {
				port, release := freeNodePort(DefaultPort)
				defer release()
				if port == 0 {
					return fmt.Errorf("node: ports %d to %d are all taken; choose one with --listen /ip4/0.0.0.0/tcp/PORT", DefaultPort, DefaultPort+portTries-1)
				}
				if port != DefaultPort {
					fmt.Fprintf(e.stderr, "port %d is taken (another node?); listening on %d, so peers must dial that one\n", DefaultPort, port)
				}
				cfg.Listen = []string{fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", port), fmt.Sprintf("/ip4/0.0.0.0/udp/%d/quic-v1", port)}
			}
			store, err := secrets.Open(home, nil) // a node never waits for a person to type
			if err != nil {
				return err
			}
			cfg.Secrets = store
			if nodeFlaw != nil {
				if err := nodeFlaw(&cfg); err != nil {
					return err
				}
				if cfg.Flaw != flaws.Sound {
					log.Warn("flaw: this node runs a deliberately broken protocol (a tern built with -tags ternflaws, for tern nemesis --flaw)", "flaw", cfg.Flaw.String())
				}
			}
			e.log = log
			n, err := node.Start(home, cfg, log)
			if err != nil {
				return err
			}
			if chosePort {
				// The same port at the next start: paired peers keep
				// dialing the right one.
				if wrote, err := node.KeepListen(home, cfg.Listen); err != nil {
					log.Warn("could not keep the listen addresses in config.json; the next start may choose another port", "err", err)
				} else if wrote {
					log.Info("kept the listen addresses in config.json: the node listens there at every start (edit \"listen\" to change it)", "listen", cfg.Listen)
				}
			}
			info := n.Info()
			fmt.Fprintf(e.stdout, "peer %s\napi  %s\n", info.PeerID, info.API)
			for _, a := range info.Addrs {
				fmt.Fprintf(e.stdout, "addr %s\n", a)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			<-ctx.Done()
			e.log.Info("stopping")
			return n.Close()
		},
	}
	c.Flags().BoolVar(&flags.Strict, "strict", false, "an agent this node held when it stopped runs again only after a paired peer confirms no other node took it over")
	c.Flags().BoolVar(&newIdentity, "new-identity", false, "make a new machine key when node.key is missing from a home that holds capsules or peers (never replaces a key)")
	c.Flags().StringVar(&logFormat, "log-format", "text", "text (one line per record, for people) or json (for machines)")
	c.Flags().StringArrayVar(&flags.Listen, "listen", nil, "multiaddr to listen on (repeatable; default: TCP and QUIC on every interface, port 4001 or the next free one)")
	c.Flags().StringVar(&flags.API, "api", "127.0.0.1:0", "loopback host:port of the HTTP API (port 0: a free one)")
	c.Flags().BoolVar(&flags.NoMDNS, "no-mdns", false, "do not look for peers on the LAN")
	c.Flags().BoolVar(&flags.NAT, "nat", false, "enable AutoNAT, port mapping, hole punching, and paired peers with addresses as relays")
	c.Flags().BoolVar(&flags.RelayService, "relay-service", false, "relay connections between paired peers (for an always-on machine they can reach)")
	c.Flags().BoolVar(&flags.MetricsPublic, "metrics-public", false, "serve /metrics without the API token (for a Prometheus on this machine)")
	c.Flags().DurationVar(&flags.SyncInterval, "sync-interval", 30*time.Second, "how often to compare journals with every connected peer")
	return c
}

// client finds the running node of $TERN_HOME.
func (e *env) client() (*api.Client, error) {
	home, err := node.Home()
	if err != nil {
		return nil, err
	}
	return api.Dial(home)
}

func peerCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "peer", Short: "Pair and unpair machines (only paired peers can connect)", Args: groupArgs, RunE: showHelp}
	var name string
	add := &cobra.Command{
		Use:   "add PEER [ADDR...] [--name N]",
		Short: "Pair a machine, optionally with addresses to dial it at",
		Long: "Pairs a machine: only paired machines can connect. PEER is its peer ID, a full address\n" +
			"ending in /p2p/<peer ID> as the other machine's tern id or tern node prints it (its\n" +
			"address part is kept), or the name of a machine already paired. Running it again adds\n" +
			"addresses and keeps those known; --name names (or renames) it.",
		Example: "  tern peer add /ip4/192.168.1.20/tcp/4001/p2p/12D3KooW… --name desktop\n" +
			"  tern peer add 12D3KooW… --name desktop\n" +
			"  tern peer add desktop /ip4/192.168.1.21/tcp/4001",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, addrs, err := peerArg(args[0])
			if err != nil {
				return fmt.Errorf("peer add: %w; to pair a new machine, give its peer ID or the address tern id prints on it, and --name to name it", err)
			}
			for _, a := range args[1:] {
				if _, err := ma.NewMultiaddr(a); err != nil {
					return fmt.Errorf("peer add: %q is not an address (like /ip4/192.168.1.20/tcp/4001): %v", a, err)
				}
			}
			self, err := e.identity()
			if err != nil {
				return err
			}
			if id == self.Machine() {
				return fmt.Errorf("peer add: %s is this machine's own peer ID; pair the other machine's (run tern id there)", id)
			}
			var added node.Peer
			var oldName string
			err = e.editPeers(cmd.Context(), func(p *node.Peers) error {
				added = node.Peer{ID: id, Name: name, Addrs: append(addrs, args[1:]...)}
				oldName = ""
				for _, known := range p.List() {
					if known.ID != id {
						continue
					}
					if added.Name == "" {
						added.Name = known.Name
					}
					oldName = known.Name
					for _, a := range known.Addrs {
						if !slices.Contains(added.Addrs, a) {
							added.Addrs = append(added.Addrs, a)
						}
					}
				}
				return p.Add(added)
			})
			if err != nil {
				return err
			}
			if oldName != "" && oldName != added.Name {
				e.done("renamed %s → %s (%s); commands name it %s from now on", oldName, added.Name, added.ID, added.Name)
			}
			e.done("paired %s%s, %s; a paired machine counts as yours: it becomes a member of each agent it takes a copy of, and what it accepts in an agent.json runs here too", added.ID, nameSuffix(added.Name), plural(len(added.Addrs), "address"))
			return nil
		},
	}
	add.Flags().StringVar(&name, "name", "", "a name for people")
	remove := &cobra.Command{
		Use:   "remove PEER",
		Short: "Unpair a machine (by peer ID or name); a running node drops its connections at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, _, err := peerArg(args[0])
			if err != nil {
				return err
			}
			err = e.editPeers(cmd.Context(), func(p *node.Peers) error {
				ok, err := p.Remove(id)
				if err == nil && !ok {
					err = fmt.Errorf("peer %s is not paired", args[0])
				}
				return err
			})
			if err == nil {
				e.done("unpaired %s; it can no longer connect", args[0])
			}
			return err
		},
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List paired machines",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := node.Home()
			if err != nil {
				return err
			}
			p, err := node.LoadPeers(home)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(p.List())
			}
			if len(p.List()) == 0 {
				fmt.Fprintln(e.stderr, "no peers: pair one with tern peer add (tern id on the other machine prints what to paste)")
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PEER ID\tNAME\tADDRESSES")
			for _, x := range p.List() {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", x.ID, orDash(x.Name), orDash(strings.Join(x.Addrs, " ")))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	var pendingJSON bool
	pending := &cobra.Command{
		Use:   "pending [--json]",
		Short: "List unpaired machines that tried to connect to the running node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			var out []node.PendingPeer
			if err := cl.Do(cmd.Context(), http.MethodGet, "/v1/peers/pending", nil, &out); err != nil {
				return err
			}
			if pendingJSON {
				return json.NewEncoder(e.stdout).Encode(out)
			}
			if len(out) == 0 {
				fmt.Fprintln(e.stderr, "no unpaired machine tried to connect since the node started")
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PEER ID\tFROM\tATTEMPTS\tLAST")
			for _, p := range out {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", p.ID, p.From, p.Attempts, p.Last.Format(time.DateTime))
			}
			tw.Flush()
			fmt.Fprintln(e.stderr, "pair one with: tern peer add PEER-ID --name NAME")
			return nil
		},
	}
	pending.Flags().BoolVar(&pendingJSON, "json", false, "print JSON")
	c.AddCommand(add, remove, list, pending)
	return c
}

// DefaultPort is the port tern node listens on (TCP and QUIC) unless told
// otherwise, so that its addresses stay the same across restarts; when it
// is taken, the next free one of portTries.
const (
	DefaultPort = 4001
	portTries   = 10
)

// freeNodePort returns the first port from first on that is free for both
// TCP and UDP on every interface, or 0, and a release to call when the
// node stops. A port is also claimed with a lock file in the temporary
// folder, held until release: libp2p binds with SO_REUSEPORT, so two
// nodes started at the same instant would otherwise both take the port,
// and each would reach the other when dialing itself.
func freeNodePort(first int) (int, func()) {
	for p := first; p < first+portTries; p++ {
		claim, err := filelock.TryLock(filepath.Join(os.TempDir(), fmt.Sprintf("tern-node-port-%d.lock", p)))
		if err != nil {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", p))
		if err != nil {
			claim.Unlock()
			continue
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("0.0.0.0:%d", p))
		l.Close()
		if err != nil {
			claim.Unlock()
			continue
		}
		u.Close()
		return p, func() { claim.Unlock() }
	}
	return 0, func() {}
}

// peerArg reads a peer as people give it: a peer ID, an address ending in
// /p2p/<peer ID> (whose address part it returns), or the name of a paired
// peer.
func peerArg(s string) (id string, addrs []string, err error) {
	if strings.HasPrefix(s, "/") {
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			return "", nil, fmt.Errorf("%q is not an address: %v", s, err)
		}
		info, err := peer.AddrInfoFromP2pAddr(m)
		if err != nil {
			return "", nil, fmt.Errorf("%q does not end in /p2p/<peer ID> (tern id on that machine prints whole addresses)", s)
		}
		for _, a := range info.Addrs {
			addrs = append(addrs, a.String())
		}
		return info.ID.String(), addrs, nil
	}
	id, err = resolvePeer(s)
	return id, nil, err
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// editPeers changes peers.json and tells a running node to reload it.
func (e *env) editPeers(ctx context.Context, edit func(*node.Peers) error) error {
	home, err := node.Home()
	if err != nil {
		return err
	}
	p, err := node.LoadPeers(home)
	if err != nil {
		return err
	}
	if err := edit(p); err != nil {
		return err
	}
	return reloadNode(ctx, home, "/v1/peers/reload", node.PeersFile)
}

// reloadNode tells the running node of home, if any, to reread a file a
// command just changed; a node that is not running reads it when it starts.
func reloadNode(ctx context.Context, home, path, file string) error {
	cl, err := api.Dial(home)
	if errors.Is(err, api.ErrNotRunning) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := cl.Do(ctx, http.MethodPost, path, nil, nil); err != nil && !errors.Is(err, api.ErrNotRunning) {
		return fmt.Errorf("%s is saved, but the running node did not reload it: %w", file, err)
	}
	return nil
}

func statusCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "status [--json]",
		Example: "  tern status\n  tern status --json | jq '.peers[] | select(.connected | not)'",
		Short:   "Show the running node: peer ID, addresses, peers, capsules and their journals",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			var st api.Status
			if err := cl.Do(cmd.Context(), http.MethodGet, "/v1/status", nil, &st); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(st)
			}
			w := e.stdout
			fmt.Fprintf(w, "peer   %s\napi    %s\n", st.PeerID, st.API)
			for _, a := range st.Addrs {
				fmt.Fprintf(w, "addr   %s\n", a)
			}
			for _, p := range st.Peers {
				state := "connected"
				switch {
				case p.Connected:
				case p.DisconnectedAt != nil && strings.HasPrefix(p.Why, "the connection ended"):
					state = "not connected since " + p.DisconnectedAt.Local().Format(time.DateTime) + "; redialed every sync interval"
				case p.DisconnectedAt != nil:
					state = "not connected since " + p.DisconnectedAt.Local().Format(time.DateTime) + ": " + p.Why
				default:
					state = "not connected: " + p.Why
				}
				fmt.Fprintf(w, "paired %s%s (%s)\n", p.ID, nameSuffix(p.Name), state)
			}
			for _, c := range st.Capsules {
				if c.Damaged != "" {
					fmt.Fprintf(w, "agent  %s: DAMAGED, not synced: %s\n", c.ID, c.Damaged)
					continue
				}
				here := "a copy"
				if c.Runs {
					here = "runs here"
				}
				fmt.Fprintf(w, "agent  %s%s: %s, %s from %s\n", c.ID, nameSuffix(c.Name), here, plural(c.Events, "event"), plural(len(c.Vector), "machine"))
				if c.Incomplete {
					fmt.Fprintf(w, "       incomplete: wants %s\n", plural(c.Wants, "blob"))
				}
				if c.Quarantined > 0 && len(c.Forks) == 0 {
					fmt.Fprintf(w, "       %s set aside (written under an ended epoch, replaced by a heal, or written after their machine's removal from the members; tern journal log marks them)\n", plural(c.Quarantined, "event"))
				}
				for _, f := range c.Forks {
					fmt.Fprintf(w, "       FORK machine %s seq %d; %s quarantined\n", f.Machine, f.Seq, plural(c.Quarantined, "event"))
					if f.Machine == st.PeerID {
						fmt.Fprintf(w, "       this node's own chain: the node heals it by itself once it holds every event of it (or now: tern capsule heal %s)\n", c.ID)
					} else {
						fmt.Fprintf(w, "       only that machine can heal it: tern capsule heal %s, run there\n", c.ID)
					}
				}
				if c.Rejected > 0 {
					fmt.Fprintf(w, "       REJECTED %s from peers that failed their checks (see $TERN_HOME/quarantine/%s.jsonl)\n", plural(int(c.Rejected), "event"), c.ID)
				}
				if c.Refused > 0 {
					fmt.Fprintf(w, "       REFUSED %s signed by machines that are not the agent's members (never stored; the node's log names each key; tern member list %s)\n", plural(int(c.Refused), "event"), c.ID)
				}
			}
			for _, t := range st.Transfers {
				dir := "from"
				if t.Direction == "out" {
					dir = "to"
				}
				fmt.Fprintf(w, "blob   %s %s %s: %d of %d bytes\n", t.Blob, dir, t.Peer, t.Done, t.Size)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}

func capsuleImportCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "import FILE.tar|DIR",
		Example: "  tern capsule import agent.tar",
		Short:   "Give a capsule to the running node (merged if it holds it already); prints the agent id",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			st, err := os.Stat(args[0])
			if err != nil {
				return err
			}
			if st.IsDir() {
				return e.importFolder(cmd.Context(), cl, args[0])
			}
			body, err := os.Open(args[0])
			if err != nil {
				return err
			}
			var res struct {
				ID     string `json:"id"`
				Merged bool   `json:"merged"`
			}
			err = cl.Do(cmd.Context(), http.MethodPost, "/v1/capsules", body, &res)
			body.Close()
			var aerr *api.APIError
			if errors.As(err, &aerr) {
				// The node says "the uploaded tar"; the person knows it by its name.
				aerr.Message = strings.Replace(aerr.Message, "the uploaded tar", args[0], 1)
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, res.ID)
			return nil
		},
	}
}

// importFolder has the node import the capsule folder dir on this
// machine, copied without a tar, prints the agent id, and says on stderr
// how the blobs were copied.
func (e *env) importFolder(ctx context.Context, cl *api.Client, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var res struct {
		ID     string          `json:"id"`
		Merged bool            `json:"merged"`
		Copy   filecopy.Method `json:"copy"`
	}
	if err := cl.Do(ctx, http.MethodPost, "/v1/capsules?folder="+url.QueryEscape(abs), nil, &res); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, res.ID)
	if res.Copy != "" {
		fmt.Fprintf(e.stderr, "blobs copied by %s\n", res.Copy)
	}
	return nil
}

// capsuleTar reads the capsule tar at path, or packs the capsule folder
// at path as it is read (no tar is written anywhere). Once the body is
// closed, packErr returns why the folder could not be packed, if it could
// not.
func capsuleTar(path string) (body io.ReadCloser, packErr func() error, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !st.IsDir() {
		f, err := os.Open(path)
		return f, func() error { return nil }, err
	}
	c, err := capsule.Open(path)
	if err != nil {
		return nil, nil, err
	}
	pr, pw := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		defer c.Close()
		bw := bufio.NewWriterSize(pw, 1<<20)
		err := capsule.Pack(c, bw, capsule.PackOptions{})
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
		if errors.Is(err, io.ErrClosedPipe) {
			err = nil // the upload ended first; its error says why
		}
		packed <- err
	}()
	return pr, func() error { return <-packed }, nil
}

func capsuleExportCmd(e *env) *cobra.Command {
	var out string
	var force bool
	c := &cobra.Command{
		Use:     "export AGENT-ID -o FILE.tar [--force]",
		Example: "  tern capsule export $AGENT -o agent.tar",
		Short:   "Write the running node's copy of a capsule as a tar",
		Long: "Writes the running node's copy of the agent as a capsule tar and verifies it. The node's\n" +
			"folder of the agent ($TERN_HOME/capsules/AGENT-ID) names it too; for any other capsule\n" +
			"folder, tern capsule pack writes the tar.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("capsule export: -o FILE.tar is required")
			}
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("capsule export: %s exists; give another name, or --force to replace it", out)
			}
			agent, err := heldAgent(args[0])
			if err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			resp, err := cl.Raw(cmd.Context(), http.MethodGet, "/v1/capsules/"+url.PathEscape(agent)+"/export", nil)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			abs, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			err = atomicfile.Write(abs, 0o644, func(w io.Writer) error {
				_, err := io.Copy(w, resp.Body)
				return err
			})
			if err != nil {
				return err
			}
			rep, err := capsule.Verify(abs, capsule.VerifyOptions{})
			if err != nil {
				return err
			}
			if !rep.OK() {
				os.Remove(abs)
				return checkFailed("the exported tar does not verify: %v", rep.Issues()[0])
			}
			e.done("exported %s to %s: %s, verified", agent, out, plural(rep.Events, "event"))
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "the tar file to write")
	c.Flags().BoolVar(&force, "force", false, "replace FILE.tar if it exists")
	return c
}

// heldAgent is the agent id arg names: an agent id, or the node's folder
// of one. Any other capsule folder is refused, saying how to make its tar.
func heldAgent(arg string) (string, error) {
	if capsule.ValidAgentID(arg) {
		return arg, nil
	}
	if _, err := os.Stat(arg); err != nil {
		return "", fmt.Errorf("%q is neither an agent id nor a capsule folder", arg)
	}
	home, err := node.Home()
	if err != nil {
		return "", err
	}
	abs, err := resolved(arg)
	if err != nil {
		return "", err
	}
	store, err := resolved(filepath.Join(home, store.CapsulesDir))
	if err != nil {
		return "", err
	}
	if id := filepath.Base(abs); filepath.Dir(abs) == store && capsule.ValidAgentID(id) {
		return id, nil
	}
	return "", fmt.Errorf("%s is a folder, not the node's copy of an agent: write its tar with tern capsule pack %s -o FILE.tar", arg, arg)
}

func capsuleListCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the capsules the running node holds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			var list []api.CapsuleStatus
			if err := cl.Do(cmd.Context(), http.MethodGet, "/v1/capsules", nil, &list); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(list)
			}
			if len(list) == 0 {
				fmt.Fprintln(e.stderr, "the node holds no capsule: tern capsule import one")
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AGENT ID\tNAME\tEVENTS\tHERE")
			for _, c := range list {
				here := "copy"
				if c.Runs {
					here = "runs here"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", c.ID, orDash(c.Name), c.Events, here)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func syncCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "sync", Short: "Watch capsules sync between nodes", Args: groupArgs, RunE: showHelp}
	var peerID string
	var timeout time.Duration
	wait := &cobra.Command{
		Use:     "wait ID --peer PEER [--timeout DUR]",
		Example: "  tern sync wait $AGENT --peer desktop --timeout 2m",
		Short:   "Wait until a peer holds the whole capsule, every event and blob; exit 1 at the timeout",
		Long: "Waits until the peer holds every event of the capsule this node holds and every blob the\n" +
			"capsule holds or wants. On a terminal, a bar follows the blobs moving between the two.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if peerID == "" {
				return fmt.Errorf("sync wait: --peer is required")
			}
			peerID, err := resolvePeer(peerID)
			if err != nil {
				return fmt.Errorf("sync wait: --peer: %w", err)
			}
			who := peerLabel(peerID)
			cl, err := e.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			path := "/v1/capsules/" + url.PathEscape(args[0]) + "/sync?peer=" + url.QueryEscape(peerID)
			bar := newProgress(e.stderr)
			defer bar.done()
			var last api.SyncState
			for {
				var st api.SyncState
				err := cl.Do(ctx, http.MethodGet, path, nil, &st)
				switch {
				case err == nil && st.InSync:
					bar.done()
					if len(st.Ours) == 0 && st.Blobs == 0 {
						fmt.Fprintf(e.stdout, "in sync with %s: nothing to copy yet\n", who)
						return nil
					}
					fmt.Fprintf(e.stdout, "in sync with %s: events of %s, %s\n", who, plural(len(st.Ours), "machine"), plural(st.Blobs, "blob"))
					return nil
				case err == nil:
					last = st
					bar.show(st.Transfers)
				case ctx.Err() == nil:
					return err
				}
				select {
				case <-ctx.Done():
					bar.done()
					if !e.peerConnected(cmd.Context(), cl, peerID) {
						return checkFailed("sync wait: after %s, %s is not connected; start its node or check tern status", timeout, who)
					}
					if !last.Events {
						return checkFailed("sync wait: after %s, %s still lacks events of %s", timeout, who, args[0])
					}
					return checkFailed("sync wait: after %s, %s holds every event but lacks %d of the %s", timeout, who, last.PeerLacks, plural(last.Blobs, "blob"))
				case <-time.After(syncWaitPoll):
				}
			}
		},
	}
	wait.Flags().StringVar(&peerID, "peer", "", "the peer that must hold the same events")
	wait.Flags().DurationVar(&timeout, "timeout", time.Minute, "give up after this long (exit 1)")
	c.AddCommand(wait)
	return c
}

// syncWaitPoll is how often tern sync wait asks its node: a poll of a
// 10,000-file capsule costs the nodes a few milliseconds, and a change
// reaches the peer in a few hundred, so a slower poll would be most of
// what a person waits after the copy is done.
const syncWaitPoll = 50 * time.Millisecond

// peerLabel is how a command names the peer id to a person: its paired
// name, or the id when it has none.
func peerLabel(id string) string {
	if home, err := node.Home(); err == nil {
		if ps, err := node.LoadPeers(home); err == nil {
			for _, p := range ps.List() {
				if p.ID == id && p.Name != "" {
					return p.Name
				}
			}
		}
	}
	return id
}

// peerConnected reports whether the running node says it is connected to
// the peer id; true when it cannot tell (the caller then says what it
// knows instead).
func (e *env) peerConnected(ctx context.Context, cl *api.Client, id string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var st api.Status
	if err := cl.Do(ctx, http.MethodGet, "/v1/status", nil, &st); err != nil {
		return true
	}
	for _, p := range st.Peers {
		if p.ID == id {
			return p.Connected
		}
	}
	return true
}

// capsuleShareCmd is capsule share (on) or capsule unshare (off): every
// capsule is shared with every paired peer unless unshared from it.
func capsuleShareCmd(e *env, on bool) *cobra.Command {
	use, short := "share ID PEER", "Share a capsule with a paired peer again (every capsule is shared by default)"
	if !on {
		use, short = "unshare ID PEER", "Stop sharing a capsule with a paired peer"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := node.Home()
			if err != nil {
				return err
			}
			peerID, err := resolvePeer(args[1])
			if err != nil {
				return err
			}
			s, err := store.LoadShares(home)
			if err != nil {
				return err
			}
			if err := s.Set(args[0], peerID, on); err != nil {
				return err
			}
			if err := reloadNode(cmd.Context(), home, "/v1/shares/reload", store.SharesFile); err != nil {
				return err
			}
			what := "shares"
			if !on {
				what = "no longer shares"
			}
			e.done("this machine %s %s with %s", what, args[0], args[1])
			return nil
		},
	}
}
