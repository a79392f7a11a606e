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
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
	"github.com/tern-dev/tern/tool"
)

func capsuleCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "capsule",
		Short: "Create, check, pack, unpack and merge capsules (PATH is a folder or a tar)",
		Args:  groupArgs,
		RunE:  showHelp,
	}
	c.AddCommand(capsuleNewCmd(e), capsuleInspectCmd(e), capsuleVerifyCmd(e), capsulePackCmd(e),
		capsuleUnpackCmd(e), capsuleMergeCmd(e), capsuleHealCmd(e), capsuleSnapshotCmd(e), capsuleMaterializeCmd(e), capsuleAcceptCmd(e),
		capsuleAdoptCmd(e), capsuleImportCmd(e), capsuleExportCmd(e), capsuleListCmd(e), capsuleShareCmd(e, true), capsuleShareCmd(e, false))
	return c
}

func capsuleNewCmd(e *env) *cobra.Command {
	var name string
	c := &cobra.Command{
		Use:     "new DIR --name NAME",
		Example: "  tern capsule new ./agent --name helper",
		Short:   "Create a capsule folder with every file of the layout; prints the agent id",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return fmt.Errorf("capsule new: --name is required")
			}
			id, err := e.identity()
			if err != nil {
				return err
			}
			agent := capsule.DefaultAgent(name)
			agent.Tools = tool.Defaults() // with their approval defaults, for a person to change
			c, err := capsule.NewWithAgent(args[0], agent, id)
			if err != nil {
				return err
			}
			defer c.Close()
			fmt.Fprintln(e.stdout, c.ID())
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "the agent's name")
	return c
}

// inspection is what capsule inspect prints.
type inspection struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Provider    string          `json:"provider"`
	Model       string          `json:"model"`
	BaseURL     string          `json:"base_url,omitempty"`
	KeySecret   string          `json:"key_secret,omitempty"` // the secret's name; no value is ever read here
	Holder      capsule.Holder  `json:"holder"`
	Signer      string          `json:"signer,omitempty"`
	Files       int             `json:"files"`
	Blobs       int             `json:"blobs"`
	Bytes       int64           `json:"bytes"`
	Events      int             `json:"events"`
	Sessions    []string        `json:"sessions"`
	Workspace   int             `json:"workspace_entries"`
	Vector      journal.Vector  `json:"vector"`
	Forks       []journal.Fork  `json:"forks"`
	Quarantined int             `json:"quarantined"`
	Types       map[string]int  `json:"event_types"`
	Environment capsule.EnvSpec `json:"environment"`
}

func capsuleInspectCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "inspect PATH [--json]",
		Example: "  tern capsule inspect ./agent\n  tern capsule inspect $AGENT --json | jq .event_types",
		Short:   "Show what a capsule holds",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := capsule.Open(capsulePath(args[0]))
			if err != nil {
				return err
			}
			defer c.Close()
			in, err := inspect(c)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(in)
			}
			w := e.stdout
			fmt.Fprintf(w, "agent     %s (%s)\n", in.ID, in.Name)
			fmt.Fprintf(w, "model     %s / %s\n", in.Provider, in.Model)
			if in.BaseURL != "" {
				fmt.Fprintf(w, "base url  %s\n", in.BaseURL)
			}
			if in.KeySecret != "" {
				fmt.Fprintf(w, "key       from secret %s\n", in.KeySecret)
			}
			fmt.Fprintf(w, "holder    %s at epoch %d\n", in.Holder.Peer, in.Holder.Epoch)
			if in.Signer != "" {
				fmt.Fprintf(w, "signed by %s (checked)\n", in.Signer)
			}
			fmt.Fprintf(w, "files     %d (%s, %s)\n", in.Files, plural(in.Blobs, "blob"), plural(int(in.Bytes), "byte"))
			fmt.Fprintf(w, "workspace %s\n", plural(in.Workspace, "entry"))
			fmt.Fprintf(w, "journal   %s in %s from %s\n", plural(in.Events, "event"), plural(len(in.Sessions), "session"), plural(len(in.Vector), "machine"))
			for _, m := range sortedKeys(in.Vector) {
				fmt.Fprintf(w, "          %s seq %d\n", m, in.Vector[m].Seq)
			}
			for _, f := range in.Forks {
				fmt.Fprintf(w, "FORK      machine %s seq %d: %d different events; %s quarantined\n", f.Machine, f.Seq, len(f.IDs), plural(in.Quarantined, "event"))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}

