package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/flaws"
	"github.com/tern-dev/tern/simnet"
	"github.com/tern-dev/tern/simnet/bubble"
	"github.com/tern-dev/tern/simnet/nodesim"
)

// simnetReport is what tern simnet --json prints. The first fields are
// pinned; scripts may rely on them.
type simnetReport struct {
	Seeds          int            `json:"seeds"`
	Steps          int64          `json:"steps"`
	Violations     int            `json:"violations"`
	Coverage       map[string]int `json:"coverage"`
	SeedsPerSecond float64        `json:"seeds_per_second"`

	StepsPerSecond   float64         `json:"steps_per_second"`
	FirstSeed        uint64          `json:"first_seed"`
	Nodes            int             `json:"nodes"`
	Migrations       int             `json:"migrations_per_seed"`
	Faults           string          `json:"faults"`
	Layer            string          `json:"layer"`
	TraceHash        string          `json:"trace_hash,omitempty"` // the same seeds give the same hash (not on the libp2p layer, which runs in real time)
	Flaw             string          `json:"flaw,omitempty"`
	Workers          int             `json:"workers"`
	ElapsedSeconds   float64         `json:"elapsed_seconds"`
	Started          int64           `json:"migrations_started"`
	Operator         int64           `json:"operator_overrides"`
	CoverageEnforced bool            `json:"coverage_enforced"`
	Uncovered        []string        `json:"uncovered"`
	Failures         []simnetFailure `json:"failures"`
	// Sync is what the model's sync layer did (the model layer only).
	Sync *simnet.SyncCounts `json:"sync,omitempty"`
}

type simnetFailure struct {
	Seed      uint64 `json:"seed"`
	Violation string `json:"violation"`
	Settings  string `json:"settings"`
	Replay    string `json:"replay"`
}

