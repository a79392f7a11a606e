package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/node"
)

// MigrateOptions size the migration measurement.
type MigrateOptions struct {
	Options
	Events    int   // events in the journal before the first move
	Workspace int64 // bytes of the workspace, in files of at most 64 MiB
	Changed   int64 // bytes of the file rewritten (and snapshotted) just before each warm move
	Runs      int   // warm moves, back and forth
}

// MigrateResult is what Migrate measured.
type MigrateResult struct {
	Events    int   `json:"events"`
	Workspace int64 `json:"workspace_bytes"`
	Changed   int64 `json:"changed_bytes"`
	// Warm moves: the peer holds everything but the change (synced by
	// gossip and sync rounds beforehand).
	Runs     int     `json:"runs"`
	FrozenMS []int64 `json:"frozen_ms"` // each warm move, freeze to outcome
	// MedianPhases are the median duration of each phase of a warm move;
	// all but transfer fall inside the frozen window.
	MedianPhases []node.Phase `json:"median_phases"`
	// A cold move: the peer holds nothing.
	ColdBytes   int64   `json:"cold_bytes"`
	ColdSeconds float64 `json:"cold_seconds"` // start of the move to the outcome
	ColdMBps    float64 `json:"cold_mbps"`
	Libp2pMBps  float64 `json:"libp2p_mbps"` // a bare libp2p stream of the same bytes, same run
	ColdRatio   float64 `json:"cold_ratio"`  // ColdMBps / Libp2pMBps
}

// Migrate measures migrations between real nodes on 127.0.0.1: the frozen
// window of warm moves of an agent with opt.Events events and a workspace
// of opt.Workspace bytes, opt.Changed bytes of which change before each
// move, back and forth opt.Runs times; then one cold move of the same
// agent to a node that holds nothing, as a rate beside a bare libp2p
// stream of the same bytes.
func Migrate(ctx context.Context, opt MigrateOptions) (res MigrateResult, err error) {
	res = MigrateResult{Events: opt.Events, Workspace: opt.Workspace, Changed: opt.Changed, Runs: opt.Runs}
	if opt.Runs < 1 {
		return res, errNoRuns
	}
	dir, err := opt.tempDir("migrate")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	var a, b, c *node.Node
	defer func() { closeAll(&err, a, b, c) }()
	if a, err = startNode(home(dir, 0), idleInterval, opt.Options); err != nil {
		return res, err
	}
	if b, err = startNode(home(dir, 1), idleInterval, opt.Options); err != nil {
		return res, err
	}
	if err = pair(a, b); err != nil {
		return res, err
	}
	if err = connect(ctx, a, b); err != nil {
		return res, err
	}
	ws := filepath.Join(dir, "workspace")
	agent, err := agentWithWorkspace(ctx, a, dir, ws, opt)
	if err != nil {
		return res, err
	}
	b.SyncPeer(ctx, a.Host().ID()) // warm: b takes the capsule, every event and blob

	holder, other := a, b
	var phases [][]node.Phase
	for i := range opt.Runs {
		if err := change(holder, agent, ws, i, opt.Changed); err != nil {
			return res, err
		}
		out, err := holder.Migrate(ctx, agent, other.Host().ID())
		if err != nil {
			return res, err
		}
		if out.Outcome != "committed" {
			return res, fmt.Errorf("warm move %d: %s: %s", i, out.Outcome, out.Reason)
		}
		res.FrozenMS = append(res.FrozenMS, out.FrozenMS)
		phases = append(phases, out.Phases)
		holder, other = other, holder
	}
	res.MedianPhases = medianPhases(phases)

	if c, err = startNode(home(dir, 2), idleInterval, opt.Options); err != nil {
		return res, err
	}
	if err = pair(holder, c); err != nil {
		return res, err
	}
	if err = connect(ctx, holder, c); err != nil {
		return res, err
	}
	start := time.Now()
	out, err := holder.Migrate(ctx, agent, c.Host().ID())
	if err != nil {
		return res, err
	}
	if out.Outcome != "committed" {
		return res, fmt.Errorf("cold move: %s: %s", out.Outcome, out.Reason)
	}
	res.ColdSeconds = time.Since(start).Seconds()
	res.ColdBytes = out.Bytes
	res.ColdMBps = rate(out.Bytes, time.Since(start))
	data := make([]byte, min(out.Bytes, 256<<20))
	rand.Read(data)
	if res.Libp2pMBps, err = libp2pRate(ctx, data, opt.listen()); err != nil {
		return res, err
	}
	res.ColdRatio = res.ColdMBps / res.Libp2pMBps
	return res, nil
}

// agentWithWorkspace makes an agent held by n with opt.Events events and a
// workspace of opt.Workspace bytes at ws, snapshotted, and returns its id.
func agentWithWorkspace(ctx context.Context, n *node.Node, dir, ws string, opt MigrateOptions) (string, error) {
	src := filepath.Join(dir, "agent")
	id, err := newCapsule(src, "mover", n.Identity())
	if err != nil {
		return "", err
	}
	if _, _, err := n.Import(src); err != nil {
		return "", err
	}
	if err := poll(ctx, 10*time.Millisecond, func() (bool, error) {
		rep, err := n.Holder(ctx, id)
		return err == nil && rep.State == "active", err
	}); err != nil {
		return "", err
	}
	if err := appendMessages(ctx, n, id, opt.Events, false); err != nil {
		return "", err
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", err
	}
	const piece = 64 << 20
	buf := make([]byte, min(piece, opt.Workspace))
	for i, left := 0, opt.Workspace; left > 0; i++ {
		k := min(int64(len(buf)), left)
		rand.Read(buf[:k])
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("file%03d.bin", i)), buf[:k], 0o644); err != nil {
			return "", err
		}
		left -= k
	}
	return id, snapshot(n, id, ws)
}

// change rewrites the changed file of ws and snapshots it on the holder.
func change(n *node.Node, agent, ws string, i int, size int64) error {
	b := make([]byte, size)
	rand.Read(b)
	if err := os.WriteFile(filepath.Join(ws, "changed.bin"), b, 0o644); err != nil {
		return err
	}
	return snapshot(n, agent, ws)
}

func snapshot(n *node.Node, agent, ws string) error {
	return n.Store().With(agent, func(d *capsule.Dir) error {
		_, err := d.Snapshot(context.Background(), n.Identity(), ws)
		return err
	})
}

// medianPhases returns, for each phase name in the order of the first run,
// the median of its durations over the runs.
func medianPhases(runs [][]node.Phase) []node.Phase {
	if len(runs) == 0 {
		return nil
	}
	var out []node.Phase
	for _, p := range runs[0] {
		var ms []int64
		for _, r := range runs {
			for _, q := range r {
				if q.Name == p.Name {
					ms = append(ms, q.MS)
				}
			}
		}
		slices.Sort(ms)
		out = append(out, node.Phase{Name: p.Name, MS: ms[len(ms)/2]})
	}
	return out
}

// errNoRuns is returned for a measurement asked to make no moves.
var errNoRuns = errors.New("bench migrate: at least one run")
