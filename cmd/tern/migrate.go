package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/node"
)

func migrateCmd(e *env) *cobra.Command {
	var to string
	var asJSON bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:     "migrate ID --to PEER [--json] [--timeout D]",
		Example: "  tern migrate $AGENT --to desktop",
		Short:   "Move a running agent to a paired machine; it never runs on two at once",
		Long: "Moves the agent this node runs to a paired peer (its peer ID or the name given to tern peer\n" +
			"add). The peer first takes what it lacks through sync while the agent still runs here; then\n" +
			"the agent is frozen (appends wait), the peer takes the last events, prepares (materializes\n" +
			"the workspace, checks the environment, renders the journal) and activates it at the next\n" +
			"epoch, and this node retires it. Any failure before the peer activates aborts: the agent\n" +
			"runs here again, at its epoch.\n\n" +
			"Outcomes: committed (exit 0); aborted (exit 1, with the reason); frozen (exit 1): the\n" +
			"timeout ended before the peer's decision was known; this node stays frozen and keeps\n" +
			"asking, and tern holder ID shows when it is resolved. --json prints one object with\n" +
			"outcome, reason, epoch, frozen_ms, bytes_sent and phases.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return fmt.Errorf("migrate: --to is required: the peer ID or name of the machine to move the agent to")
			}
			target, err := resolvePeer(to)
			if err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			body, _ := json.Marshal(api.MigrateRequest{To: target, Timeout: timeout.String()})
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout+30*time.Second)
			defer cancel()
			if !asJSON {
				fmt.Fprintf(e.stdout, "migrating %s to %s…\n", args[0], to)
			}
			var out node.Outcome
			if err := cl.Do(ctx, http.MethodPost, "/v1/capsules/"+url.PathEscape(args[0])+"/migrate", bytes.NewReader(body), &out); err != nil {
				return err
			}
			if asJSON {
				if err := json.NewEncoder(e.stdout).Encode(out); err != nil {
					return err
				}
			} else {
				for _, p := range out.Phases {
					fmt.Fprintf(e.stdout, "  %-9s %5d ms\n", p.Name, p.MS)
				}
				fmt.Fprintf(e.stdout, "%s at epoch %d: frozen for %d ms, %d bytes sent\n", out.Outcome, out.Epoch, out.FrozenMS, out.Bytes)
			}
			if out.Outcome != "committed" {
				return checkFailed("migrate %s: %s: %s", args[0], out.Outcome, out.Reason)
			}
			return nil
		},
	}
	c.Flags().StringVar(&to, "to", "", "the peer ID or name of the machine to move the agent to")
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	c.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the outcome (the node keeps resolving afterwards)")
	c.AddCommand(migrateResolveCmd(e))
	return c
}

func holderCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "holder ID [--json]",
		Example: "  tern holder $AGENT",
		Short:   "Show where an agent stands on this node and on each paired peer",
		Long: "Prints this node's state for the agent (active: it runs here; frozen: it is migrating away;\n" +
			"staging: it is migrating here; retired: it moved on; copy: this node holds the capsule but\n" +
			"never held the agent; unknown: the registry was lost and is being relearnt) with its epoch,\n" +
			"and the same as each paired peer that answers reports it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			var rep api.HolderReport
			if err := cl.Do(cmd.Context(), http.MethodGet, "/v1/capsules/"+url.PathEscape(args[0])+"/holder", nil, &rep); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(rep)
			}
			fmt.Fprintf(e.stdout, "this node  %-8s epoch %d (latest activation known: %s at %d)\n", rep.State, rep.Epoch, shortPeer(rep.Holder.Peer), rep.Holder.Epoch)
			if rep.Note != "" {
				fmt.Fprintf(e.stdout, "           %s\n", rep.Note)
			}
			for _, p := range rep.Peers {
				name := p.Name
				if name == "" {
					name = shortPeer(p.Peer)
				}
				if p.Error != "" {
					fmt.Fprintf(e.stdout, "%-10s did not answer: %s\n", name, p.Error)
					continue
				}
				fmt.Fprintf(e.stdout, "%-10s %-8s epoch %d\n", name, p.State, p.Epoch)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}