func inspect(c *capsule.Capsule) (*inspection, error) {
	agent, err := c.Agent()
	if err != nil {
		return nil, err
	}
	spec, err := c.Environment()
	if err != nil {
		return nil, err
	}
	events, err := c.Journal()
	if err != nil {
		return nil, err
	}
	snap, err := c.Snapshot()
	if err != nil {
		return nil, err
	}
	signer, err := c.Manifest().CheckSignature()
	if err != nil {
		return nil, err
	}
	in := &inspection{
		ID: c.ID(), Name: agent.Name, Provider: agent.Provider, Model: agent.Model, BaseURL: agent.BaseURL, KeySecret: agent.KeySecret,
		Holder: c.Manifest().Holder, Signer: signer, Files: len(c.Manifest().Files) + 1,
		Events: len(events), Workspace: len(snap.Entries), Vector: journal.VectorOf(events),
		Forks: journal.Forks(events), Types: map[string]int{}, Environment: spec, Sessions: []string{},
	}
	for name, f := range c.Manifest().Files {
		if name != capsule.JournalFile { // counted below, with events its writer has not sealed yet
			in.Bytes += f.Size
		}
		if strings.HasPrefix(name, capsule.BlobDir+"/") {
			in.Blobs++
		}
	}
	for _, ev := range events {
		in.Bytes += int64(len(ev.Line())) + 1
	}
	seen := map[string]bool{}
	for _, ev := range events {
		in.Types[ev.Type]++
		if ev.Session != "" && !seen[ev.Session] {
			seen[ev.Session] = true
			in.Sessions = append(in.Sessions, ev.Session)
		}
	}
	sort.Strings(in.Sessions)
	_, q := journal.ReadableOf(c.ID(), events)
	in.Quarantined = len(q)
	if in.Forks == nil {
		in.Forks = []journal.Fork{}
	}
	return in, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func capsuleVerifyCmd(e *env) *cobra.Command {
	var signer string
	c := &cobra.Command{
		Use:     "verify PATH [--signer PEERID]",
		Example: "  tern capsule verify ./agent\n  tern capsule verify agent.tar --signer 12D3KooW…",
		Short:   "Check every file, hash, signature and chain; exit 1 and name each damaged file",
		Long: "Checks a capsule folder or tar offline: every file against the manifest, the manifest's\n" +
			"digest and signature, every journal line, signature and chain, and what the format forbids\n" +
			"(links, unlisted files and folders). Damage: one line per problem on standard output, exit 1.\n" +
			"A file that could not be read (an I/O error, a permission, too many open files): exit 3,\n" +
			"\"could not check\". What an interrupted write left, which the next write tidies: notes on\n" +
			"standard error, exit 0.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("signer") {
				if err := checkPeerID("--signer", signer); err != nil {
					return err
				}
			}
			rep, err := capsule.Verify(capsulePath(args[0]), capsule.VerifyOptions{Signer: signer})
			if err != nil {
				return err
			}
			for _, n := range rep.Notes {
				fmt.Fprintln(e.stderr, "note:", n)
			}
			for _, p := range rep.Problems {
				fmt.Fprintln(e.stdout, p)
			}
			for _, p := range rep.Unchecked {
				fmt.Fprintln(e.stdout, "could not check", p)
			}
			switch {
			case len(rep.Problems) > 0:
				return checkFailed("%s: %s found; do not trust this capsule", args[0], plural(len(rep.Problems), "problem"))
			case len(rep.Unchecked) > 0:
				return &exitError{exitFailed, fmt.Errorf("%s: could not check %s (they could not be read); nothing damaged was found in the rest. Fix what stopped the reads and verify again", args[0], plural(len(rep.Unchecked), "file"))}
			}
			signed := "unsigned"
			if rep.Signer != "" {
				signed = "signed by " + rep.Signer
			}
			fmt.Fprintf(e.stdout, "ok: agent %s, %s, %s, %s, %s\n", rep.ID, plural(rep.Files, "file"), plural(int(rep.Bytes), "byte"), plural(rep.Events, "event"), signed)
			return nil
		},
	}
	c.Flags().StringVar(&signer, "signer", "", "require a valid signature by this peer ID")
	return c
}

