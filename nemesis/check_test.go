package nemesis

import (
	"strings"
	"testing"
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
