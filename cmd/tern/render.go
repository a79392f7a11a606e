package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/providerid"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/render"
)

// maxRenderBlob bounds one image or file read into a request body; the
// providers refuse far smaller ones.
const maxRenderBlob = 64 << 20

// wireNames lists the providers render writes for: "openai-chat, …, gemini
// or ollama".
func wireNames() string {
	names := providerid.Names(providerid.Wires())
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func renderCmd(e *env) *cobra.Command {
	var provider, model, host, session string
	var window int
	c := &cobra.Command{
		Use:     "render PATH [--provider P] [--model M] [--host H] [--window TOKENS] [--session S]",
		Example: "  tern render ./agent --provider anthropic --window 100000 | jq .",
		Short:   "Print the request body a provider would get for a session of the journal",
		Long: "Renders one session of the capsule's journal (PATH is a folder or a tar) as the exact JSON\n" +
			"request body for a provider: " + wireNames() + ".\n" +
			"The provider and model default to agent.json's, the host to the provider's public API, the\n" +
			"session to that of the journal's most recent event that has one. --window fits the request into that\n" +
			"many estimated tokens, instructions and tools included, leaving out the oldest events with\n" +
			"a summary in their place. What render leaves out or changes is logged on standard error.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if window < 0 {
				return fmt.Errorf("render: --window %d: give a positive number of tokens, or 0 for no limit", window)
			}
			cp, err := capsule.Open(capsulePath(args[0]))
			if err != nil {
				return err
			}
			defer cp.Close()
			agent, err := cp.Agent()
			if err != nil {
				return err
			}
			name := provider
			if name == "" {
				name = agent.Provider
			}
			p, err := render.ParseProvider(name)
			if err != nil {
				if provider == "" {
					return fmt.Errorf("render: agent.json names provider %q; pass --provider: %w", name, err)
				}
				return fmt.Errorf("render: --provider: %w", err)
			}
			if model == "" {
				model = agent.Model
			}
			all, err := cp.Journal()
			if err != nil {
				return err
			}
			view, quarantined := journal.ReadableOf(cp.ID(), all)
			switch {
			case len(quarantined) > 0 && len(journal.Check(all)) > 0:
				e.log.Warn("render: quarantined events left out (a fork or a break; see tern capsule inspect)", "events", len(quarantined))
			case len(quarantined) > 0:
				e.log.Info("render: events a heal set aside are left out (their content was signed again)", "events", len(quarantined))
			}
			journal.Sort(view)
			events, err := sessionEvents(view, session, cmd.Flags().Changed("session"))
			if err != nil {
				return err
			}
			res, err := render.Render(render.Request{
				Events: events,
				Agent:  agent,
				Target: render.Target{Provider: p, Model: model, Host: host, Window: window},
				Blobs:  capsuleBlobs{cp},
			})
			if err != nil {
				return err
			}
			for _, n := range res.Notes {
				e.log.Warn("render: " + n)
			}
			if res.Dropped > 0 {
				e.log.Info("render: fitted into the window", "left_out_events", res.Dropped, "estimated_tokens", res.Tokens, "window", window)
			}
			_, err = fmt.Fprintf(e.stdout, "%s\n", res.Body)
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&provider, "provider", "", wireNames()+" (default: agent.json's)")
	f.StringVar(&model, "model", "", "model name (default: agent.json's)")
	f.StringVar(&host, "host", "", "API host; reasoning is replayed only to the host that produced it (default: the provider's public API)")
	f.IntVar(&window, "window", 0, "context window in estimated tokens; 0 means no limit")
	f.StringVar(&session, "session", "", "session to render (default: the session of the most recent event)")
	return c
}

// sessionEvents returns the events of one session, in order. Without an
// explicit session it takes that of the most recent event that has one
// (capsule events such as workspace.snapshot belong to no session), or
// the empty session if none has.
func sessionEvents(view []*journal.Event, session string, explicit bool) ([]*journal.Event, error) {
	if !explicit {
		for i := len(view) - 1; i >= 0; i-- {
			if view[i].Session != "" {
				session = view[i].Session
				break
			}
		}
	}
	var out []*journal.Event
	for _, ev := range view {
		if ev.Session == session {
			out = append(out, ev)
		}
	}
	if explicit && len(out) == 0 {
		return nil, fmt.Errorf("render: session %q has no events in this journal", session)
	}
	return out, nil
}

// capsuleBlobs gives render the capsule's blobs, checked against their
// hash.
type capsuleBlobs struct{ c *capsule.Capsule }

var _ render.Blobs = capsuleBlobs{}

func (b capsuleBlobs) Blob(cid string) ([]byte, error) { return b.c.ReadBlob(cid, maxRenderBlob) }
