package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/node"
)

// What a person does with two machines works the same over TCP and over
// QUIC (libp2p's choice between two machines, and the default path on a
// LAN): a first copy with its blobs, tern holder with the peer's answer,
// and moves there and back, each committed. Over QUIC, every answered
// request used to fail some of the time with "close called for canceled
// stream", and moves aborted.
func TestACopyAndMovesThroughTheCLIOverTCPAndQUIC(t *testing.T) {
	onBothTransports(t, func(t *testing.T, ds [2]*daemon) {
		dir := filepath.Join(t.TempDir(), "agent")
		code, out, errs := ternQuiet(ds[0].home, "capsule", "new", dir, "--name", "mover")
		if code != 0 {
			t.Fatal(errs)
		}
		agent := strings.TrimSpace(out)
		ws := t.TempDir() // files over the 1 MiB a first copy's tar carries: they come as blobs
		big := make([]byte, 3<<20)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range big {
			big[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(ws, "big.bin"), big, 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, errs := ternQuiet(ds[0].home, "capsule", "snapshot", dir, ws); code != 0 {
			t.Fatal(errs)
		}
		if code, _, errs := ternQuiet(ds[0].home, "capsule", "import", dir); code != 0 {
			t.Fatalf("import: %s", errs)
		}
		if code, _, errs := ternQuiet(ds[0].home, "sync", "wait", agent, "--peer", "n1", "--timeout", "60s"); code != 0 {
			t.Fatalf("sync wait: %s", errs)
		}
		if !ds[1].holdsWhole(agent) {
			t.Fatal("n1 does not hold the whole capsule after sync wait")
		}
		holder := func(d *daemon) api.HolderReport {
			t.Helper()
			code, out, errs := ternQuiet(d.home, "holder", agent, "--json")
			if code != 0 {
				t.Fatalf("tern holder: exit %d: %s", code, errs)
			}
			var r api.HolderReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("tern holder --json: %v: %s", err, out)
			}
			for _, p := range r.Peers {
				if p.Error != "" {
					t.Fatalf("tern holder: the peer's answer failed: %s", p.Error)
				}
			}
			return r
		}
		if r := holder(ds[0]); r.State != "active" || r.Epoch != 1 || len(r.Peers) != 1 || r.Peers[0].State != "copy" {
			t.Fatalf("before the moves: %+v", r)
		}
		from := 0
		for epoch := uint64(2); epoch <= 4; epoch++ {
			to := 1 - from
			code, out, errs := ternQuiet(ds[from].home, "migrate", agent, "--to", fmt.Sprint("n", to), "--json")
			var o node.Outcome
			if code != 0 || json.Unmarshal([]byte(out), &o) != nil || o.Outcome != "committed" || o.Epoch != epoch {
				t.Fatalf("move n%d -> n%d: exit %d: %s %s", from, to, code, out, errs)
			}
			if r := holder(ds[to]); r.State != "active" || r.Epoch != epoch || r.Peers[0].State != "retired" {
				t.Fatalf("after the move to n%d: %+v", to, r)
			}
			from = to
		}
	})
}
