package capsule_test

// testdata/golden-memory holds a capsule with notes: written on two
// machines apart and merged, one of them revised on both (a conflict),
// one removed, and its index over the notes and the workspace's text files
// (agent.json asks for them). expected-memory.json records what reading it
// gives. Every later tern must open it, verify it clean, read the same
// notes, derive the same working_memory.md and index byte for byte, and
// merge and pack it into the same bytes. Regenerate it only when the
// format changes on purpose, keeping the old one:
//
//	go test ./capsule -run GoldenMemory -update-golden

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

const goldenMemoryDir = "../testdata/golden-memory"

type goldenMemoryExpected struct {
	Tar     string            `json:"tar"`
	SHA256  string            `json:"sha256"`
	AgentID string            `json:"agent_id"`
	Notes   []memory.NoteView `json:"notes"`
	Notes1  string            `json:"working_memory_sha256"`
	Index   string            `json:"index_sha256"`
}

func writeGoldenMemory(t *testing.T, out string) goldenMemoryExpected {
	t.Helper()
	ctx := context.Background()
	laptop, desktop := goldenKey(t, "laptop"), goldenKey(t, "desktop")
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "agent")
	c, err := capsule.New(dir, "notes", laptop)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	d, err := capsule.OpenDir(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	addMembers(t, d, laptop, desktop)
	agent := capsule.DefaultAgent("notes")
	agent.Memory = &capsule.MemorySettings{Workspace: true}
	agentData, _ := agent.Encode()
	writeFile(t, filepath.Join(dir, capsule.AgentFile), agentData)
	if _, err := d.AcceptEdits(ctx, laptop); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(tmp, "ws")
	writeFile(t, filepath.Join(ws, "NOTES.txt"), []byte("Deploys go through staging first.\n"))
	writeFile(t, filepath.Join(ws, "logo.bin"), []byte{0, 1, 2, 0xff})
	if _, err := d.Snapshot(ctx, laptop, ws); err != nil {
		t.Fatal(err)
	}
	add := func(d *capsule.Dir, s journal.Signer, id, text string, tags ...string) {
		dr, err := memory.AddDraftAs(id, text, tags)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Append(ctx, s, 0, dr); err != nil {
			t.Fatal(err)
		}
	}
	change := func(d *capsule.Dir, s journal.Signer, id string, f func(*memory.Note) (journal.Draft, error)) {
		m, err := d.Memory()
		if err != nil {
			t.Fatal(err)
		}
		dr, err := f(m.Notes.Find(id))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Append(ctx, s, 0, dr); err != nil {
			t.Fatal(err)
		}
	}
	add(d, laptop, "note_00000000000000a1", "Maya prefers tabs over spaces.", "style")
	add(d, laptop, "note_00000000000000a2", "Stand-up is at 9:30.", "meetings")
	add(d, laptop, "note_00000000000000a3", "The old VPN is gone.")
	d.Close()

	packed := filepath.Join(tmp, "shared.tar")
	c, _ = capsule.Open(dir)
	if err := capsule.PackFile(c, packed, capsule.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	copies := []string{filepath.Join(tmp, "laptop"), filepath.Join(tmp, "desktop")}
	for i, cp := range copies {
		if err := capsule.Unpack(packed, cp, capsule.Limits{}); err != nil {
			t.Fatal(err)
		}
		d, err := capsule.OpenDir(ctx, cp, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := []journal.Signer{laptop, desktop}[i]
		text := []string{"Stand-up moved to 10:00.", "Stand-up is at 9:45 on Fridays."}[i]
		change(d, s, "note_00000000000000a2", func(n *memory.Note) (journal.Draft, error) {
			return memory.ReviseDraft(n, text, []string{"meetings"})
		})
		if i == 0 {
			change(d, s, "note_00000000000000a3", memory.RemoveDraft)
			add(d, s, "note_00000000000000b1", "Flight to Lisbon on 12 March.", "travel")
		} else {
			add(d, s, "note_00000000000000c1", "The desktop has the GPU.")
		}
		d.Close()
	}
	if _, err := capsule.Merge(openCapsule(t, copies[0]), openCapsule(t, copies[1]), out); err != nil {
		t.Fatal(err)
	}
	g := openCapsule(t, out)
	m, err := g.Memory()
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(out)
	md, _ := g.ReadFile(capsule.NotesFile)
	index, _ := g.ReadFile(capsule.IndexFile)
	return goldenMemoryExpected{Tar: filepath.Base(out), SHA256: sha256Hex(data), AgentID: g.ID(), Notes: m.Notes.Views(),
		Notes1: sha256Hex(md), Index: sha256Hex(index)}
}

func TestGoldenMemoryCapsule(t *testing.T) {
	if *updateGolden {
		os.RemoveAll(goldenMemoryDir)
		os.MkdirAll(goldenMemoryDir, 0o755)
		exp := writeGoldenMemory(t, filepath.Join(goldenMemoryDir, "capsule.tar"))
		data, _ := json.MarshalIndent(exp, "", "  ")
		writeFile(t, filepath.Join(goldenMemoryDir, "expected-memory.json"), append(data, '\n'))
	}
	data, err := os.ReadFile(filepath.Join(goldenMemoryDir, "expected-memory.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp goldenMemoryExpected
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	checkGoldenMemory(t, filepath.Join(goldenMemoryDir, exp.Tar), exp)
}

func TestGoldenMemoryGeneratorStillRuns(t *testing.T) {
	out := filepath.Join(t.TempDir(), "capsule.tar")
	exp := writeGoldenMemory(t, out)
	if len(exp.Notes) != 4 {
		t.Fatalf("the generator made %d live notes, want 4", len(exp.Notes))
	}
	checkGoldenMemory(t, out, exp)
}

func checkGoldenMemory(t *testing.T, path string, exp goldenMemoryExpected) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256Hex(data) != exp.SHA256 {
		t.Fatalf("%s changed: sha256 %s, want %s", path, sha256Hex(data), exp.SHA256)
	}
	rep, err := capsule.Verify(path, capsule.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Issues())
	}
	g := openCapsule(t, path)
	m, err := g.Memory()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(m.Notes.Views())
	want, _ := json.Marshal(exp.Notes)
	if !bytes.Equal(got, want) {
		t.Fatalf("notes read as\n%s\nwant\n%s", got, want)
	}
	conflicts := 0
	for _, n := range exp.Notes {
		if n.Conflict {
			conflicts++
		}
	}
	if conflicts != 1 {
		t.Fatalf("%d conflicts recorded, want the one of the stand-up note", conflicts)
	}
	events, _ := g.Journal()
	view, _ := journal.Readable(events)
	md, idx, err := memory.Derive(context.Background(), view, m.Spec, m.Items[len(memory.NoteItems(m.Notes)):], nil)
	if err != nil {
		t.Fatal(err)
	}
	index := idx.Encode()
	if sha256Hex(md) != exp.Notes1 || sha256Hex(index) != exp.Index {
		t.Fatal("working_memory.md or the index derived anew differs from the stored one")
	}
	var buf bytes.Buffer
	if err := capsule.Pack(g, &buf, capsule.PackOptions{}); err != nil || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("it packs to other bytes (%v)", err)
	}
	merged := filepath.Join(t.TempDir(), "merged.tar")
	if _, err := capsule.Merge(g, openCapsule(t, path), merged); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(merged); !bytes.Equal(b, data) {
		t.Fatal("merged with itself, it packs to other bytes")
	}
}