// checkPeerID refuses an empty or malformed peer ID given to flag, or one
// not in its canonical spelling (base58btc, as tern prints them).
func checkPeerID(flag, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty: give the peer ID (12D3KooW…) that must have signed; did a shell variable go unset?", flag)
	}
	id, err := node.ParsePeerID(s)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if id.String() != s {
		return fmt.Errorf("%s %q is not a peer ID in its canonical spelling; write it as %s", flag, s, id)
	}
	return nil
}

func capsulePackCmd(e *env) *cobra.Command {
	var out string
	var sign, force bool
	c := &cobra.Command{
		Use:     "pack PATH -o FILE.tar [--sign] [--force]",
		Short:   "Write a reproducible tar of a capsule, optionally signed by this machine",
		Example: "  tern capsule pack ./agent -o agent.tar --sign",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("capsule pack: -o FILE.tar is required")
			}
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("capsule pack: %s exists; give another name, or --force to replace it", out)
			}
			c, err := capsule.Open(capsulePath(args[0]))
			if err != nil {
				return err
			}
			defer c.Close()
			var opt capsule.PackOptions
			if sign {
				id, err := e.identity()
				if err != nil {
					return err
				}
				opt.Signer = id
			}
			if err := capsule.PackFile(c, out, opt); err != nil {
				return err
			}
			signed := ""
			if sign {
				signed = ", signed by this machine"
			}
			e.done("packed %s into %s%s", args[0], out, signed)
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "the tar file to write")
	c.Flags().BoolVar(&sign, "sign", false, "sign the manifest with this machine's key")
	c.Flags().BoolVar(&force, "force", false, "replace FILE.tar if it exists")
	return c
}

func capsuleUnpackCmd(e *env) *cobra.Command {
	var lim capsule.Limits
	c := &cobra.Command{
		Use:     "unpack FILE.tar DIR",
		Example: "  tern capsule unpack agent.tar ./copy",
		Short:   "Check a capsule tar and unpack it into a new folder (created only on success)",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := capsule.Unpack(args[0], args[1], lim); err != nil {
				return err
			}
			c, err := capsule.Open(args[1])
			if err != nil {
				return err
			}
			defer c.Close()
			events, err := c.Journal()
			if err != nil {
				return err
			}
			e.done("unpacked %s into %s: every file checked, %s", args[0], args[1], plural(len(events), "event"))
			return e.reportForks(args[1], journal.Forks(events))
		},
	}
	c.Flags().Int64Var(&lim.MaxFileSize, "max-file-size", capsule.DefaultLimits.MaxFileSize, "refuse a tar holding a file larger than this many bytes")
	c.Flags().Int64Var(&lim.MaxTotalSize, "max-total-size", capsule.DefaultLimits.MaxTotalSize, "refuse a tar whose files add up to more bytes than this")
	return c
}

func capsuleMergeCmd(e *env) *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:     "merge A B -o OUT",
		Example: "  tern capsule merge ./agent ./copy -o ./merged",
		Short:   "Merge two copies of one capsule into a new folder (or OUT.tar)",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("capsule merge: -o OUT is required")
			}
			a, err := capsule.Open(capsulePath(args[0]))
			if err != nil {
				return err
			}
			defer a.Close()
			b, err := capsule.Open(capsulePath(args[1]))
			if err != nil {
				return err
			}
			defer b.Close()
			res, err := capsule.Merge(a, b, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "merged %s into %s\n", plural(res.Events, "event"), out)
			return e.reportForks(out, res.Forks)
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "the new folder, or a .tar file")
	return c
}

