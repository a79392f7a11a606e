package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tern-dev/tern/memory"
	"github.com/tern-dev/tern/store"
)

// Notes written by a person through the node and by the agent through its
// tools are one memory: listed, searched and forgotten by agent id.
func TestMemoryThroughTheNodeAndThroughTheAgentsTools(t *testing.T) {
	home := t.TempDir()
	runNode(t, home)
	id := importAgent(t, home, nil)

	noteID := strings.TrimSpace(mustTern(t, home, "", "memory", "note", id, "The dev server listens on port 8080", "--tag", "dev"))
	if !memory.ValidNoteID(noteID) {
		t.Fatalf("memory note printed %q, want a note id", noteID)
	}
	if out := mustTern(t, home, "", "memory", "list", id); !strings.Contains(out, noteID) || !strings.Contains(out, "port 8080  [dev]") {
		t.Fatalf("memory list: %q", out)
	}

	// The agent notes something with memory_note and finds it with
	// memory_search, in another turn.
	code, out, errs := tern(t, home, "", "turn", id, `!call memory_note {"text": "Flight to Lisbon on 12 March", "tags": ["travel"]}`)
	if code != 0 || !strings.Contains(out, "Noted as note_") {
		t.Fatalf("memory_note in a turn: exit %d, %q, %q", code, out, errs)
	}
	code, out, errs = tern(t, home, "", "turn", id, `!call memory_search {"query": "when is the lisbon flight"}`)
	if code != 0 || !strings.Contains(out, "Flight to Lisbon on 12 March") {
		t.Fatalf("memory_search in a turn: exit %d, %q, %q", code, out, errs)
	}

	var results []memory.Result
	if err := json.Unmarshal([]byte(mustTern(t, home, "", "memory", "search", id, "which port does the dev server use", "--json")), &results); err != nil {
		t.Fatal(err)
	}
	if len(results) == 0 || results[0].Note != noteID {
		t.Fatalf("search: %+v, want %s first", results, noteID)
	}
	if out := mustTern(t, home, "", "memory", "search", id, "lisbon", "--tag", "dev"); strings.Contains(out, "Lisbon") {
		t.Fatalf("a search for tag dev found the travel note: %q", out)
	}

	// The node's folder is the node's: commands on it go through the node.
	held := filepath.Join(home, store.CapsulesDir, id)
	mustTern(t, home, "", "memory", "forget", held, noteID)
	if out := mustTern(t, home, "", "memory", "list", id); strings.Contains(out, noteID) {
		t.Fatalf("a forgotten note is listed: %q", out)
	}
	if code, _, errs := tern(t, home, "", "memory", "forget", id, noteID); code != exitBadInput || !strings.Contains(errs, "no such note") {
		t.Fatalf("forgetting a note twice: exit %d, %q", code, errs)
	}
	md, _ := os.ReadFile(filepath.Join(held, "memory", "working_memory.md"))
	if !strings.Contains(string(md), "Flight to Lisbon") || strings.Contains(string(md), "port 8080") {
		t.Fatalf("the node's working_memory.md:\n%s", md)
	}
	mustTern(t, home, "", "capsule", "verify", held)
}

// In a capsule folder, without a node: note, list, search, forget, and a
// working_memory.md edit accepted.
func TestMemoryInACapsuleFolder(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	a := strings.TrimSpace(mustTern(t, home, "", "memory", "note", dir, "Run the tests with go test ./... from the root"))
	mustTern(t, home, "", "memory", "note", dir, "Stand-up is at 9:30")
	if out := mustTern(t, home, "", "memory", "search", dir, "how do I run the tests", "--k", "1"); !strings.Contains(out, a) {
		t.Fatalf("search: %q", out)
	}
	p := filepath.Join(dir, "memory", "working_memory.md")
	md, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(md), "9:30", "10:00", 1)), 0o644)
	// A note written before the edit is accepted keeps it, and is kept.
	mustTern(t, home, "", "memory", "note", dir, "Written meanwhile")
	if b, _ := os.ReadFile(p); !strings.Contains(string(b), "10:00") || strings.Contains(string(b), "meanwhile") {
		t.Fatalf("a note written meanwhile overwrote the edit:\n%s", b)
	}
	if code, out, errs := tern(t, home, "", "capsule", "verify", dir); code == 0 || !strings.Contains(out+errs, "tern capsule accept") {
		t.Fatalf("verify of an unaccepted edit: exit %d %q %q", code, out, errs)
	}
	if out := mustTern(t, home, "", "capsule", "accept", dir); !strings.Contains(out, "(1 revised, 0 removed, 0 added)") {
		t.Fatalf("accept says %q", out)
	}
	if out := mustTern(t, home, "", "memory", "list", dir); !strings.Contains(out, "Stand-up is at 10:00") || !strings.Contains(out, "Written meanwhile") {
		t.Fatalf("after the accepted edit: %q", out)
	}
	mustTern(t, home, "", "memory", "forget", dir, a)
	var notes []memory.NoteView
	json.Unmarshal([]byte(mustTern(t, home, "", "memory", "list", dir, "--json")), &notes)
	if len(notes) != 2 || notes[0].Text != "Stand-up is at 10:00" {
		t.Fatalf("list --json: %+v", notes)
	}
	mustTern(t, home, "", "capsule", "verify", dir)
	if code, _, errs := tern(t, home, "", "memory", "note", dir, "   "); code != exitBadInput || !strings.Contains(errs, "a note needs text") {
		t.Fatalf("an empty note: exit %d, %q", code, errs)
	}

	// An embedder that cannot be reached is a failure to try again (3),
	// not bad input.
	ag := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(ag)
	var def map[string]any
	json.Unmarshal(b, &def)
	def["memory"] = map[string]any{"embedder": "ollama", "model": "nomic-embed-text", "base_url": "http://127.0.0.1:9"}
	b, _ = json.MarshalIndent(def, "", "  ")
	os.WriteFile(ag, append(b, '\n'), 0o644)
	mustTern(t, home, "", "capsule", "accept", dir)
	if code, _, errs := tern(t, home, "", "memory", "search", dir, "stand-up"); code != 3 || !strings.Contains(errs, "ollama") {
		t.Fatalf("search with an unreachable embedder: exit %d, %q", code, errs)
	}
}

// With "workspace": true, the workspace's text files are searched too.
func TestMemorySearchesTheWorkspaceWhenAgentJSONAsks(t *testing.T) {
	home := t.TempDir()
	dir := newAgent(t, home)
	ag := filepath.Join(dir, "agent.json")
	b, _ := os.ReadFile(ag)
	var def map[string]any
	json.Unmarshal(b, &def)
	def["memory"] = map[string]any{"workspace": true}
	b, _ = json.MarshalIndent(def, "", "  ")
	os.WriteFile(ag, append(b, '\n'), 0o644)
	mustTern(t, home, "", "capsule", "accept", dir)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "RUNBOOK.md"), []byte("Deploys go through the staging cluster first.\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "logo.png"), []byte{0x89, 'P', 'N', 'G', 0, 1}, 0o644)
	mustTern(t, home, "", "capsule", "snapshot", dir, ws)
	var results []memory.Result
	json.Unmarshal([]byte(mustTern(t, home, "", "memory", "search", dir, "staging cluster", "--json")), &results)
	if len(results) == 0 || results[0].File != "RUNBOOK.md" {
		t.Fatalf("search of the workspace: %+v", results)
	}
	mustTern(t, home, "", "capsule", "verify", dir)
}
