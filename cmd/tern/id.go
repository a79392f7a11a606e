package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/node"
)

func idCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "id [--json]",
		Short: "Print this machine's peer ID and, when its node runs, the addresses to pair it by",
		Long: "Prints this machine's peer ID (creating its key in $TERN_HOME on first use) and, when\n" +
			"`tern node` runs, one full address per line (ending in /p2p/<peer ID>): paste one into\n" +
			"the other machine's tern peer add. Run right after tern node, it waits (a few seconds\n" +
			"at most, saying so on stderr) for that node to start.",
		Example: "  tern id\n  tern peer add $(ssh desktop tern id | sed -n 2p) --name desktop   # on the laptop",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := e.identity()
			if err != nil {
				return err
			}
			out := struct {
				PeerID string   `json:"peer_id"`
				Addrs  []string `json:"addrs"`
			}{PeerID: id.Machine(), Addrs: []string{}}
			home, err := node.Home()
			if err != nil {
				return err
			}
			info, pid := e.startedNode(cmd.Context(), home)
			if info != nil {
				for _, a := range info.Addrs {
					if !strings.Contains(a, "/p2p/") {
						a += "/p2p/" + info.PeerID
					}
					out.Addrs = append(out.Addrs, a)
				}
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(out)
			}
			fmt.Fprintln(e.stdout, out.PeerID)
			for _, a := range out.Addrs {
				fmt.Fprintln(e.stdout, a)
			}
			switch {
			case len(out.Addrs) > 0:
			case pid != 0:
				fmt.Fprintf(e.stderr, "(the node of this TERN_HOME, process %d, has not written its addresses after %s: its log says why; the peer ID alone pairs too, on a LAN)\n", pid, nodeStartWait)
			default:
				fmt.Fprintln(e.stderr, "(no node runs for this TERN_HOME: start one with tern node to get addresses; the peer ID alone pairs too, on a LAN)")
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, `print {"peer_id", "addrs"}`)
	return c
}

// How long tern id waits for a node of its home: nodeStartWait for one
// that holds the home's lock to write its addresses, and nodeStartGrace
// for one just launched (tern node & tern id) to take the lock at all.
const (
	nodeStartWait  = 5 * time.Second
	nodeStartGrace = 500 * time.Millisecond
)

// startedNode is what the node of home wrote in node.json once it
// started, or nil if no node runs there. A node that holds the home's lock
// but has not written node.json since taking it is starting: it waits for
// it (up to nodeStartWait, saying so on stderr); pid is then that node's
// process even if it never wrote it. With no lock held, it first gives a
// node launched just before nodeStartGrace to take it.
func (e *env) startedNode(ctx context.Context, home string) (info *node.Info, pid int) {
	lockPath, infoPath := filepath.Join(home, node.LockFile), filepath.Join(home, node.InfoFile)
	grace := time.Now().Add(nodeStartGrace)
	var deadline time.Time
	for {
		running, p, _ := node.Running(home)
		switch {
		case running:
			pid = p
			if i := currentInfo(lockPath, infoPath); i != nil {
				return i, pid
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(nodeStartWait)
				fmt.Fprintf(e.stderr, "waiting for the node of this TERN_HOME (process %d) to start…\n", pid)
			}
			if time.Now().After(deadline) {
				return nil, pid
			}
		case pid != 0 || time.Now().After(grace):
			return nil, 0 // none runs, or the one that was starting stopped
		}
		select {
		case <-ctx.Done():
			return nil, pid
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// currentInfo reads node.json if the node holding the lock file wrote it:
// not older than the lock file, which a node rewrites when it takes it (a
// node.json older than that is a stopped node's, left by a crash).
func currentInfo(lockPath, infoPath string) *node.Info {
	lock, err := os.Stat(lockPath)
	if err != nil {
		return nil
	}
	st, err := os.Stat(infoPath)
	if err != nil || st.ModTime().Before(lock.ModTime()) {
		return nil
	}
	var info node.Info
	data, err := os.ReadFile(infoPath)
	if err != nil || json.Unmarshal(data, &info) != nil {
		return nil
	}
	return &info
}

// version is what tern version and tern --version print: the module's
// version and the commit it was built from, as Go recorded them.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		v += " " + rev[:min(12, len(rev))]
		if t := settings["vcs.time"]; t != "" {
			v += " " + t
		}
		if settings["vcs.modified"] == "true" {
			v += " (modified)"
		}
	}
	return v + " " + bi.GoVersion
}

func versionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tern's version and the commit it was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(e.stdout, "tern", version())
			return nil
		},
	}
}

// environmentHelp is the help topic tern help environment: where tern
// keeps things and the variables it reads.
func environmentHelp() *cobra.Command {
	return &cobra.Command{
		Use:   "environment",
		Short: "Where tern keeps its files, and the environment variables it reads",
		Long: `TERN_HOME is this machine's tern folder. Unset, it is $XDG_DATA_HOME/tern, else
~/.local/share/tern on Linux and the BSDs, %LocalAppData%\tern on Windows, and
~/Library/Application Support/tern on macOS. It holds:

  node.key        this machine's private key (its peer ID); created on first use
  peers.json      the paired machines (tern peer add)
  config.json     tern node's settings (tern node --help lists its keys)
  node.json       where the running node's API is, and its token (new at every start)
  capsules/ID/    the node's copy of each agent it holds
  workspaces/ID/  the workspace of each agent the node runs, where its tools work
  registry.json   which agents this node runs, at which epoch (migration)
  chains/         which copy this machine last signed each agent in
  summaries/      what the node last knew of each closed capsule, so that status opens none
                  (a cache, used only while the capsule's files are unchanged; safe to delete)
  secrets/        secrets encrypted with TERN_SECRETS_PASSWORD, when no OS keyring is reachable

Variables:

  TERN_HOME               the folder above
  TERN_SECRETS_BACKEND    keyring, file or auto (the default): where tern secret keeps values
  TERN_SECRETS_PASSWORD   the password of the encrypted secrets folder
  TERN_SECRET_<NAME>      the value of secret NAME, for containers and CI; read last

Two homes on one machine are two machines to tern: give each command its TERN_HOME.`,
	}
}
