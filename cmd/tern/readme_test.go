package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/tern-dev/tern/capsule"
)

// The README names the built-in tools a new agent.json lists, and how
// many: the same as tern capsule new writes.
func TestTheReadmeListsTheToolsCapsuleNewWrites(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("agent.json lists the (\\d+) built-in tools \\(([^;]*);").FindSubmatch(bytes.Join(bytes.Fields(readme), []byte(" ")))
	if m == nil {
		t.Fatal("the README no longer says which built-in tools a new agent.json lists")
	}
	var named []string
	for _, n := range regexp.MustCompile("`([a-z_]+)`").FindAllSubmatch(m[2], -1) {
		named = append(named, string(n[1]))
	}
	dir := filepath.Join(t.TempDir(), "agent")
	mustTern(t, t.TempDir(), "", "capsule", "new", dir, "--name", "helper")
	data, err := os.ReadFile(filepath.Join(dir, "agent.json"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := capsule.ParseAgent(data)
	if err != nil {
		t.Fatal(err)
	}
	var written []string
	for _, tool := range a.Tools {
		written = append(written, tool.Name)
	}
	if string(m[1]) != strconv.Itoa(len(written)) || !slices.Equal(named, written) {
		t.Errorf("the README says %s built-in tools, %v; capsule new writes %d, %v", m[1], named, len(written), written)
	}
}
