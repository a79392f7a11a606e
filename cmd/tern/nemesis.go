package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/internal/flaws"
	"github.com/tern-dev/tern/nemesis"
)

func nemesisCmd(e *env) *cobra.Command {
	var (
		trials          int
		seed            uint64
		transport, flaw string
		keep, verbose   bool
		only            []string
	)
	c := &cobra.Command{
		Use:   "nemesis",
		Short: "Run three real tern nodes under network faults and check tern's promises",
		Long: `Runs three tern nodes (this binary), each in a network namespace of its own,
joined by a userspace wire over TUN devices that delays, drops, duplicates,
reorders and cuts packets from a seed, and runs trials against them: a cut
aimed at each phase of a migration, a three-node split, a source or target
stopped with SIGSTOP and woken after the others moved on, appends and offline
edits across a cut, and a home restored from a backup. Every node is asked
where the agent stands every 100 ms. It checks that two nodes never run the
agent at once, that epochs never go down, that no acknowledged append is lost
or set aside, and that the copies are the same after the heal (and how long
that took).

It prints one line per trial and, last:
  nemesis: T trials, D double runners, L lost acks, C not converged

It needs Linux, root, the ip command and /dev/net/tun. Exit 1 on any
violation; 2 on bad input or when this machine cannot run it (it says what
is missing). docs/NEMESIS.md has the rest.`,
		Example: "  sudo tern nemesis --trials 10 --seed 1\n  sudo tern nemesis --trials 8 --transport quic",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if trials < 1 {
				return &exitError{exitBadInput, fmt.Errorf("nemesis: --trials %d: want at least 1", trials)}
			}
			var transports []string
			switch transport {
			case "tcp", "quic":
				transports = []string{transport}
			case "both":
				transports = []string{"tcp", "quic"}
			default:
				return &exitError{exitBadInput, fmt.Errorf("nemesis: --transport %q: want tcp, quic or both", transport)}
			}
			for _, n := range only {
				if !slices.Contains(nemesis.Scenarios, n) {
					return &exitError{exitBadInput, fmt.Errorf("nemesis: --scenario %q: no such scenario; the scenarios are %s", n, strings.Join(nemesis.Scenarios, ", "))}
				}
			}
			var env []string
			if flaw != "" {
				f, ok := flaws.Parse(flaw)
				if !ok || f == flaws.Sound {
					return &exitError{exitBadInput, fmt.Errorf("nemesis: --flaw %q: unknown", flaw)}
				}
				if !flawsBuilt {
					return &exitError{exitBadInput, fmt.Errorf("nemesis: --flaw needs a tern built with the flaws in it: go build -tags ternflaws -o tern-flaws ./cmd/tern, then run tern-flaws nemesis --flaw %s", flaw)}
				}
				env = append(env, "TERN_FLAW="+flaw)
			}
			if err := nemesis.Available(); err != nil {
				return &exitError{exitBadInput, fmt.Errorf("nemesis: %w", err)}
			}
			tern, err := os.Executable()
			if err != nil {
				return fmt.Errorf("nemesis: where this tern binary is: %w", err)
			}
			dir, err := os.MkdirTemp("", "tern-nemesis-")
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opt := nemesis.Options{Tern: tern, Transports: transports, Trials: trials, Seed: seed, Dir: dir, Env: env, Scenarios: only, Keep: keep,
				Report: func(t nemesis.Trial) { fmt.Fprintln(e.stdout, t) }}
			if verbose {
				opt.Log = func(format string, args ...any) { fmt.Fprintf(e.stderr, format+"\n", args...) }
			}
			sum, err := nemesis.Run(ctx, opt)
			if err == nil || sum.Trials > 0 {
				fmt.Fprintln(e.stdout, sum)
			}
			failed := err != nil || sum.Found()
			if failed || keep {
				fmt.Fprintf(e.stderr, "the nodes' homes and logs are in %s\n", dir)
			} else {
				os.RemoveAll(dir)
			}
			switch {
			case errors.Is(err, nemesis.ErrUnavailable):
				return &exitError{exitBadInput, fmt.Errorf("nemesis: %w", err)}
			case err != nil:
				return fmt.Errorf("nemesis: %w", err)
			case sum.Found():
				return checkFailed("nemesis: %d of %d trials found a violation, lost an acknowledged append, did not converge or could not run; replay one with --seed SEED --trials 1 --transport T (and the same --scenario flags, if any)", sum.Failed, sum.Trials)
			}
			return ctx.Err()
		},
	}
	fl := c.Flags()
	fl.IntVar(&trials, "trials", 10, "trials per transport")
	fl.Uint64Var(&seed, "seed", 1, "the first trial's seed; trial i runs seed+i")
	fl.StringVar(&transport, "transport", "both", "tcp, quic or both (the trials run on each)")
	fl.StringArrayVar(&only, "scenario", nil, "run only this scenario (repeatable): "+strings.Join(nemesis.Scenarios, ", "))
	fl.BoolVar(&keep, "keep", false, "keep the nodes' homes and logs even when every trial passed")
	fl.BoolVarP(&verbose, "verbose", "v", false, "say what each trial does, on stderr")
	fl.StringVar(&flaw, "flaw", "", "run a deliberately broken protocol in the nodes to show the checker catches it (a tern built with -tags ternflaws only)")
	fl.MarkHidden("flaw")
	return c
}