func capsuleSnapshotCmd(e *env) *cobra.Command {
	var exclude []string
	c := &cobra.Command{
		Use:   "snapshot DIR|AGENT-ID WORKSPACE [--exclude PATTERN]...",
		Short: "Store a workspace folder in the capsule and make it the current snapshot",
		Long: "Stores WORKSPACE's files as blobs of the capsule and makes them its current snapshot.\n" +
			"It leaves out .git/, what WORKSPACE/.ternignore lists (one pattern per line, # comments)\n" +
			"and what --exclude names. A pattern ending in / matches folders only; one with a / elsewhere\n" +
			"matches the path from WORKSPACE's root; any other matches a name at any depth (*.log,\n" +
			"node_modules/). A symbolic link or a device is refused, naming it, and nothing is stored.\n" +
			"Given an agent id (or the node's folder of it), the running node records it, after any\n" +
			"tool call in progress, and its tools go on from the new snapshot.",
		Example: "  tern capsule snapshot ./agent ./project --exclude 'node_modules/' --exclude '*.log'\n" +
			"  tern capsule snapshot $AGENT ./project",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if _, err := os.Stat(args[0]); err != nil && capsule.ValidAgentID(args[0]) {
				return e.snapshotThroughNode(ctx, args[0], args[1], exclude)
			}
			w, err := e.openWriter(ctx, args[0], false)
			var held *heldByNode
			if errors.As(err, &held) {
				return e.snapshotThroughNode(ctx, held.agent, args[1], exclude)
			}
			if err != nil {
				return err
			}
			body, left, err := w.SnapshotWith(ctx, w.id, 0, args[1], capsule.SnapshotOptions{Exclude: exclude})
			if err = errors.Join(err, w.Close()); err != nil {
				return err
			}
			e.printSnapshot(body, left, "")
			return nil
		},
	}
	c.Flags().StringArrayVar(&exclude, "exclude", nil, "leave out paths matching PATTERN (repeatable)")
	return c
}

// snapshotThroughNode records workspace as the snapshot of the running
// node's copy of agent.
func (e *env) snapshotThroughNode(ctx context.Context, agent, workspace string, exclude []string) error {
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return err
	}
	cl, err := e.client()
	if err != nil {
		return err
	}
	req, err := json.Marshal(api.SnapshotRequest{Workspace: abs, Exclude: exclude})
	if err != nil {
		return err
	}
	var res struct {
		capsule.SnapshotEventBody
		LeftOut []string `json:"left_out"`
	}
	if err := cl.Do(ctx, http.MethodPost, "/v1/capsules/"+url.PathEscape(agent)+"/snapshot", bytes.NewReader(req), &res); err != nil {
		return err
	}
	e.printSnapshot(res.SnapshotEventBody, res.LeftOut, " (through the node)")
	return nil
}

// printSnapshot says what a snapshot stored and, on stderr, what it left out.
func (e *env) printSnapshot(body capsule.SnapshotEventBody, left []string, how string) {
	fmt.Fprintf(e.stdout, "snapshot %s: %s, %s%s\n", body.Snapshot, plural(body.Files, "file"), plural(int(body.Bytes), "byte"), how)
	if len(left) > 0 {
		shown := left[:min(len(left), 5)]
		more := ""
		if len(left) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(left)-len(shown))
		}
		fmt.Fprintf(e.stderr, "left out %s%s (.git/ always; .ternignore and --exclude the rest)\n", strings.Join(shown, ", "), more)
	}
}

func capsuleMaterializeCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "materialize PATH OUT",
		Example: "  tern capsule materialize ./agent ./workspace-again",
		Short:   "Write the capsule's workspace snapshot to a new folder, hash-checking every file",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := capsule.Open(capsulePath(args[0]))
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.Materialize(args[1]); err != nil {
				return err
			}
			e.done("materialized the workspace of %s into %s, every file hash-checked", args[0], args[1])
			return nil
		},
	}
}

func capsuleAcceptCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "accept DIR|AGENT-ID",
		Example: "  $EDITOR ./agent/agent.json && tern capsule accept ./agent\n  $EDITOR $TERN_HOME/capsules/$AGENT/agent.json && tern capsule accept $AGENT",
		Short:   "Accept hand edits of agent.json and environment/spec.json into the manifest and journal",
		Long: "After editing agent.json or environment/spec.json in a capsule folder, accept checks\n" +
			"the new content, records a file.updated event signed by this machine and writes a new\n" +
			"manifest. Any other file that no longer matches the manifest is damage and is refused.\n" +
			"For an agent the running node holds, edit its copy ($TERN_HOME/capsules/AGENT-ID/agent.json)\n" +
			"and accept with the agent id (or that folder): the node, its one writer, accepts it. The\n" +
			"node runs turns only with accepted content.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if _, err := os.Stat(args[0]); err != nil && capsule.ValidAgentID(args[0]) {
				return e.acceptThroughNode(ctx, args[0])
			}
			w, err := e.openWriter(ctx, args[0], false)
			var held *heldByNode
			if errors.As(err, &held) {
				return e.acceptThroughNode(ctx, held.agent)
			}
			if err != nil {
				return err
			}
			names, err := w.AcceptEdits(ctx, w.id)
			if err = errors.Join(err, w.Close()); err != nil {
				return err
			}
			if len(names) == 0 {
				fmt.Fprintln(e.stdout, "nothing to accept: every file matches the manifest")
			}
			for _, n := range names {
				fmt.Fprintln(e.stdout, "accepted", n)
			}
			return nil
		},
	}
}

func capsuleHealCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "heal DIR|AGENT-ID",
		Example: "  tern capsule heal ./merged",
		Short:   "Resolve a fork of this machine's own chain: keep one branch, sign the other again after it",
		Long: "A fork is two different events that one machine signed at one place of its chain (two\n" +
			"copies written apart, a restored backup). heal keeps the branch that reaches furthest, signs\n" +
			"the events of the other branches again after it (same content), and appends a chain.healed\n" +
			"event naming each event it sets aside, so every peer that receives it reads the same chain.\n" +
			"Nothing is deleted: the old events stay in the journal, set aside. Only the machine that\n" +
			"signed a fork can heal it. It also makes DIR the copy this machine writes the agent in,\n" +
			"when the copy it last wrote is gone. Given an agent id, it heals the running node's copy.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if _, err := os.Stat(args[0]); err != nil && capsule.ValidAgentID(args[0]) {
				return e.healThroughNode(ctx, args[0])
			}
			w, err := e.openWriter(ctx, args[0], true)
			var held *heldByNode
			if errors.As(err, &held) {
				return e.healThroughNode(ctx, held.agent)
			}
			if err != nil {
				return err
			}
			healed, err := w.Heal(ctx, w.id)
			if err = errors.Join(err, w.Close()); err != nil && !errors.Is(err, journal.ErrNothingToHeal) {
				return err
			}
			if len(healed) == 0 {
				fmt.Fprintf(e.stdout, "nothing to heal: this machine's chain in %s is whole, and %s is now the copy this machine writes the agent in\n", args[0], args[0])
			} else {
				fmt.Fprintf(e.stdout, "healed: %s signed again after the kept branch, and a %s event naming what it set aside\n", plural(len(healed)-1, "event"), journal.HealType)
			}
			rep, err := capsule.Verify(args[0], capsule.VerifyOptions{})
			if err != nil {
				return err
			}
			if !rep.OK() {
				for _, p := range rep.Issues() {
					fmt.Fprintln(e.stdout, p)
				}
				return checkFailed("%s still does not verify (forks of other machines heal only on those machines): run tern capsule verify %s", args[0], args[0])
			}
			fmt.Fprintf(e.stdout, "ok: %s verifies\n", args[0])
			return nil
		},
	}
}

