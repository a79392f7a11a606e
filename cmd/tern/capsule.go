package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

func capsuleCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "capsule",
		Short: "Create, check, pack, unpack and merge capsules (PATH is a folder or a tar)",
		Args:  cobra.NoArgs,
		RunE:  showHelp,
	}
	c.AddCommand(capsuleNewCmd(e), capsuleInspectCmd(e), capsuleVerifyCmd(e), capsulePackCmd(e),
		capsuleUnpackCmd(e), capsuleMergeCmd(e), capsuleSnapshotCmd(e), capsuleMaterializeCmd(e), capsuleAcceptCmd(e),
		capsuleImportCmd(e), capsuleExportCmd(e), capsuleListCmd(e), capsuleShareCmd(e, true), capsuleShareCmd(e, false))
	return c
}

func capsuleNewCmd(e *env) *cobra.Command {
	var name string
	c := &cobra.Command{
		Use:   "new DIR --name NAME",
		Short: "Create a capsule folder with every file of the layout; prints the agent id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return fmt.Errorf("capsule new: --name is required")
			}
			id, err := e.identity()
			if err != nil {
				return err
			}
			c, err := capsule.New(args[0], name, id.Machine())
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
		Use:   "inspect PATH [--json]",
		Short: "Show what a capsule holds",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := capsule.Open(args[0])
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
			fmt.Fprintf(w, "holder    %s at epoch %d\n", in.Holder.Peer, in.Holder.Epoch)
			if in.Signer != "" {
				fmt.Fprintf(w, "signed by %s (checked)\n", in.Signer)
			}
			fmt.Fprintf(w, "files     %d (%d blobs, %d bytes)\n", in.Files, in.Blobs, in.Bytes)
			fmt.Fprintf(w, "workspace %d entries\n", in.Workspace)
			fmt.Fprintf(w, "journal   %d events in %d sessions from %d machines\n", in.Events, len(in.Sessions), len(in.Vector))
			for _, m := range sortedKeys(in.Vector) {
				fmt.Fprintf(w, "          %s seq %d\n", m, in.Vector[m].Seq)
			}
			for _, f := range in.Forks {
				fmt.Fprintf(w, "FORK      machine %s seq %d: %d different events; %d events quarantined\n", f.Machine, f.Seq, len(f.IDs), in.Quarantined)
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
	signer, err := c.Manifest.CheckSignature()
	if err != nil {
		return nil, err
	}
	in := &inspection{
		ID: c.ID(), Name: agent.Name, Provider: agent.Provider, Model: agent.Model,
		Holder: c.Manifest.Holder, Signer: signer, Files: len(c.Manifest.Files) + 1,
		Events: len(events), Workspace: len(snap.Entries), Vector: journal.VectorOf(events),
		Forks: journal.Forks(events), Types: map[string]int{}, Environment: spec, Sessions: []string{},
	}
	for name, f := range c.Manifest.Files {
		in.Bytes += f.Size
		if strings.HasPrefix(name, capsule.BlobDir+"/") {
			in.Blobs++
		}
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
	_, q := journal.Readable(events)
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
		Use:   "verify PATH [--signer PEERID]",
		Short: "Check every file, hash, signature and chain; exit 1 and name each damaged file",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := capsule.Verify(args[0], capsule.VerifyOptions{Signer: signer})
			if err != nil {
				return err
			}
			for _, n := range rep.Notes {
				fmt.Fprintln(e.stderr, "note:", n)
			}
			if !rep.OK() {
				for _, p := range rep.Problems {
					fmt.Fprintln(e.stdout, p)
				}
				return checkFailed("%s: %d problems found; do not trust this capsule", args[0], len(rep.Problems))
			}
			signed := "unsigned"
			if rep.Signer != "" {
				signed = "signed by " + rep.Signer
			}
			fmt.Fprintf(e.stdout, "ok: agent %s, %d files, %d bytes, %d events, %s\n", rep.ID, rep.Files, rep.Bytes, rep.Events, signed)
			return nil
		},
	}
	c.Flags().StringVar(&signer, "signer", "", "require a valid signature by this peer ID")
	return c
}

func capsulePackCmd(e *env) *cobra.Command {
	var out string
	var sign bool
	c := &cobra.Command{
		Use:   "pack PATH -o FILE.tar [--sign]",
		Short: "Write a reproducible tar of a capsule, optionally signed by this machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("capsule pack: -o FILE.tar is required")
			}
			c, err := capsule.Open(args[0])
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
			return capsule.PackFile(c, out, opt)
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "the tar file to write")
	c.Flags().BoolVar(&sign, "sign", false, "sign the manifest with this machine's key")
	return c
}

func capsuleUnpackCmd(e *env) *cobra.Command {
	var lim capsule.Limits
	c := &cobra.Command{
		Use:   "unpack FILE.tar DIR",
		Short: "Check a capsule tar and unpack it into a new folder (created only on success)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return capsule.Unpack(args[0], args[1], lim)
		},
	}
	c.Flags().Int64Var(&lim.MaxFileSize, "max-file-size", capsule.DefaultLimits.MaxFileSize, "refuse a tar holding a file larger than this many bytes")
	c.Flags().Int64Var(&lim.MaxTotalSize, "max-total-size", capsule.DefaultLimits.MaxTotalSize, "refuse a tar whose files add up to more bytes than this")
	return c
}

func capsuleMergeCmd(e *env) *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "merge A B -o OUT",
		Short: "Merge two copies of one capsule into a new folder (or OUT.tar)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("capsule merge: -o OUT is required")
			}
			a, err := capsule.Open(args[0])
			if err != nil {
				return err
			}
			defer a.Close()
			b, err := capsule.Open(args[1])
			if err != nil {
				return err
			}
			defer b.Close()
			res, err := capsule.Merge(a, b, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "merged %d events into %s\n", res.Events, out)
			for _, f := range res.Forks {
				fmt.Fprintf(e.stderr, "FORK: machine %s wrote %d different events at seq %d; they and what follows are quarantined, nothing was chosen\n", f.Machine, len(f.IDs), f.Seq)
			}
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "the new folder, or a .tar file")
	return c
}

func capsuleSnapshotCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot DIR WORKSPACE",
		Short: "Store a workspace folder in the capsule and make it the current snapshot",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := e.identity()
			if err != nil {
				return err
			}
			d, err := e.openDir(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer d.Close()
			body, err := d.Snapshot(cmd.Context(), id, args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "snapshot %s: %d files, %d bytes\n", body.Snapshot, body.Files, body.Bytes)
			return nil
		},
	}
}

func capsuleMaterializeCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "materialize PATH OUT",
		Short: "Write the capsule's workspace snapshot to a new folder, hash-checking every file",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := capsule.Open(args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			return c.Materialize(args[1])
		},
	}
}

func capsuleAcceptCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "accept DIR",
		Short: "Accept hand edits of agent.json and environment/spec.json into the manifest and journal",
		Long: "After editing agent.json or environment/spec.json in a capsule folder, accept checks\n" +
			"the new content, records a file.updated event signed by this machine and writes a new\n" +
			"manifest. Any other file that no longer matches the manifest is damage and is refused.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := e.identity()
			if err != nil {
				return err
			}
			d, err := e.openDir(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer d.Close()
			names, err := d.AcceptEdits(cmd.Context(), id)
			if err != nil {
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
