package main

import (
	"strings"
	"testing"
)

func TestNemesisRefusesBadInputWithExitTwo(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error
	}{
		{"no trials", []string{"--trials", "0"}, "--trials 0"},
		{"an unknown transport", []string{"--transport", "udp"}, `--transport "udp"`},
		{"an unknown scenario", []string{"--scenario", "meteor"}, `"meteor"`},
		{"an unknown flaw", []string{"--flaw", "typo"}, `--flaw "typo"`},
		// This test binary is built without -tags ternflaws, as a release is.
		{"a flaw in a tern built without the flaws", []string{"--flaw", "resume-on-silence"}, "-tags ternflaws"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := ternQuiet(t.TempDir(), append([]string{"nemesis"}, tc.args...)...)
			if code != exitBadInput || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 naming %q", code, errs, tc.want)
			}
		})
	}
}
