package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/tool"
)

func mcpCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "mcp",
		Short: "See the MCP servers an agent's agent.json declares, and their tools",
		Args:  groupArgs,
		RunE:  showHelp,
	}
	c.AddCommand(mcpListCmd(e))
	return c
}

func mcpListCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list AGENT|DIR [--json]",
		Short: "Connect to each MCP server the agent declares and list its state and tools with their effect classes",
		Long: "Connects to each server of agent.json's mcp_servers, as the runtime would, with this\n" +
			"machine's secrets (the node's, for an agent id it holds), and lists each server's state\n" +
			"and its tools: the name the model sees (mcp__SERVER__TOOL), the effect class the\n" +
			"server's annotations give (readOnlyHint: pure; idempotentHint: idempotent; else\n" +
			"at-most-once) and whether a call needs approval (by default every tool but a pure\n" +
			"one; agent.json's tools may say otherwise). A capsule folder's stdio servers run in\n" +
			"the current folder. The last line says whether this machine confines shell's\n" +
			"commands (Landlock: no reading the node's home, writing only the workspace and the\n" +
			"temporary folder) or runs them unconfined, and why.",
		Example: "  tern mcp list $AGENT\n  tern mcp list ./agent --json | jq '.[] | {name, state}'",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := targetOf(args[0])
			if err != nil {
				return err
			}
			// A server that takes a while to start (npx downloading it
			// on its first run) gets one line saying what is waited for.
			stopWaiting := e.sayIfSlow(time.Second, "waiting for the MCP servers to start (up to 90 s; npx fetches a server the first time it runs one)…")
			var states []tool.MCPServerState
			if t.agent != "" {
				var res struct {
					Servers []tool.MCPServerState `json:"servers"`
				}
				err = e.nodeDo(cmd.Context(), http.MethodGet, "/v1/agents/"+t.agent+"/mcp", nil, &res)
				states = res.Servers
			} else {
				states, err = e.mcpOfFolder(cmd.Context(), t.dir)
			}
			stopWaiting()
			if err != nil {
				return err
			}
			if asJSON {
				if states == nil {
					states = []tool.MCPServerState{}
				}
				return printJSON(e, states)
			}
			if len(states) == 0 {
				fmt.Fprintln(e.stderr, "agent.json declares no MCP server (mcp_servers)")
			}
			for _, s := range states {
				fmt.Fprintf(e.stdout, "%s (%s): %s\n", s.Name, s.Kind, s.State)
				if s.Error != "" {
					fmt.Fprintf(e.stdout, "  %s\n", s.Error)
				}
				for _, tl := range s.Tools {
					approval := ""
					if tl.Approval {
						approval = ", needs approval"
					}
					fmt.Fprintf(e.stdout, "  %-40s %s%s\n", tl.Name, tl.Effect, approval)
				}
			}
			fmt.Fprintf(e.stdout, "shell commands here: %s\n", tool.Confinement())
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the servers as a JSON array")
	return c
}

// mcpOfFolder lists the MCP servers of a capsule folder's agent.json here.
func (e *env) mcpOfFolder(ctx context.Context, dir string) ([]tool.MCPServerState, error) {
	c, err := capsule.Open(dir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ours, err := e.ours()
	if err != nil {
		return nil, err
	}
	a, err := c.TrustedAgent(dir, ours)
	if err != nil {
		return nil, err
	}
	// The keyring gives the servers' secrets and the OAuth tokens kept for
	// HTTP servers; a server that needs neither works without it.
	var store provider.Secrets
	for _, s := range a.MCPServers {
		if len(s.Secrets) > 0 {
			if store, err = openSecrets(e); err != nil {
				return nil, err
			}
			break
		}
		if s.URL != "" {
			if kr, err := openSecrets(e); err == nil {
				store = kr
			}
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	m := tool.NewMCP(a.MCPServers, tool.MCPEnv{Secrets: store, Workspace: wd})
	defer m.Close()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	return tool.WithOverrides(m.Status(ctx), a.Tools), nil
}

// sayIfSlow prints line on stderr if what follows takes longer than after;
// the returned stop ends the wait, and returns once nothing more can be
// printed, so that the command's own output never interleaves with it.
func (e *env) sayIfSlow(after time.Duration, line string) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-time.After(after):
			fmt.Fprintln(e.stderr, line)
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
