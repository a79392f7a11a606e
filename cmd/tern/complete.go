package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/providerid"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
)

// completions teaches shell completion (tern completion bash|zsh|fish)
// the names tern takes: agent ids (with their names) where a command's
// first argument is an agent, files too where it may be a folder or a
// tar, peer names for --to and --peer, provider names for --provider.
func completions(c *cobra.Command) {
	if names := argNames(c.Use); len(names) > 0 && c.ValidArgsFunction == nil {
		switch first := names[0]; {
		case first == "AGENT" || first == "ID":
			c.ValidArgsFunction = completeAgents(cobra.ShellCompDirectiveNoFileComp)
		case strings.Contains(first, "AGENT") || first == "PATH" || first == "DIR":
			c.ValidArgsFunction = completeAgents(cobra.ShellCompDirectiveDefault)
		}
	}
	for flag, complete := range map[string]cobra.CompletionFunc{"to": completePeers, "peer": completePeers, "provider": completeProviders} {
		if c.Flags().Lookup(flag) != nil {
			c.RegisterFlagCompletionFunc(flag, complete)
		}
	}
	for _, sub := range c.Commands() {
		completions(sub)
	}
}

// completeAgents completes the first argument with the agents the node
// of $TERN_HOME holds, each described by its name.
func completeAgents(directive cobra.ShellCompDirective) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveDefault
		}
		home, err := node.Home()
		if err != nil {
			return nil, directive
		}
		entries, _ := os.ReadDir(filepath.Join(home, store.CapsulesDir))
		var out []cobra.Completion
		for _, e := range entries {
			if !e.IsDir() || !capsule.ValidAgentID(e.Name()) {
				continue
			}
			name := ""
			if data, err := os.ReadFile(filepath.Join(home, store.CapsulesDir, e.Name(), capsule.AgentFile)); err == nil {
				if a, err := capsule.ParseAgent(data); err == nil {
					name = a.Name
				}
			}
			out = append(out, cobra.CompletionWithDesc(e.Name(), name))
		}
		return out, directive
	}
}

func completePeers(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	home, err := node.Home()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ps, err := node.LoadPeers(home)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, p := range ps.List() {
		if p.Name != "" {
			out = append(out, cobra.CompletionWithDesc(p.Name, p.ID))
		} else {
			out = append(out, p.ID)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func completeProviders(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return providerid.Names(providerid.All()), cobra.ShellCompDirectiveNoFileComp
}