func simnetCmd(e *env) *cobra.Command {
	var (
		seeds, nodes, migrations, workers int
		seed                              uint64
		faults, flaw, layer               string
		asJSON, trace                     bool
	)
	c := &cobra.Command{
		Use:   "simnet",
		Short: "Simulate migrations under faults with the real fencing code and check the invariant",
		Long: `Simulate nodes that migrate an agent back and forth while the network drops,
duplicates, reorders, delays, partitions and replays messages and corrupts
transfers, and nodes crash, lose their registry, or pause and wake up stale.
A checker runs after every step. A failing seed prints the command that
replays it step by step. On the model layer each node also runs the sync
policy and holds a copy of the agent's events; once the faults end and the
rounds go quiet, every copy must be the same.

--layer picks what runs:
  model   the fencing and sync policy machines on a simulated network
          (thousands of seeds a second)
  node    real nodes (stores, registries, sync, gossip, blob transfer,
          migration) on an in-memory network, one message at a time; the
          same seed replays exactly
  libp2p  real nodes on go-libp2p's mocknet, in real time; a failing seed
          is a lead, not a replay

Exit 1 on any violation, or if a batch of at least ` + fmt.Sprint(simnet.MinCoverageSeeds) + ` seeds with every
fault never saw one of the outcomes:
` + outcomeNames() + ` (model),
` + outcomeNamesOf(nodesim.NodeOutcomes) + ` (node, libp2p).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := simnet.ParseFaults(faults)
			if err != nil {
				return fmt.Errorf("simnet: --faults: %w", err)
			}
			if layer != "model" && layer != "node" && layer != "libp2p" {
				return fmt.Errorf("simnet: --layer %q: want model, node or libp2p", layer)
			}
			if layer != "model" && !cmd.Flags().Changed("migrations") {
				migrations = nodesim.NodeMigrations
			}
			opt := simnet.Options{Nodes: nodes, Migrations: migrations, Faults: f}
			if flaw != "" {
				fl, ok := flaws.Parse(flaw)
				if !ok {
					return fmt.Errorf("simnet: --flaw %q: unknown", flaw)
				}
				if fl.InSyncPolicy() && layer != "model" {
					// The node runs the policy, flaw and all, but its gossip
					// and the rounds each connection starts repair what the
					// flaw breaks: 300 seeds of the node layer find nothing.
					return fmt.Errorf("simnet: --flaw %s: only the model layer's sync check is shown to catch it (on the node layer gossip repairs what it breaks)", flaw)
				}
				opt.Flaw = fl
			}
			if err := opt.Check(); err != nil {
				return fmt.Errorf("simnet: --%w", err)
			}
			if !cmd.Flags().Changed("seeds") && cmd.Flags().Changed("seed") {
				seeds = 1 // --seed alone replays one seed
			}
			if seeds < 1 {
				return fmt.Errorf("simnet: --seeds %d: want at least 1", seeds)
			}
			if trace {
				if seeds != 1 {
					return fmt.Errorf("simnet: --trace replays one seed; drop --seeds or set it to 1")
				}
				opt.Trace = e.stdout
			}
			if workers <= 0 {
				workers = runtime.GOMAXPROCS(0)
			}
			workers = min(workers, seeds)
			b := simnetBatch{e: e, layer: layer, opt: opt, first: seed, seeds: seeds, workers: workers, asJSON: asJSON}
			switch layer {
			case "node":
				// The node layer runs in synctest bubbles, which only the
				// testing package makes: the process ends in there.
				bubble.Exit(func(in bubble.In) int {
					err := b.report(func() simnet.Summary { return nodesim.RunNodeLayer(seed, seeds, opt, workers, in) })
					if err == nil {
						return exitOK
					}
					fmt.Fprintln(e.stderr, "tern:", err)
					return exitCode(err)
				})
			case "libp2p":
				return b.report(func() simnet.Summary { return nodesim.RunLibp2pLayer(seed, seeds, opt, workers) })
			}
			return b.report(func() simnet.Summary { return simnet.RunBatch(seed, seeds, opt, workers) })
		},
	}
	fl := c.Flags()
	fl.IntVar(&seeds, "seeds", 1000, "number of seeds to run")
	fl.Uint64Var(&seed, "seed", 1, "first seed; alone, replays that one seed")
	fl.IntVar(&nodes, "nodes", 3, fmt.Sprintf("nodes per run (2 to %d)", simnet.MaxNodes))
	fl.IntVar(&migrations, "migrations", 20, fmt.Sprintf("migration commands per run (default %d on the node and libp2p layers)", nodesim.NodeMigrations))
	fl.StringVar(&layer, "layer", "model", "what runs: model (the fencing machines on a simulated network), node (real nodes on an in-memory network, deterministic) or libp2p (real nodes on go-libp2p's mocknet, in real time)")
	fl.StringVar(&faults, "faults", "all", "comma-separated faults to inject: "+strings.Join(simnet.FaultNames(), ",")+", all or none")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	fl.BoolVar(&trace, "trace", false, "print every step of the one seed run")
	fl.IntVar(&workers, "workers", 0, "parallel runs (default: one per core)")
	fl.StringVar(&flaw, "flaw", "", "run a deliberately broken protocol to show the checker catches it: query-without-fence, query-held-epoch, retire-without-compare, resume-on-silence, follower-skips (model layer only)")
	fl.MarkHidden("flaw")
	return c
}

// simnetBatch is one tern simnet: which layer, what it runs, how it
// reports.
type simnetBatch struct {
	e              *env
	layer          string
	opt            simnet.Options
	first          uint64
	seeds, workers int
	asJSON         bool
}

// report runs the batch and prints what it found; it fails on a violation
// or an outcome a big batch never saw.
func (b simnetBatch) report(run func() simnet.Summary) error {
	start := time.Now()
	s := run()
	rep := report(s, b.opt, b.layer, b.first, b.workers, time.Since(start).Seconds())
	if b.asJSON {
		if err := json.NewEncoder(b.e.stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		printReport(b.e, rep)
	}
	switch {
	case s.Violations > 0:
		return checkFailed("simnet: %d of %d seeds violated the invariant (first: seed %d)", s.Violations, s.Seeds, s.Failures[0].Seed)
	case len(rep.Uncovered) > 0:
		return checkFailed("simnet: outcomes never seen in %d seeds: %s", s.Seeds, strings.Join(rep.Uncovered, ", "))
	}
	return nil
}

// outcomes are the outcomes a big batch of layer must see.
func outcomes(layer string) []fencing.EventKind {
	if layer == "model" {
		return simnet.Outcomes
	}
	return nodesim.NodeOutcomes
}

func outcomeNames() string { return outcomeNamesOf(simnet.Outcomes) }

func outcomeNamesOf(outcomes []fencing.EventKind) string {
	var names []string
	for _, k := range outcomes {
		names = append(names, k.String())
	}
	return strings.Join(names, ", ")
}

func report(s simnet.Summary, opt simnet.Options, layer string, first uint64, workers int, elapsed float64) simnetReport {
	def := simnet.DefaultOptions()
	if opt.Nodes == 0 {
		opt.Nodes = def.Nodes
	}
	if opt.Migrations == 0 {
		opt.Migrations = def.Migrations
	}
	rep := simnetReport{
		Seeds: s.Seeds, Steps: s.Steps, Violations: s.Violations, Coverage: map[string]int{}, Layer: layer,
		FirstSeed: first, Nodes: opt.Nodes, Migrations: opt.Migrations, Faults: opt.Faults.String(),
		Workers: workers, ElapsedSeconds: elapsed, Started: s.Migrations, Operator: s.Operator,
		CoverageEnforced: s.Seeds >= simnet.MinCoverageSeeds && opt.Faults == simnet.AllFaults,
		Uncovered:        s.Uncovered(opt, outcomes(layer)), Failures: []simnetFailure{},
	}
	if rep.Uncovered == nil {
		rep.Uncovered = []string{}
	}
	if s.TraceHash != 0 {
		rep.TraceHash = fmt.Sprintf("%016x", s.TraceHash)
	}
	if opt.Flaw != flaws.Sound {
		rep.Flaw = opt.Flaw.String()
	}
	if elapsed > 0 {
		rep.SeedsPerSecond = float64(s.Seeds) / elapsed
		rep.StepsPerSecond = float64(s.Steps) / elapsed
	}
	for _, k := range simnet.Outcomes {
		rep.Coverage[k.String()] = s.Coverage[k]
	}
	if layer == "model" {
		rep.Sync = &s.Sync
	}
	for _, f := range s.Failures {
		replay := simnet.ReplayCommand(f.Seed, opt)
		if layer != "model" {
			replay = strings.Replace(replay, "tern simnet", "tern simnet --layer "+layer, 1)
		}
		rep.Failures = append(rep.Failures, simnetFailure{Seed: f.Seed, Violation: f.Violation,
			Settings: f.Settings.String(), Replay: replay})
	}
	return rep
}

func printReport(e *env, r simnetReport) {
	w := e.stdout
	last := r.FirstSeed + uint64(r.Seeds) - 1
	fmt.Fprintf(w, "simnet: %s layer, seeds %d..%d, %d nodes, %d migrations each, faults %s", r.Layer, r.FirstSeed, last, r.Nodes, r.Migrations, r.Faults)
	if r.Flaw != "" {
		fmt.Fprintf(w, ", flaw %s", r.Flaw)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "runs        %d (%d migrations started, %d operator overrides)\n", r.Seeds, r.Started, r.Operator)
	fmt.Fprintf(w, "steps       %d\n", r.Steps)
	fmt.Fprintf(w, "violations  %d\n", r.Violations)
	fmt.Fprintf(w, "coverage   ")
	for _, k := range simnet.Outcomes {
		fmt.Fprintf(w, " %s=%d", k, r.Coverage[k.String()])
	}
	fmt.Fprintln(w)
	if !r.CoverageEnforced {
		fmt.Fprintf(w, "            (not enforced: it is, for %d seeds or more with every fault)\n", simnet.MinCoverageSeeds)
	}
	if c := r.Sync; c != nil {
		fmt.Fprintf(w, "sync        %d rounds, %d exchanges, %d skipped as held, %d left to the peer, %d lists alike, %d streams broken, %d of %d dials failed\n",
			c.Rounds, c.Exchanges, c.SkippedHeld, c.SkippedResponding, c.Alike, c.Broken, c.FailedDials, c.Dials)
	}
	fmt.Fprintf(w, "speed       %.0f seeds/s, %.0f steps/s (%d workers, %.2fs)\n", r.SeedsPerSecond, r.StepsPerSecond, r.Workers, r.ElapsedSeconds)
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAIL seed %d: %s\n  faults: %s\n  replay: %s\n", f.Seed, f.Violation, f.Settings, f.Replay)
	}
	if n := r.Violations - len(r.Failures); n > 0 {
		fmt.Fprintf(w, "… and %d more failing seeds\n", n)
	}
}
