package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/bench"
)

func benchCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "bench", Short: "Measure tern against the limits under it, on this machine", Args: groupArgs, RunE: showHelp}
	c.AddCommand(benchSyncCmd(e), benchMigrateCmd(e))
	return c
}

func benchMigrateCmd(e *env) *cobra.Command {
	var (
		workspace, changed, dir, transport string
		events, runs                       int
		asJSON                             bool
	)
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Measure migrations on loopback: the frozen window of warm moves, and a cold move's rate",
		Long: `Run real nodes on 127.0.0.1 in this process: an agent with --events events and a
workspace of --workspace bytes moves back and forth --runs times between two nodes that
hold it already (warm), --changed bytes of it rewritten and snapshotted just before each
move; then once to a node that holds nothing (cold). It prints the frozen window of the
warm moves (min, median, max; goal: median under 100 ms) with the median of each phase,
and the cold move's rate beside a bare libp2p stream of the same bytes in the same run.
--transport tcp,quic runs it all on each transport in turn, one after the other, and
prints them side by side.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := parseSize(workspace)
			if err != nil {
				return fmt.Errorf("bench migrate: --workspace: %w", err)
			}
			ch, err := parseSize(changed)
			if err != nil {
				return fmt.Errorf("bench migrate: --changed: %w", err)
			}
			switch {
			case events < 0 || events > maxBenchEvents:
				return fmt.Errorf("bench migrate: --events %d: want 0 to %d", events, maxBenchEvents)
			case runs < 1 || runs > 1000:
				return fmt.Errorf("bench migrate: --runs %d: want 1 to 1000", runs)
			case ws < 1 || ws > bench.MaxBlobSize:
				return fmt.Errorf("bench migrate: --workspace %s: want 1 B to %s", workspace, formatBytes(bench.MaxBlobSize))
			case ch < 1 || ch > ws:
				return fmt.Errorf("bench migrate: --changed %s: want 1 B up to the workspace", changed)
			}
			transports, err := parseTransports(transport)
			if err != nil {
				return fmt.Errorf("bench migrate: --transport: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			results := map[string]bench.MigrateResult{}
			for _, tr := range transports {
				fmt.Fprintf(e.stderr, "bench migrate over %s…\n", tr)
				r, err := bench.Migrate(ctx, bench.MigrateOptions{Options: bench.Options{Dir: dir, Transport: tr},
					Events: events, Workspace: ws, Changed: ch, Runs: runs})
				if err != nil {
					return checkFailed("%s: %v", tr, err)
				}
				results[tr] = r
			}
			if asJSON {
				if len(transports) == 1 {
					return json.NewEncoder(e.stdout).Encode(results[transports[0]])
				}
				return json.NewEncoder(e.stdout).Encode(results)
			}
			w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			for _, tr := range transports {
				r := results[tr]
				f := slices.Clone(r.FrozenMS)
				slices.Sort(f)
				if len(transports) > 1 {
					fmt.Fprintf(w, "over %s\n", tr)
				}
				fmt.Fprintf(w, "agent\t%d events, a workspace of %s, %s changed before each warm move\n", r.Events, formatBytes(r.Workspace), formatBytes(r.Changed))
				fmt.Fprintf(w, "frozen window, warm\t%d / %d / %d ms (min / median / max of %d; goal: median < 100 ms)\n", f[0], f[len(f)/2], f[len(f)-1], len(f))
				for _, p := range r.MedianPhases {
					fmt.Fprintf(w, "  %s\t%d ms (median)\n", p.Name, p.MS)
				}
				fmt.Fprintf(w, "cold move\t%s in %.2f s: %.0f MB/s, %.2f of a bare libp2p stream on %s (%.0f MB/s)\n", formatBytes(r.ColdBytes), r.ColdSeconds, r.ColdMBps, r.ColdRatio, tr, r.Libp2pMBps)
			}
			return w.Flush()
		},
	}
	fl := c.Flags()
	fl.IntVar(&events, "events", 10_000, "events in the agent's journal")
	fl.StringVar(&workspace, "workspace", "1GiB", "size of the workspace")
	fl.StringVar(&changed, "changed", "1MiB", "bytes rewritten before each warm move")
	fl.IntVar(&runs, "runs", 20, "warm moves")
	fl.StringVar(&transport, "transport", "tcp", "what the nodes listen on: tcp, quic, or tcp,quic for both in turn")
	fl.StringVar(&dir, "dir", "", "folder for the nodes' temporary homes (default: the system's temporary folder)")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}

// benchParts are the measurements of tern bench sync, in the order they run.
var benchParts = []string{"blob", "catchup", "partition", "memory", "latency", "appends"}

// maxBenchNodes bounds --nodes: each node is a libp2p host with its own
// listener in this process.
const maxBenchNodes = 32

// maxBenchEvents bounds --events.
const maxBenchEvents = 10_000_000

// benchReport is what tern bench sync --json prints: the machine, then one
// object per measurement that ran.
type benchReport struct {
	Time       string                 `json:"time"`
	GoVersion  string                 `json:"go_version"`
	CPUs       int                    `json:"cpus"`
	GOMAXPROCS int                    `json:"gomaxprocs"`
	Blob       *bench.BlobResult      `json:"blob,omitempty"`
	CatchUp    *bench.CatchUpResult   `json:"catchup,omitempty"`
	Partition  *bench.PartitionResult `json:"partition,omitempty"`
	Memory     *bench.MemoryResult    `json:"memory,omitempty"`
	Latency    *bench.LatencyResult   `json:"latency,omitempty"`
	Appends    *bench.AppendsResult   `json:"appends,omitempty"`
}

func benchSyncCmd(e *env) *cobra.Command {
	var (
		blobSize, only, dir, transport string
		events, nodes, capsules        int
		asJSON                         bool
	)
	c := &cobra.Command{
		Use:   "sync",
		Short: "Measure node sync on loopback: blob throughput, catch-up, partition healing, idle memory",
		Long: `Run real nodes on 127.0.0.1 in this process and measure, one after another:

  blob       one blob fetched end to end (hash-checked, written, fsynced,
             adopted) against a bare libp2p stream and a disk write with one
             fsync of the same bytes, as a ratio to the slower (goal >= 0.8)
             then a new capsule holding it as a workspace file: from its
             import on one node until the other holds it all (the same
             ratio); the same from the file in its folder, its snapshot
             included (as Syncthing is timed: from the move into its
             folder); and the import itself (a store of its own, no peer to
             push to) against cp -r + sync
  catchup    a node that was offline catching up on --events events: time,
             and bytes on the wire against the events' size (goal <= 1.1)
  partition  --nodes nodes converging after a partition into two halves heals
  memory     the idle memory of a node holding --capsules capsules
  latency    an event appended on one node until the other stored it, idle
             (goal p99 < 10 ms) and while the other takes a first copy of a
             capsule holding a --blob-size file (goal p99 < 50 ms)
  appends    8 writers in this process appending to one node's capsule,
             each one event at a time, waiting until it is durable, against
             the floor of that load measured in the same folder: 8
             signatures one after another and one fsync per 8 events (no
             goal of its own; the comparison with SQLite is go test -bench)

Nothing is judged: the goals are printed beside the figures. Temporary
folders go under --dir (default: the system's temporary folder; the disk
limit is measured there). Exit 1 if a measurement could not complete.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			size, err := parseSize(blobSize)
			if err != nil {
				return fmt.Errorf("bench sync: --blob-size: %w", err)
			}
			parts, err := parseParts(only)
			if err != nil {
				return fmt.Errorf("bench sync: --only: %w", err)
			}
			switch {
			case size < 1 || size > bench.MaxBlobSize:
				return fmt.Errorf("bench sync: --blob-size %s: want 1 B to %s", blobSize, formatBytes(bench.MaxBlobSize))
			case events < 1 || events > maxBenchEvents:
				return fmt.Errorf("bench sync: --events %d: want 1 to %d", events, maxBenchEvents)
			case nodes < 2 || nodes > maxBenchNodes:
				return fmt.Errorf("bench sync: --nodes %d: want 2 to %d", nodes, maxBenchNodes)
			case capsules < 1 || capsules > bench.MaxCapsules:
				return fmt.Errorf("bench sync: --capsules %d: want 1 to %d", capsules, bench.MaxCapsules)
			}
			if dir != "" {
				switch st, err := os.Stat(dir); {
				case errors.Is(err, fs.ErrNotExist):
					return fmt.Errorf("bench sync: --dir %s: no such folder (create it first)", dir)
				case err != nil:
					return fmt.Errorf("bench sync: --dir: %w", err)
				case !st.IsDir():
					return fmt.Errorf("bench sync: --dir %s: not a folder", dir)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep := benchReport{Time: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(),
				CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
			if !slices.Contains(bench.Transports, transport) {
				return fmt.Errorf("bench sync: --transport %q: want %s", transport, strings.Join(bench.Transports, " or "))
			}
			opt := bench.Options{Dir: dir, Transport: transport}
			err = runBench(ctx, e, parts, func(part string) error {
				switch part {
				case "blob":
					r, err := bench.Blob(ctx, size, opt)
					rep.Blob = &r
					return err
				case "catchup":
					r, err := bench.CatchUp(ctx, events, opt)
					rep.CatchUp = &r
					return err
				case "partition":
					r, err := bench.Partition(ctx, nodes, opt)
					rep.Partition = &r
					return err
				case "memory":
					r, err := bench.IdleMemory(ctx, capsules, opt)
					rep.Memory = &r
					return err
				case "latency":
					r, err := bench.Latency(ctx, size, opt)
					rep.Latency = &r
					return err
				default:
					r, err := bench.Appends(ctx, opt)
					rep.Appends = &r
					return err
				}
			})
			if err != nil {
				return checkFailed("%v", err)
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(rep)
			}
			printBench(e.stdout, rep)
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&blobSize, "blob-size", "256MiB", "size of the blob: bytes, or a number with B, kB, MB, GB, KiB, MiB or GiB")
	fl.IntVar(&events, "events", 100_000, "events the offline node catches up on")
	fl.IntVar(&nodes, "nodes", 8, fmt.Sprintf("nodes of the partition (2 to %d)", maxBenchNodes))
	fl.IntVar(&capsules, "capsules", 1000, "capsules the idle node holds")
	fl.StringVar(&transport, "transport", "tcp", "what the nodes, and the bare libp2p stream they are measured against, listen on: tcp or quic")
	fl.StringVar(&only, "only", strings.Join(benchParts, ","), "comma-separated measurements to run: "+strings.Join(benchParts, ", "))
	fl.StringVar(&dir, "dir", "", "folder for the nodes' temporary homes (default: the system's temporary folder)")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}

// parseTransports reads --transport: a comma-separated list of
// bench.Transports.
func parseTransports(s string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if !slices.Contains(bench.Transports, t) {
			return nil, fmt.Errorf("%q is not a transport (want %s)", t, strings.Join(bench.Transports, " or "))
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// runBench runs each part in benchParts order, telling stderr which, and
// stops at the first error.
func runBench(ctx context.Context, e *env, parts []string, run func(string) error) error {
	for _, p := range benchParts {
		if !slices.Contains(parts, p) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "bench sync: %s…\n", p)
		if err := run(p); err != nil {
			return err
		}
	}
	return nil
}

// parseParts reads --only: a comma-separated subset of benchParts.
func parseParts(s string) ([]string, error) {
	var parts []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(benchParts, p) {
			return nil, fmt.Errorf("%q is not a measurement (want some of %s)", p, strings.Join(benchParts, ", "))
		}
		if !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	return parts, nil
}

// sizeUnits are the units parseSize reads, longest suffix first.
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"kB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}

// parseSize reads a byte count: a whole number, alone or followed by one
// of sizeUnits ("256MiB", "1 GB", "4096").
func parseSize(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size (write it like 256MiB, 1GB or 4096)", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

// formatBytes writes n in the largest binary unit that keeps it at least 1.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// printBench prints the report as a table: measurement, figure, value.
func printBench(w io.Writer, r benchReport) {
	fmt.Fprintf(w, "tern bench sync: %s, %s, %d CPUs (GOMAXPROCS %d)\n", r.Time, r.GoVersion, r.CPUs, r.GOMAXPROCS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(part, figure, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", part, figure, fmt.Sprintf(format, args...))
	}
	if b := r.Blob; b != nil {
		row("blob", "size", "%s", formatBytes(b.Bytes))
		row("blob", "end to end", "%.0f MB/s (%.2f s, %s received)", b.EndToEnd, b.EndToEndSeconds, formatBytes(b.BytesReceived))
		row("blob", "bare libp2p stream", "%.0f MB/s (%s)", b.Libp2p, b.Transport)
		row("blob", "disk write, one fsync", "%.0f MB/s", b.Disk)
		row("blob", "sha256, one core", "%.0f MB/s", b.SHA256)
		row("blob", "ratio to the slower limit", "%.2f (%s; goal >= 0.8)", b.Ratio, b.Limit)
		row("blob", "a new capsule of it, import to held", "%.2f s: %.2f of the slower limit (goal >= 0.8), %.2f of the bare %s stream", b.FirstCopySeconds, b.FirstCopyRatio, b.FirstCopyOfLibp2p, b.Transport)
		row("blob", "the same from the file in its folder", "%.2f s: snapshot %.2f s, then import to held (as Syncthing is timed: from the move into its folder)", b.FromFolderSeconds, b.SnapshotSeconds)
		row("blob", "the same in one pass through node A", "%.2f s: a new agent imported empty, the folder snapshotted into it through the node (%.2f s), until B holds it", b.ThroughNodeSeconds, b.ThroughNodeSnapshotSeconds)
		row("blob", "import of that capsule folder", "%.2f s against cp -r + sync %.2f s: %.2f (goal >= 0.8); blobs copied by %s", b.ImportSeconds, b.CopySeconds, b.ImportRatio, b.ImportCopy)
	}
	if c := r.CatchUp; c != nil {
		row("catchup", "events missing", "%d (%s)", c.Events, formatBytes(c.EventBytes))
		row("catchup", "time to catch up", "%.2f s (%.0f events/s)", c.Seconds, float64(c.Events)/c.Seconds)
		row("catchup", "their signatures, every core", "%.2f s: catch-up takes %.2f× (goal <= 1.5)", c.VerifySeconds, c.VerifyRatio)
		row("catchup", "bytes on the wire", "%s (%.2f× the events; goal <= 1.1)", formatBytes(c.WireBytes), c.Ratio)
		row("catchup", "sync frame bytes", "%s", formatBytes(c.FrameBytes))
		row("catchup", "events sent", "%d (%.2f× the missing, %d exchanges)", c.EventsSent, float64(c.EventsSent)/float64(c.Events), c.Exchanges)
	}
	if p := r.Partition; p != nil {
		row("partition", "nodes", "%d, %d events each while apart", p.Nodes, p.Events/p.Nodes)
		row("partition", "convergence after the heal", "%.3f s", p.Seconds)
		row("partition", "events sent", "%d (%.2f× the %d missing, %d exchanges)", p.EventsSent, float64(p.EventsSent)/float64(p.Missing), p.Missing, p.Exchanges)
	}
	if m := r.Memory; m != nil {
		row("memory", "capsules", "%d (%d events, %s)", m.Capsules, m.Events, formatBytes(m.EventBytes))
		row("memory", "idle after start", "%s heap, %d goroutines, %d open files", formatBytes(m.Started.HeapBytes), m.Started.Goroutines, m.Started.OpenFiles)
		row("memory", "idle after a sync round", "%s heap (%s a capsule), %d goroutines, %d open files",
			formatBytes(m.Synced.HeapBytes), formatBytes(m.Synced.HeapBytes/int64(m.Capsules)), m.Synced.Goroutines, m.Synced.OpenFiles)
		row("memory", "idle, capsules closed", "%s heap (%s a capsule), %d goroutines, %d open files",
			formatBytes(m.Closed.HeapBytes), formatBytes(m.Closed.HeapBytes/int64(m.Capsules)), m.Closed.Goroutines, m.Closed.OpenFiles)
		row("memory", "a sync round, nothing to move", "%.2f s for %d capsules", m.RoundSeconds, m.Capsules)
		row("memory", "status, capsules closed", "%.1f ms, %d capsules opened (goal: none)", m.StatusSeconds*1000, m.StatusOpened)
		row("memory", "a round with a peer holding them alike", "%.1f ms, %.0f exchanges (goal < 100 ms)", m.AlikeRoundSeconds*1000, m.AlikeExchanges)
	}
	if l := r.Latency; l != nil {
		row("latency", "appended to stored, idle", "p50 %.1f ms, p99 %.1f ms over %d events (goal p99 < 10 ms)", l.IdleP50, l.IdleP99, l.IdleEvents)
		row("latency", "during a first copy", "p50 %.1f ms, p99 %.1f ms over %d events, while %s took %.2f s (goal p99 < 50 ms)",
			l.LoadP50, l.LoadP99, l.LoadEvents, formatBytes(l.BlobBytes), l.BlobSeconds)
	}
	if a := r.Appends; a != nil {
		row("appends", "durable, through a node", "%.0f events/s: %d writers in this process, each appending one event and waiting until it is durable (%d events)",
			a.EventsPerSec, a.Writers, a.Events)
		row("appends", "the floor of that load", "%.0f events/s: per %d events, %d signatures one after another (%.0f µs each) and one write and fsync (%.0f µs); appends reach %.2f of it",
			a.FloorPerSec, a.Writers, a.Writers, a.SignMicros, a.SyncMicros, a.Ratio)
	}
	tw.Flush()
}
