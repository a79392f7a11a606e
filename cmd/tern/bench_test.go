package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchSyncBadUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"a size that is not one", []string{"--blob-size", "lots"}},
		{"a size in an unknown unit", []string{"--blob-size", "3 parsecs"}},
		{"an empty blob", []string{"--blob-size", "0"}},
		{"a blob over the limit", []string{"--blob-size", "5GiB"}},
		{"a negative size", []string{"--blob-size", "-1MiB"}},
		{"no events", []string{"--events", "0"}},
		{"one node", []string{"--nodes", "1"}},
		{"too many nodes", []string{"--nodes", "1000"}},
		{"no capsules", []string{"--capsules", "0"}},
		{"an unknown measurement", []string{"--only", "blob,teleport"}},
		{"an empty measurement", []string{"--only", ""}},
		{"a folder that does not exist", []string{"--dir", "/does/not/exist"}},
		{"a flag that is not a number", []string{"--events", "many"}},
		{"an unknown flag", []string{"--fast"}},
		{"an argument", []string{"now"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := tern(t, t.TempDir(), "", append([]string{"bench", "sync"}, tc.args...)...)
			if code != 2 || !strings.HasPrefix(errs, "tern: ") || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2, nothing measured, and an explanation", code, out, errs)
			}
		})
	}
}

func TestBenchSyncJSONHasEveryMeasurement(t *testing.T) {
	code, out, errs := tern(t, t.TempDir(), "", "bench", "sync", "--json", "--dir", t.TempDir(),
		"--blob-size", "1MiB", "--events", "300", "--nodes", "2", "--capsules", "5")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	var rep struct {
		CPUs int `json:"cpus"`
		Blob struct {
			Bytes int64   `json:"bytes"`
			Ratio float64 `json:"ratio"`
		} `json:"blob"`
		CatchUp struct {
			Events    int   `json:"events"`
			WireBytes int64 `json:"wire_bytes"`
		} `json:"catchup"`
		Partition struct {
			Nodes   int     `json:"nodes"`
			Seconds float64 `json:"seconds"`
		} `json:"partition"`
		Memory struct {
			Capsules int `json:"capsules"`
			Synced   struct {
				HeapBytes int64 `json:"heap_bytes"`
			} `json:"synced"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	if rep.CPUs < 1 || rep.Blob.Bytes != 1<<20 || !(rep.Blob.Ratio > 0) || rep.CatchUp.Events != 300 || rep.CatchUp.WireBytes <= 0 ||
		rep.Partition.Nodes != 2 || !(rep.Partition.Seconds > 0) || rep.Memory.Capsules != 5 || rep.Memory.Synced.HeapBytes <= 0 {
		t.Errorf("report %+v\nfrom %s", rep, out)
	}
}

func TestBenchSyncPrintsATableOfWhatRan(t *testing.T) {
	code, out, errs := tern(t, t.TempDir(), "", "bench", "sync", "--only", "partition", "--nodes", "2", "--dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "convergence after the heal") || strings.Contains(out, "blob") || strings.Contains(out, "catchup") {
		t.Errorf("a table of the partition alone, got:\n%s", out)
	}
}

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
	}{
		{"4096", 4096},
		{"256MiB", 256 << 20},
		{"1 GiB", 1 << 30},
		{"64KiB", 64 << 10},
		{"2GB", 2e9},
		{"500kB", 500e3},
		{"10B", 10},
	}
	for _, tc := range cases {
		if got, err := parseSize(tc.in); err != nil || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "MiB", "1.5GiB", "12 XB", "-3", "99999999999GiB"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) succeeded", bad)
		}
	}
}

func TestBenchMigrateReportsTheFrozenWindowAndTheColdRate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nodes")
	}
	code, out, errs := tern(t, t.TempDir(), "", "bench", "migrate", "--events", "50", "--workspace", "256KiB", "--changed", "4KiB", "--runs", "3", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		FrozenMS  []int64 `json:"frozen_ms"`
		ColdBytes int64   `json:"cold_bytes"`
		ColdRatio float64 `json:"cold_ratio"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(r.FrozenMS) != 3 || r.ColdBytes < 256<<10 || r.ColdRatio <= 0 {
		t.Fatalf("report %s", out)
	}
}
