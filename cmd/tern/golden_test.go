package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from what tern prints now")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/tern -run %s -update to write it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from what tern prints now; if the change is meant, run go test ./cmd/tern -run '%s' -update and review the diff.\n--- want\n%s\n--- got\n%s", path, t.Name(), want, got)
	}
}

// Every command's --help is a contract people read and scripts grep: it
// changes only on purpose.
func TestEveryHelpTextMatchesItsGoldenFile(t *testing.T) {
	t.Setenv("HOME", "/home/you")
	t.Setenv("XDG_CONFIG_HOME", "")
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.Hidden || c.Name() == "completion" && len(path) > 0 {
			return
		}
		paths = append(paths, path)
		for _, s := range c.Commands() {
			if s.Name() != "help" {
				walk(s, append(append([]string(nil), path...), s.Name()))
			}
		}
	}
	walk(newRoot(nil, io.Discard, io.Discard), nil)
	for _, p := range paths {
		name := strings.Join(append([]string{"tern"}, p...), "_")
		t.Run(name, func(t *testing.T) {
			code, out, errs := tern(t, "/home/you/.tern", "", append(p, "--help")...)
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			golden(t, filepath.Join("help", name+".txt"), out)
		})
	}
	t.Run("tern_help_environment", func(t *testing.T) {
		t.Setenv("TERN_HOME", "")
		var out, errb strings.Builder
		if code := run([]string{"help", "environment"}, strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("exit %d, %s", code, errb.String())
		}
		golden(t, filepath.Join("help", "tern_help_environment.txt"), out.String())
	})
}

// The errors of bad invocations say what was wrong and what to do, in
// words that change only on purpose. Each is run in a fresh home, with
// the home's path written $TERN_HOME.
func TestUsageErrorsMatchTheirGoldenFile(t *testing.T) {
	cases := [][]string{
		{"captain"},
		{"capsule", "inspec", "x"},
		{"capsule", "snapshot", "./agent"},
		{"capsule", "new"},
		{"journal", "log"},
		{"peer", "add"},
		{"peer", "add", "laptop"},
		{"peer", "add", "12D3KooWnotanid"},
		{"peer", "remove", "nobody"},
		{"turn", "not-an-agent"},
		{"approve", "act_a", "act_a"},
		{"node", "--log-format", "xml"},
		{"journal", "log", "./nowhere"},
		{"capsule", "verify", "./nowhere", "--signer", "bob"},
		{"capsule", "snapshot", "./nowhere", "."},
		{"capsule", "pack", "./nowhere", "-o", "x.tar"},
	}
	var b strings.Builder
	for _, args := range cases {
		home := t.TempDir()
		code, out, errs := tern(t, home, "", args...)
		fmt.Fprintf(&b, "$ tern %s\nexit %d\n%s%s\n", strings.Join(args, " "), code, out, strings.ReplaceAll(errs, home, "$TERN_HOME"))
		if code != exitBadInput {
			t.Errorf("tern %s: exit %d, want %d (bad input)", strings.Join(args, " "), code, exitBadInput)
		}
	}
	golden(t, "usage_errors.txt", b.String())
}