// capsulePath is the capsule a reading command's argument names: a
// folder or a tar; or, when no such file exists, the agent id of a capsule
// the node of $TERN_HOME holds, read in its folder there.
func capsulePath(arg string) string {
	if _, err := os.Stat(arg); err == nil || !capsule.ValidAgentID(arg) {
		return arg
	}
	home, err := node.Home()
	if err != nil {
		return arg
	}
	held := filepath.Join(home, store.CapsulesDir, arg)
	if _, err := os.Stat(held); err != nil {
		return arg
	}
	return held
}

// acceptThroughNode accepts the hand edits of the running node's copy of
// agent.
func (e *env) acceptThroughNode(ctx context.Context, agent string) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	var res struct {
		Accepted []string `json:"accepted"`
	}
	if err := cl.Do(ctx, http.MethodPost, "/v1/capsules/"+url.PathEscape(agent)+"/accept", nil, &res); err != nil {
		return err
	}
	if len(res.Accepted) == 0 {
		fmt.Fprintln(e.stdout, "nothing to accept: every file of the node's copy matches the manifest")
	}
	for _, n := range res.Accepted {
		fmt.Fprintln(e.stdout, "accepted", n, "(through the node)")
	}
	return nil
}

// healThroughNode heals the running node's copy of agent.
func (e *env) healThroughNode(ctx context.Context, agent string) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	var res struct {
		IDs []string `json:"ids"`
	}
	if err := cl.Do(ctx, http.MethodPost, "/v1/capsules/"+url.PathEscape(agent)+"/heal", nil, &res); err != nil {
		return err
	}
	if len(res.IDs) == 0 {
		fmt.Fprintf(e.stdout, "nothing to heal: this machine's chain of agent %s is whole\n", agent)
		return nil
	}
	fmt.Fprintf(e.stdout, "healed: %s signed again and a %s event, through the node\n", plural(len(res.IDs)-1, "event"), journal.HealType)
	return nil
}

// thisMachine is this machine's peer ID if $TERN_HOME holds a key, "" if
// not (it never creates one).
func thisMachine() string {
	home, err := node.Home()
	if err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(home, node.KeyFile)); err != nil {
		return ""
	}
	id, err := node.LoadIdentity(home)
	if err != nil {
		return ""
	}
	return id.Machine()
}

// reportForks names each fork of the capsule at path and who can heal it;
// with any, the command fails with exit code 1 (the capsule was written).
func (e *env) reportForks(path string, forks []journal.Fork) error {
	if len(forks) == 0 {
		return nil
	}
	me := thisMachine()
	for _, f := range forks {
		fmt.Fprintf(e.stderr, "FORK: machine %s wrote %d different events at seq %d; they and what follows are quarantined, nothing was chosen.\n", f.Machine, len(f.IDs), f.Seq)
		if f.Machine == me {
			fmt.Fprintf(e.stderr, "      This machine signed both branches: heal it with: tern capsule heal %s\n", path)
		} else {
			fmt.Fprintf(e.stderr, "      Only machine %s can heal it (a copied key or a restored backup signed both branches): on it, run tern capsule heal on a copy that holds both.\n", f.Machine)
		}
	}
	return checkFailed("%s holds %s: it does not verify, and the forked chains take no appends until healed", path, plural(len(forks), "unresolved fork"))
}

// plural is "1 thing" or "n things" (an "entry", "n entries").
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	if len(thing) > 1 && strings.HasSuffix(thing, "y") && !strings.ContainsAny(thing[len(thing)-2:len(thing)-1], "aeiou") {
		return fmt.Sprintf("%d %sies", n, thing[:len(thing)-1]) // entries
	}
	for _, end := range []string{"s", "sh", "ch", "x"} {
		if strings.HasSuffix(thing, end) {
			return fmt.Sprintf("%d %ses", n, thing) // addresses, matches
		}
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
