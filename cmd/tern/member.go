package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
)

func memberCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "member",
		Short: "List, add and remove the machines that write an agent's history",
		Long: "An agent's members are the machines whose events count: the machine that created it,\n" +
			"and those a member added (a signed member.added event). An event signed by any other\n" +
			"machine is refused wherever a journal takes events, and tern capsule verify names its\n" +
			"key. A node adds a paired peer when it first gives it the agent; add a machine by hand\n" +
			"to let a copy you carry to it (a tar, a folder) be written there.",
		Args: groupArgs, RunE: showHelp,
	}
	var asJSON bool
	list := &cobra.Command{
		Use:     "list DIR|AGENT [--json]",
		Example: "  tern member list $AGENT\n  tern member list ./agent --json | jq -r '.members[].peer'",
		Short:   "List an agent's members (a removed one with the last seq of its that counts)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := capsule.Open(capsulePath(args[0]))
			if err != nil {
				return err
			}
			defer c.Close()
			events, err := c.Journal()
			if err != nil {
				return err
			}
			rep := api.MembersReportOf(c.ID(), journal.MembersOf(c.ID(), events))
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(rep)
			}
			return printMembers(e, rep)
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print {agent, open, members: [{peer, removed, seq}]}")
	add := &cobra.Command{
		Use:     "add DIR|AGENT PEER",
		Example: "  tern member add $AGENT desktop\n  tern member add ./agent 12D3KooW…",
		Short:   "Add a machine (a peer ID, or the name of a paired peer) to an agent's members",
		Long: "Adds a machine to an agent's members, signed by this machine, which must be a member\n" +
			"itself. PEER is a peer ID, or the name of a paired peer (tern peer list). Given an agent\n" +
			"id, the running node adds it to its copy and syncs the event; given a folder, the event\n" +
			"is written there. A machine that was removed is never added again.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.changeMember(cmd.Context(), args[0], args[1], true)
		},
	}
	remove := &cobra.Command{
		Use:     "remove DIR|AGENT PEER",
		Example: "  tern member remove $AGENT old-laptop",
		Short:   "Remove a machine from an agent's members: what it writes from now on does not count",
		Long: "Removes a machine from an agent's members, signed by this machine, a member. The\n" +
			"events of the removed machine this copy holds still count; those it writes after them\n" +
			"do not, here or on any machine the removal reaches. The last member cannot be removed,\n" +
			"and a removed machine is never added again (it may join with a new identity).",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.changeMember(cmd.Context(), args[0], args[1], false)
		},
	}
	c.AddCommand(list, add, remove)
	return c
}

func printMembers(e *env, rep api.MembersReport) error {
	if rep.Open {
		fmt.Fprintf(e.stdout, "agent %s is from before members: every machine's events count until a node that holds it names its first members\n", rep.Agent)
		return nil
	}
	for _, m := range rep.Members {
		if m.Removed {
			if m.Seq == 0 {
				fmt.Fprintf(e.stdout, "%s  removed (none of its events count)\n", m.Peer)
			} else {
				fmt.Fprintf(e.stdout, "%s  removed (its events up to seq %d count)\n", m.Peer, m.Seq)
			}
		} else {
			fmt.Fprintf(e.stdout, "%s\n", m.Peer)
		}
	}
	return nil
}

// changeMember adds or removes peer (a peer ID or a paired peer's name)
// in the members of the agent at target: a folder, or an agent id the
// running node holds.
func (e *env) changeMember(ctx context.Context, target, peer string, add bool) error {
	home, err := node.Home()
	if err != nil {
		return err
	}
	peer, err = peerByName(home, peer)
	if err != nil {
		return err
	}
	verb := "removed"
	if add {
		verb = "added"
	}
	if _, serr := os.Stat(target); serr != nil && capsule.ValidAgentID(target) {
		return e.changeMemberThroughNode(ctx, target, peer, add, verb)
	}
	w, err := e.openWriter(ctx, target, false)
	var held *heldByNode
	if errors.As(err, &held) {
		fmt.Fprintf(e.stderr, "note: %s is the running node's copy of agent %s; changing its members through the node\n", target, held.agent)
		return e.changeMemberThroughNode(ctx, held.agent, peer, add, verb)
	}
	if err != nil {
		return err
	}
	var ev *journal.Event
	if add {
		ev, err = w.AddMember(ctx, w.id, peer)
	} else {
		ev, err = w.RemoveMember(ctx, w.id, peer)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	e.saidMember(peer, verb, ev != nil)
	return nil
}

func (e *env) changeMemberThroughNode(ctx context.Context, agent, peer string, add bool, verb string) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	var out api.MemberChange
	path := "/v1/capsules/" + url.PathEscape(agent) + "/members"
	if add {
		body, _ := json.Marshal(api.MemberChange{Peer: peer})
		err = cl.Do(ctx, http.MethodPost, path, bytes.NewReader(body), &out)
	} else {
		err = cl.Do(ctx, http.MethodDelete, path+"/"+url.PathEscape(peer), nil, &out)
	}
	if err != nil {
		return err
	}
	e.saidMember(peer, verb, out.Event != "")
	return nil
}

func (e *env) saidMember(peer, verb string, changed bool) {
	if changed {
		fmt.Fprintf(e.stdout, "%s %s\n", verb, peer)
	} else {
		fmt.Fprintf(e.stdout, "%s is a member already\n", peer)
	}
}

// peerByName returns the peer ID of the paired peer named name, or name
// itself when no paired peer has that name (a peer ID, checked where it
// is used).
func peerByName(home, name string) (string, error) {
	peers, err := node.LoadPeers(home)
	if err != nil {
		return "", err
	}
	for _, p := range peers.List() {
		if p.Name == name && name != "" {
			return p.ID, nil
		}
	}
	if _, err := node.ParsePeerID(name); err != nil {
		return "", &exitError{code: exitBadInput, err: fmt.Errorf("%q is neither a peer ID nor the name of a paired peer (tern peer list shows them; tern id prints a machine's peer ID)", name)}
	}
	return name, nil
}
