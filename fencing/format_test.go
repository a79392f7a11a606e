package fencing

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/registry.json")

func goldenRegistry() map[string]Record {
	return map[string]Record{
		"5b3c1d2e-0000-4000-8000-000000000001": {Highest: 7, State: Frozen, Epoch: 5, Peer: "12D3KooWTarget", Next: 7, Committing: true,
			Holder: Holder{"12D3KooWSelf", 5}, Decisions: []Decided{{6, Refused}, {5, Activated}}},
		"5b3c1d2e-0000-4000-8000-000000000002": {Highest: 3, State: Staging, Epoch: 3, Peer: "12D3KooWSource", Prepared: true,
			Holder: Holder{"12D3KooWSource", 2}},
		"5b3c1d2e-0000-4000-8000-000000000003": {Highest: 9, Floor: 9, Holder: Holder{"12D3KooWOther", 8}},
	}
}

func TestTheRegistryFileFormatIsPinned(t *testing.T) {
	data, err := EncodeRegistry(goldenRegistry())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "registry.json")
	if *update {
		os.WriteFile(path, data, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("EncodeRegistry changed the durable format (run with -update and review the diff):\n%s", data)
	}
	recs, err := DecodeRegistry(want)
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range goldenRegistry() {
		got := recs[id]
		// Decisions come back sorted by epoch.
		if got.Highest != r.Highest || got.State != r.State || len(got.Decisions) != len(r.Decisions) {
			t.Errorf("%s: decoded %+v, want %+v", id, got, r)
		}
		for _, d := range r.Decisions {
			if got.Decision(d.Epoch) != d.Decision {
				t.Errorf("%s: decision for %d is %v, want %v", id, d.Epoch, got.Decision(d.Epoch), d.Decision)
			}
		}
	}
}

func TestDecodeRegistryRefusesWhatEncodeWouldNotWrite(t *testing.T) {
	good, _ := os.ReadFile(filepath.Join("testdata", "registry.json"))
	cases := []struct {
		name string
		edit func(string) string
		err  error
	}{
		{"a newer format", func(s string) string { return strings.Replace(s, "tern.registry/1", "tern.registry/2", 1) }, ErrFutureFormat},
		{"another format", func(s string) string { return strings.Replace(s, "tern.registry/1", "tern.capsule/1", 1) }, nil},
		{"an unknown field", func(s string) string { return strings.Replace(s, `"floor"`, `"flour": 1, "floor"`, 1) }, nil},
		{"an unknown state", func(s string) string { return strings.Replace(s, `"staging"`, `"sleeping"`, 1) }, nil},
		{"an unknown decision", func(s string) string { return strings.Replace(s, `"refused"`, `"maybe"`, 1) }, nil},
		{"an agent id that is not a lowercase UUID", func(s string) string {
			return strings.Replace(s, "5b3c1d2e-0000-4000-8000-000000000002", "5B3C1D2E-0000-4000-8000-000000000002", 1)
		}, nil},
		{"decisions out of order", func(s string) string {
			return strings.Replace(strings.Replace(s, `"epoch": 5,
          "decision": "activated"`, `"epoch": 9,
          "decision": "activated"`, 1), `"highest": 7`, `"highest": 9`, 1)
		}, nil},
		{"a frozen record without a proposed epoch", func(s string) string { return strings.Replace(s, `"next": 7`, `"next": 0`, 1) }, nil},
		{"trailing data", func(s string) string { return s + "{}" }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := tc.edit(string(good))
			if bad == string(good) {
				t.Fatal("the edit changed nothing")
			}
			_, err := DecodeRegistry([]byte(bad))
			if err == nil {
				t.Fatal("accepted")
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
		})
	}
}

func FuzzDecodeRegistry(f *testing.F) {
	good, _ := os.ReadFile(filepath.Join("testdata", "registry.json"))
	f.Add(good)
	f.Add([]byte(`{"format":"tern.registry/1","agents":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := DecodeRegistry(data)
		if err != nil {
			return
		}
		// Whatever decodes is valid and survives a round trip.
		out, err := EncodeRegistry(recs)
		if err != nil {
			t.Fatalf("decoded records do not encode: %v", err)
		}
		again, err := DecodeRegistry(out)
		if err != nil || len(again) != len(recs) {
			t.Fatalf("round trip: %v", err)
		}
		for id, r := range recs {
			if g := again[id]; !g.Equal(&r) {
				t.Fatalf("%s changed in a round trip: %+v then %+v", id, r, g)
			}
		}
	})
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		rec  Record
		ok   bool
	}{
		{"a fresh node", Record{}, true},
		{"the creator", Created("a"), true},
		{"a node that knows of the agent", Joined(Holder{"a", 4}), true},
		{"active without its activation recorded", Record{Highest: 2, State: Active, Epoch: 2}, false},
		{"an epoch above the highest", Record{Highest: 1, Epoch: 2}, false},
		{"two decisions for one epoch", Record{Highest: 3, Decisions: []Decided{{3, Refused}, {3, Activated}}}, false},
		{"a decision that is not activated or refused", Record{Highest: 3, Decisions: []Decided{{3, Unknown}}}, false},
		{"staging with a decision for the staged epoch", Record{Highest: 3, State: Staging, Epoch: 3, Peer: "a", Decisions: []Decided{{3, Refused}}}, false},
		{"staging without a source", Record{Highest: 3, State: Staging, Epoch: 3}, false},
		{"frozen without a target", Record{Highest: 3, State: Frozen, Epoch: 2, Next: 3, Decisions: []Decided{{2, Activated}}}, false},
		{"retired with a migration in progress", Record{Highest: 3, State: Retired, Epoch: 2, Next: 3, Peer: "b"}, false},
		{"prepared while not staging", Record{Highest: 3, Prepared: true}, false},
		{"a floor above the highest", Record{Highest: 3, Floor: 4}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rec.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
}
