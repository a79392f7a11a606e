package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
)

// The scripts' contract: tern migrate --json prints outcome, epoch,
// frozen_ms, bytes_sent and phases, exits 0 when committed; tern holder
// --json prints state, epoch and the peers'.
func TestMigrateAndHolderThroughTheCLI(t *testing.T) {
	homeA, homeB := t.TempDir(), t.TempDir()
	a, b := runNode(t, homeA), runNode(t, homeB)
	ia, ib := a.Info(), b.Info()
	mustTern(t, homeA, "", "peer", "add", ib.PeerID, ib.Addrs[0], "--name", "desktop")
	mustTern(t, homeB, "", "peer", "add", ia.PeerID, ia.Addrs[0], "--name", "laptop")
	dir := newAgent(t, homeA)
	id := strings.TrimSpace(mustTern(t, homeA, "", "capsule", "import", dir))

	var rep map[string]any
	eventually(t, 10*time.Second, func() error {
		if err := json.Unmarshal([]byte(mustTern(t, homeA, "", "holder", id, "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		if rep["state"] != "active" {
			return fmt.Errorf("holder on the creator: %v", rep)
		}
		return nil
	})
	if rep["epoch"] != float64(1) {
		t.Fatalf("holder on the creator: %v", rep)
	}

	code, out, errs := tern(t, homeA, "", "migrate", id, "--to", "desktop", "--json")
	if code != 0 {
		t.Fatalf("migrate: exit %d: %s %s", code, out, errs)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("migrate --json printed %q: %v", out, err)
	}
	for _, k := range []string{"outcome", "epoch", "frozen_ms", "bytes_sent", "phases"} {
		if _, ok := res[k]; !ok {
			t.Errorf("migrate --json lacks %q: %s", k, out)
		}
	}
	// Epoch 2, or 3 when the desktop learnt of 2 as it was proposed and
	// refused it as stale (the laptop then proposes once more, above it).
	epoch, _ := res["epoch"].(float64)
	if res["outcome"] != "committed" || epoch < 2 || epoch > 3 {
		t.Fatalf("migrate: %s", out)
	}
	var after api.HolderReport
	if err := json.Unmarshal([]byte(mustTern(t, homeA, "", "holder", id, "--json")), &after); err != nil {
		t.Fatal(err)
	}
	if after.State != "retired" || len(after.Peers) != 1 || after.Peers[0].State != "active" || after.Peers[0].Epoch != uint64(epoch) {
		t.Fatalf("holder after the move: %+v", after)
	}
	// Moving it again from the node that no longer runs it is refused.
	if code, _, errs := tern(t, homeA, "", "migrate", id, "--to", "desktop"); code == 0 || !strings.Contains(errs, "does not run the agent") {
		t.Fatalf("a second move from the old holder: exit %d, %q", code, errs)
	}
	if code, _, errs := tern(t, homeA, "", "migrate", id, "--to", "nobody"); code != exitBadInput || !strings.Contains(errs, "nobody") {
		t.Fatalf("an unknown target: exit %d, %q", code, errs)
	}
}

func TestMigrateResolveWithoutForceSaysWhatItRisksAndChangesNothing(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct{ flag, risk string }{
		{"--resume", "both may run it"},
		{"--retire", "no node runs it"},
	} {
		code, _, errs := tern(t, home, "", "migrate", "resolve", "00000000-0000-4000-8000-000000000000", tc.flag)
		if code != exitBadInput || !strings.Contains(errs, tc.risk) || !strings.Contains(errs, "--force") {
			t.Errorf("%s: exit %d, %q", tc.flag, code, errs)
		}
	}
	if code, _, _ := tern(t, home, "", "migrate", "resolve", "x", "--resume", "--retire", "--force"); code != exitBadInput {
		t.Errorf("both flags: exit %d", code)
	}
}
