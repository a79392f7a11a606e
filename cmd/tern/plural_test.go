package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestPluralAgreesWithItsCount(t *testing.T) {
	for _, tc := range []struct {
		n     int
		thing string
		want  string
	}{
		{0, "event", "0 events"},
		{1, "event", "1 event"},
		{2, "address", "2 addresses"},
		{1, "entry", "1 entry"},
		{3, "entry", "3 entries"},
		{2, "day", "2 days"},
		{2, "y", "2 ys"},
	} {
		if got := plural(tc.n, tc.thing); got != tc.want {
			t.Errorf("plural(%d, %q) = %q, want %q", tc.n, tc.thing, got, tc.want)
		}
	}
}

// A new capsule holds one event, its creation: verify and inspect say
// "1 event", never "1 events".
func TestVerifyAndInspectCountOneEventInTheSingular(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(t.TempDir(), "agent")
	mustTern(t, home, "", "capsule", "new", dir, "--name", "helper")
	out := mustTern(t, home, "", "capsule", "verify", dir)
	if !strings.Contains(out, ", 1 event, ") || strings.Contains(out, "1 events") {
		t.Errorf("verify: %q, want it to count 1 event", out)
	}
	out = mustTern(t, home, "", "capsule", "inspect", dir)
	if !strings.Contains(out, "journal   1 event in 0 sessions from 1 machine\n") || !strings.Contains(out, "(0 blobs, ") {
		t.Errorf("inspect:\n%s", out)
	}
}
