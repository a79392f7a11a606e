package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

func capsuleAdoptCmd(e *env) *cobra.Command {
	var (
		name string
		yes  bool
	)
	c := &cobra.Command{
		Use:     "adopt FILE.tar|DIR|AGENT-ID [--name NAME] [--yes]",
		Example: "  tern capsule adopt shared-agent.tar --name helper\n  tern capsule adopt $FOREIGN_COPY --yes",
		Short:   "Make a new agent of a capsule's state, this machine its only member; the running node holds it",
		Long: `Make a new agent of a capsule's state: its agent.json, environment, workspace
and notes, under a new id whose only member is this machine; the running node
holds it at epoch 1. This is how a capsule from someone else (a foreign copy,
which never runs here) becomes yours. Its conversation stays in the original.

adopt first shows what the agent.json would run and send (commands, base URLs,
secret names) and asks; --yes adopts without asking.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			src, err := capsule.Open(capsulePath(args[0])) // a folder, a tar, or a copy the node holds
			if err != nil {
				return err
			}
			defer src.Close()
			plan, err := planAdoption(src, name)
			if err != nil {
				return fmt.Errorf("adopt %s: %w", args[0], err)
			}
			plan.print(e.stderr, args[0])
			if !yes {
				ok, err := e.confirm("Adopt it? [y/N] ")
				if err != nil {
					return err
				}
				if !ok {
					e.done("adopt: nothing done")
					return nil
				}
			}
			id, err := e.identity()
			if err != nil {
				return err
			}
			tmp, err := os.MkdirTemp("", "tern-adopt-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			dir := filepath.Join(tmp, "capsule")
			if err := plan.build(cmd.Context(), src, dir, tmp, id, e); err != nil {
				return fmt.Errorf("adopt %s: %w", args[0], err)
			}
			body, packErr, err := capsuleTar(dir)
			if err != nil {
				return err
			}
			var res struct {
				ID string `json:"id"`
			}
			err = cl.Do(cmd.Context(), http.MethodPost, "/v1/capsules", body, &res)
			body.Close()
			if perr := packErr(); perr != nil {
				return perr
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, res.ID)
			e.done("adopted %s as a new agent %s (%s): this node runs it; its only member is this machine, until a paired machine takes a copy", args[0], plan.agent.Name, res.ID)
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "the new agent's name (default: the capsule's)")
	c.Flags().BoolVar(&yes, "yes", false, "adopt without asking")
	return c
}

// adoption is what adopt takes from a capsule: its agent.json (named as
// asked), environment spec and notes; the workspace is taken as it is.
type adoption struct {
	from     string // the capsule's agent id
	agent    capsule.Agent
	env      []byte
	envSpec  capsule.EnvSpec
	notes    memory.Notes
	files    int // in the workspace snapshot
	events   int // of the conversation, left behind
	snapshot bool
}

func planAdoption(src *capsule.Capsule, name string) (*adoption, error) {
	a, err := src.Agent()
	if err != nil {
		return nil, err
	}
	if name != "" {
		a.Name = name
	}
	env, err := src.ReadFile(capsule.EnvironmentFile)
	if err != nil {
		return nil, err
	}
	spec, err := capsule.ParseEnvSpec(env)
	if err != nil {
		return nil, err
	}
	m, err := src.Memory()
	if err != nil {
		return nil, err
	}
	events, err := src.Journal()
	if err != nil {
		return nil, err
	}
	p := &adoption{from: src.ID(), agent: a, env: env, envSpec: spec, notes: m.Notes.Live(), events: len(events)}
	if snap, err := src.Snapshot(); err == nil && len(snap.Entries) > 0 {
		p.snapshot = true
		for _, e := range snap.Entries {
			if e.Type == "file" {
				p.files++
			}
		}
	}
	return p, nil
}

// print says what the new agent would be and do.
func (p *adoption) print(w io.Writer, path string) {
	fmt.Fprintf(w, "adopt %s (agent %s) as a new agent %q:\n", path, p.from, p.agent.Name)
	fmt.Fprintf(w, "  model      %s %s", p.agent.Provider, p.agent.Model)
	if p.agent.BaseURL != "" {
		fmt.Fprintf(w, " at %s", p.agent.BaseURL)
	}
	if p.agent.KeySecret != "" {
		fmt.Fprintf(w, ", key from the secret %s", p.agent.KeySecret)
	}
	fmt.Fprintln(w)
	r := p.agent.Reach()
	for _, c := range r.Commands {
		fmt.Fprintf(w, "  runs       %s\n", c)
	}
	for _, s := range r.Sends {
		fmt.Fprintf(w, "  sends      %s\n", s)
	}
	for _, t := range r.Approvals {
		fmt.Fprintf(w, "  no asking  %s runs without approval\n", t)
	}
	if len(p.envSpec.Secrets) > 0 {
		fmt.Fprintf(w, "  secrets    its shell calls get %s from this machine's secrets\n", strings.Join(p.envSpec.Secrets, ", "))
	}
	if r.Empty() {
		fmt.Fprintln(w, "  runs no command and sends no key beyond its model's default API")
	}
	fmt.Fprintf(w, "  takes      agent.json, the environment, %s, %s\n", plural(p.files, "workspace file"), plural(len(p.notes), "note"))
	fmt.Fprintf(w, "  leaves     the conversation (%s) in %s\n", plural(p.events, "event"), path)
}

// build writes the new capsule in dir: created by id with the agent.json
// planned, the environment and notes accepted, the workspace snapshotted
// from the source (materialized under tmp first).
func (p *adoption) build(ctx context.Context, src *capsule.Capsule, dir, tmp string, id journal.Signer, e *env) error {
	c, err := capsule.NewWithAgent(dir, p.agent, id)
	if err != nil {
		return err
	}
	c.Close()
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(capsule.EnvironmentFile)), p.env, 0o644); err != nil {
		return err
	}
	d, err := capsule.OpenDir(ctx, dir, e.log)
	if err != nil {
		return err
	}
	defer d.Close()
	// agent.json, which runs what the person just read, is accepted by
	// this machine with the environment (capsule.AcceptEdits).
	if _, err := d.AcceptEdits(ctx, id); err != nil {
		return err
	}
	// Each note is written again as a new note of the new agent: of one
	// written apart in versions, every version that stands.
	var notes []journal.Draft
	for _, n := range p.notes {
		for _, v := range n.Heads {
			if v.Removed {
				continue
			}
			draft, _, err := memory.AddDraft(v.Text, v.Tags)
			if err != nil {
				return err
			}
			notes = append(notes, draft)
		}
	}
	if len(notes) > 0 {
		if _, err := d.Append(ctx, id, 0, notes...); err != nil {
			return err
		}
	}
	if !p.snapshot {
		return nil
	}
	ws := filepath.Join(tmp, "workspace")
	if err := src.Materialize(ws); err != nil {
		return err
	}
	_, err = d.Snapshot(ctx, id, ws)
	return err
}

// confirm asks a yes-or-no question on stderr and reads the answer from
// stdin, which must be a terminal: a script passes --yes instead.
func (e *env) confirm(question string) (bool, error) {
	if f, ok := e.stdin.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) { // /dev/null is a character device, not a terminal
		return false, &exitError{code: exitBadInput, err: errors.New("stdin is not a terminal, so nobody can answer: read what is above and pass --yes to go ahead")}
	}
	fmt.Fprint(e.stderr, question)
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}