// resolvePeer turns a peer ID or the name of a paired peer into its ID.
func resolvePeer(s string) (string, error) {
	if id, err := peer.Decode(s); err == nil {
		return id.String(), nil
	}
	home, err := node.Home()
	if err != nil {
		return "", err
	}
	ps, err := node.LoadPeers(home)
	if err != nil {
		return "", err
	}
	for _, p := range ps.List() {
		if p.Name == s {
			return p.ID, nil
		}
	}
	if strings.HasPrefix(s, "12D3KooW") || strings.HasPrefix(s, "Qm") {
		_, err := node.ParsePeerID(s) // it was meant as one: say what is wrong with it
		return "", err
	}
	return "", fmt.Errorf("%q is neither a peer ID nor the name of a paired peer (tern peer list shows them)", s)
}

func migrateResolveCmd(e *env) *cobra.Command {
	var resume, retire, force bool
	c := &cobra.Command{
		Use:   "resolve ID --resume|--retire --force",
		Short: "An operator's override for an agent stuck frozen, or held by no node (logged)",
		Long: "For when a migration cannot finish because a machine is gone for good (a dead disk, a\n" +
			"lost laptop). Run it on the node that should end up right:\n\n" +
			"  --resume  this node takes the agent: it fences every paired peer at a new epoch, and\n" +
			"            runs the agent unless a peer that answers holds it (then it retires, or\n" +
			"            changes nothing). The target of a frozen migration here is declared gone\n" +
			"            for good. RISK: if that machine is not gone and had activated the agent, it\n" +
			"            may run it too until it reconnects; from then on its events under its old\n" +
			"            epoch are set aside on every node. Only do this for a machine that will\n" +
			"            never run again.\n" +
			"            On a node that lost its holder registry while a peer lost its own too\n" +
			"            (tern holder says so), --resume is the way out: it stops relearning and\n" +
			"            fences every peer above the newest epoch its journal and the peers know.\n" +
			"            RISK: what the lost registries held and no other machine knows is\n" +
			"            forgotten. Run it on the machine whose copy is newest, and on one only.\n" +
			"  --retire  this frozen node gives the agent up without its target's decision, on your\n" +
			"            word that the target took it. RISK: if it did not, no node runs the agent\n" +
			"            until one is resumed with --resume.\n\n" +
			"Without --force it prints what it would risk and changes nothing.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if resume == retire {
				return fmt.Errorf("migrate resolve: give exactly one of --resume and --retire")
			}
			action, risk := "resume", "this node runs the agent at a new epoch; if the machine declared gone is not gone and activated it, both may run it until it reconnects (on a node that lost its registry: what the lost registries held and no other machine knows is forgotten)"
			if retire {
				action, risk = "retire", "this node gives the agent up without its target's decision; if the target did not take it, no node runs it until one is resumed"
			}
			if !force {
				return fmt.Errorf("migrate resolve --%s: %s. Nothing was changed: run again with --force to do it", action, risk)
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			body, _ := json.Marshal(api.ResolveRequest{Action: action})
			var res struct {
				Outcome string `json:"outcome"`
				State   string `json:"state"`
				Epoch   uint64 `json:"epoch"`
			}
			if err := cl.Do(cmd.Context(), http.MethodPost, "/v1/capsules/"+url.PathEscape(args[0])+"/resolve", bytes.NewReader(body), &res); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\nthis node: %s at epoch %d\n", res.Outcome, res.State, res.Epoch)
			return nil
		},
	}
	c.Flags().BoolVar(&resume, "resume", false, "take the agent here (fencing every peer at a new epoch)")
	c.Flags().BoolVar(&retire, "retire", false, "give a frozen agent up without the target's decision")
	c.Flags().BoolVar(&force, "force", false, "do it, accepting the risk the help and the refusal describe")
	return c
}
