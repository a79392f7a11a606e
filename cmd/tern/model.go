package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/provider"
)

func modelCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "model", Short: "Check the model an agent talks to", Args: groupArgs, RunE: showHelp}
	var asJSON bool
	test := &cobra.Command{
		Use:     "test AGENT|DIR [--json]",
		Example: "  tern model test ./agent\n  tern model test $AGENT --json",
		Short:   "Send the agent's model one tiny request and show its reply, latency and usage",
		Long: "Sends one tiny request (\"" + provider.ProbeMessage + "\", no instructions, no tools) with the agent's\n" +
			"settings (agent.json: provider, model, base_url, and the key from the secret key_secret\n" +
			"names). Given an agent id, the node that holds the agent sends it, with the node's\n" +
			"secrets; given a capsule folder or tar, this process does, with this user's secrets,\n" +
			"and with agent.json as it stands, so an edit can be tried before 'tern capsule accept'.\n" +
			"Prints the reply, the time to the first delta and the token usage; --json prints\n" +
			"{\"reply\", \"first_delta_ms\", \"usage\"}. When the model cannot answer (a refused key, a\n" +
			"secret that is missing or locked, no connection, a rate limit, a server error, even\n" +
			"after retries) it prints one line on stderr and exits 1; a bad argument or agent.json\n" +
			"exits 2.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := probe(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(p)
			}
			fmt.Fprintf(e.stdout, "reply        %s\nfirst delta  %.1f ms\nusage        %d tokens in, %d out\n",
				p.Reply, p.FirstDeltaMS, p.Usage.InputTokens, p.Usage.OutputTokens)
			return nil
		},
	}
	test.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	c.AddCommand(test)
	return c
}

// probe runs the model test of a capsule folder here, or of an agent id
// through the node.
func probe(ctx context.Context, e *env, arg string) (provider.Probe, error) {
	if _, err := os.Stat(arg); err == nil {
		c, err := capsule.Open(arg)
		if err != nil {
			return provider.Probe{}, err
		}
		defer c.Close()
		ours, err := e.ours()
		if err != nil {
			return provider.Probe{}, err
		}
		agent, err := c.TrustedAgent(arg, ours)
		if err != nil {
			return provider.Probe{}, err
		}
		store, err := openSecrets(e)
		if err != nil {
			return provider.Probe{}, err
		}
		s, err := provider.SettingsFor(agent, store)
		if err != nil {
			return provider.Probe{}, checkFailed("model test %s: %v", arg, err)
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		p, err := provider.RunProbe(ctx, s, provider.Options{Retrying: func(pe *provider.Error, wait time.Duration) {
			fmt.Fprintf(e.stderr, "%s; trying again in %v\n", pe.Message, wait.Round(100*time.Millisecond))
		}})
		var perr *provider.Error
		switch {
		case errors.As(err, &perr) && (errors.Is(err, provider.ErrUnavailable) || errors.Is(err, provider.ErrRateLimited)):
			return p, &exitError{code: exitFailed, err: fmt.Errorf("model test %s: %w", arg, err)} // trying again may work
		case err != nil:
			return p, checkFailed("model test %s: %v", arg, err)
		}
		return p, nil
	}
	if !capsule.ValidAgentID(arg) {
		return provider.Probe{}, fmt.Errorf("model test: %q is neither a capsule folder or tar nor an agent id", arg)
	}
	cl, err := e.client()
	if err != nil {
		return provider.Probe{}, err
	}
	var p provider.Probe
	err = cl.Do(ctx, http.MethodPost, "/v1/capsules/"+url.PathEscape(arg)+"/model/test", nil, &p)
	var aerr *api.APIError
	if errors.As(err, &aerr) && (aerr.Status == http.StatusBadGateway || aerr.Status == http.StatusUnprocessableEntity) {
		return p, checkFailed("model test %s: %s", arg, aerr.Message)
	}
	return p, err
}
