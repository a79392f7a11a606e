package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSimnetPassesAndReportsWhatItRan(t *testing.T) {
	code, out, errs := tern(t, t.TempDir(), "", "simnet", "--seeds", "300")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"runs        300", "steps ", "violations  0", "coverage    commit=", "override=", "sync        ", " exchanges", "seeds/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSimnetJSONHasThePinnedFields(t *testing.T) {
	code, out, errs := tern(t, t.TempDir(), "", "simnet", "--seeds", "300", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"seeds", "steps", "violations", "coverage", "seeds_per_second"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	if rep["seeds"] != 300.0 || rep["violations"] != 0.0 {
		t.Errorf("seeds %v, violations %v; want 300 and 0", rep["seeds"], rep["violations"])
	}
	cov, _ := rep["coverage"].(map[string]any)
	for _, k := range []string{"commit", "abort", "retire_by_query", "resume_by_query", "stale_refused", "registry_relearned", "override"} {
		if n, ok := cov[k].(float64); !ok || n == 0 {
			t.Errorf("coverage[%q] = %v, want a positive count", k, cov[k])
		}
	}
}

func TestSimnetFailsABrokenProtocolAndSaysHowToReplayIt(t *testing.T) {
	home := t.TempDir()
	code, out, errs := tern(t, home, "", "simnet", "--seeds", "100", "--flaw", "query-without-fence")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errs)
	}
	i := strings.Index(out, "replay: ")
	if i < 0 || !strings.Contains(out, "FAIL seed ") || !strings.Contains(out, "faults: drop=") {
		t.Fatalf("no seed, fault settings and replay command:\n%s", out)
	}
	replay := strings.Fields(strings.SplitN(out[i+len("replay: "):], "\n", 2)[0])
	if replay[0] != "tern" {
		t.Fatalf("replay command %q", replay)
	}
	code, trace, _ := tern(t, home, "", replay[1:]...)
	if code != 1 || !strings.Contains(trace, "VIOLATION") || !strings.Contains(trace, "deliver propose") {
		t.Fatalf("the replay exited %d without a step-by-step trace of the violation:\n%s", code, trace)
	}
}

func TestSimnetFailsASyncPolicyWhoseCopiesDoNotConverge(t *testing.T) {
	code, out, errs := tern(t, t.TempDir(), "", "simnet", "--seeds", "300", "--flaw", "follower-skips")
	if code != 1 || !strings.Contains(out, "paired copies differ") || !strings.Contains(out, "--flaw follower-skips --trace") {
		t.Fatalf("exit %d, want 1 naming the copies that differ and the replay\n%s%s", code, out, errs)
	}
}

func TestSimnetBadUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"an unknown fault", []string{"--faults", "drop,teleport"}},
		{"one node", []string{"--nodes", "1"}},
		{"no seeds", []string{"--seeds", "0"}},
		{"a trace of many seeds", []string{"--seeds", "5", "--trace"}},
		{"an unknown flaw", []string{"--flaw", "sloppy"}},
		{"a flaw of the sync policy on the node layer", []string{"--layer", "node", "--flaw", "follower-skips"}},
		{"an argument", []string{"now"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := tern(t, t.TempDir(), "", append([]string{"simnet"}, tc.args...)...)
			if code != 2 || !strings.HasPrefix(errs, "tern: ") {
				t.Fatalf("exit %d, stderr %q; want 2 and an explanation", code, errs)
			}
		})
	}
}

// The node layer runs real nodes in synctest bubbles, which the binary
// makes through the testing package: run it as a separate process.
func TestSimnetNodeLayerReplaysTheSameSeedsTheSameWay(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	var hashes []string
	for range 2 {
		out, err := ternProcess(t.TempDir(), "", "simnet", "--layer", "node", "--seed", "3", "--seeds", "4", "--json").Output()
		if err != nil {
			t.Fatalf("tern simnet --layer node: %v\n%s", err, out)
		}
		var rep simnetReport
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if rep.Layer != "node" || rep.Seeds != 4 || rep.Violations != 0 || rep.Started == 0 || rep.TraceHash == "" {
			t.Fatalf("report %+v", rep)
		}
		hashes = append(hashes, rep.TraceHash)
	}
	if hashes[0] != hashes[1] {
		t.Fatalf("the same seeds gave trace hashes %v", hashes)
	}
	cmd := ternProcess(t.TempDir(), "", "simnet", "--layer", "nodes")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "--layer") {
		t.Fatalf("an unknown layer: exit %d (%v): %s", code, err, out)
	}
}
