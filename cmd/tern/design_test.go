package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// docs/DESIGN.md lists each package of tern with the packages of tern it
// imports, and describes each in its table: both as the code is now.
func TestDesignListsEveryImport(t *testing.T) {
	root := filepath.Join("..", "..")
	design, err := os.ReadFile(filepath.Join(root, "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(design), "```imports\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("docs/DESIGN.md has no ```imports block")
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports ","}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/tern-dev/tern/"
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, imports, _ := strings.Cut(l, "|")
		var mine []string
		for _, i := range strings.Split(imports, ",") {
			if p, ok := strings.CutPrefix(i, mod); ok {
				mine = append(mine, p)
			}
		}
		slices.Sort(mine)
		line := strings.TrimPrefix(path, mod) + " → (none)"
		if len(mine) > 0 {
			line = strings.TrimPrefix(path, mod) + " → " + strings.Join(mine, ", ")
		}
		want = append(want, line)
	}
	got := strings.Split(strings.TrimSpace(block), "\n")
	if !slices.Equal(got, want) {
		t.Fatalf("docs/DESIGN.md's imports are not the code's; replace the block with:\n%s", strings.Join(want, "\n"))
	}
	for _, l := range want {
		pkg, _, _ := strings.Cut(l, " → ")
		if !strings.Contains(string(design), "| `"+pkg+"` |") {
			t.Errorf("docs/DESIGN.md's table of packages has no row for %s", pkg)
		}
	}
}
