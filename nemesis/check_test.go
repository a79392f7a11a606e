package nemesis

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/tern-dev/tern/journal"
)

func TestTheRunnersRuleFlagsOverlapsAndNeverAHandover(t *testing.T) {
	run := func(node int, epoch uint64) sample { return sample{node: node, ok: true, runs: true, epoch: epoch} }
	idle := func(node int) sample { return sample{node: node, ok: true} }
	silent := func(node int) sample { return sample{node: node} }
	for _, tc := range []struct {
		name    string
		samples []sample
		want    string // in the violation; "" for none
	}{
		{name: "a handover seen cleanly is not flagged", samples: []sample{run(0, 1), idle(1), idle(0), run(1, 2), idle(0), run(1, 2)}},
		{name: "the old holder seen running once more before it stops is not flagged", samples: []sample{run(0, 1), run(1, 2), idle(0), run(1, 2)}},
		{name: "a move back to the old holder at a newer epoch is not flagged", samples: []sample{run(0, 1), run(1, 2), run(0, 3), idle(1), run(0, 3)}},
		{name: "a node running at the same epoch before and after another ran is flagged", samples: []sample{run(0, 1), run(1, 2), run(0, 1)}, want: "n0 at epoch 1 before and after n1"},
		{name: "an overlap seen over three nodes is flagged", samples: []sample{run(2, 4), idle(0), run(1, 5), run(2, 4)}, want: "n2 at epoch 4 before and after n1"},
		{name: "a node that did not answer in between breaks the pair", samples: []sample{run(0, 1), run(1, 2), silent(0), run(0, 1)}},
		{name: "another node seen running before the first sample of the pair is not flagged", samples: []sample{run(1, 2), idle(1), run(0, 3), run(0, 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRunners(3)
			var got []string
			for _, s := range tc.samples {
				if v := r.Add(s); v != "" {
					got = append(got, v)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("flagged: %v", got)
			case tc.want != "" && (len(got) == 0 || !strings.Contains(got[0], tc.want)):
				t.Fatalf("got %q, want a violation naming %q", got, tc.want)
			}
		})
	}
}

func TestAnAcknowledgedAppendMustBeReadable(t *testing.T) {
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := journal.NewKeySigner(k)
	if err != nil {
		t.Fatal(err)
	}
	agent, genesis := journal.NewAgentID(s.Machine())
	var chain []*journal.Event
	add := func(seq uint64, prev string, d journal.Draft) *journal.Event {
		t.Helper()
		e, err := journal.NewEvent(s, journal.Stamp{Seq: seq, Prev: prev, Clock: seq, Time: time.Unix(int64(seq), 0)}, d)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	message := func(text string) journal.Draft {
		t.Helper()
		d, err := journal.ParseDraft([]byte(`{"type":"message","session":"s1","turn":"t1","body":{"role":"user","content":[{"type":"text","text":"` + text + `"}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	g := add(1, "", genesis)
	kept := add(2, g.ID, message("kept"))
	// Two events at seq 3: a fork, which sets that machine's line aside
	// from there on.
	forkA, forkB := add(3, kept.ID, message("fork a")), add(3, kept.ID, message("fork b"))
	chain = append(chain, g, kept, forkA, forkB)

	for _, tc := range []struct {
		name string
		ack  ack
		want string // in the finding; "" for none
	}{
		{"an append in the readable line is found", ack{id: kept.ID, text: "kept"}, ""},
		{"an append signed again under another id is found by its text", ack{id: "bafy-other", text: "kept"}, ""},
		{"an append that is not there is lost", ack{id: "bafy-gone", text: "gone"}, "is lost"},
		{"an append of a forked line is set aside", ack{id: forkA.ID, text: "fork a"}, "is set aside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unreadable(agent, chain, []ack{tc.ack}, "n0")
			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("found %v", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Fatalf("found %q, want one naming %q", got, tc.want)
			}
		})
	}
}

func TestEpochsMustNeverGoDownButForARestoredHome(t *testing.T) {
	seen := func(node int, highest uint64) sample { return sample{node: node, ok: true, highest: highest} }
	for _, tc := range []struct {
		name     string
		samples  []sample
		restored int // the node restored after the first two samples; -1 for none
		want     string
	}{
		{name: "a highest epoch that only rises passes", samples: []sample{seen(0, 1), seen(0, 2), seen(0, 2), seen(0, 5)}, restored: -1},
		{name: "a highest epoch that goes down is flagged", samples: []sample{seen(0, 3), seen(0, 4), seen(0, 2)}, restored: -1, want: "n0's highest epoch went down from 4 to 2"},
		{name: "a node that does not answer is not taken for a zero", samples: []sample{seen(1, 3), {node: 1}, seen(1, 3)}, restored: -1},
		{name: "a home restored from a backup starts again from what it holds", samples: []sample{seen(2, 3), seen(2, 6), seen(2, 4), seen(2, 7)}, restored: 2},
		{name: "a restored home may not go down again after", samples: []sample{seen(2, 3), seen(2, 6), seen(2, 4), seen(2, 3)}, restored: 2, want: "n2's highest epoch went down from 4 to 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &checker{runners: NewRunners(3), highest: make([]uint64, 3), last: make([]sample, 3)}
			for i, s := range tc.samples {
				if i == 2 && tc.restored >= 0 {
					k.restored(tc.restored)
				}
				k.record(s)
			}
			v, _, _ := k.endTrial()
			switch {
			case tc.want == "" && len(v) > 0:
				t.Fatalf("flagged: %v", v)
			case tc.want != "" && (len(v) != 1 || !strings.Contains(v[0], tc.want)):
				t.Fatalf("got %q, want %q", v, tc.want)
			}
		})
	}
}
