package capsule_test

// testdata/golden holds a capsule written by the tern of the commit that
// made it, through the ordinary write path, with a little of everything:
// a workspace snapshot with a binary file, an accepted edit of agent.json,
// a message whose image part names a blob, events of types and with fields
// this tern does not know, and a fork (two events by one machine at one
// seq, appended to two copies under the same key, then merged).
// expected.json records what reading it gives. Every later tern must open
// it, verify it with the fork as its only problem, merge it with itself and
// with a copy of itself, and pack it again, byte for byte.
//
// Regenerating it defeats its purpose. Do it only when the format changes
// on purpose, and keep the old one as a second golden:
//
//	go test ./capsule -run Golden -update-golden

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

var updateGolden = flag.Bool("update-golden", false, "write testdata/golden anew (only when the format changes on purpose)")

const goldenDir = "../testdata/golden"

// goldenExpected is testdata/golden/expected.json.
type goldenExpected struct {
	Tar         string                           `json:"tar"`
	SHA256      string                           `json:"sha256"`
	AgentID     string                           `json:"agent_id"`
	Holder      capsule.Holder                   `json:"holder"`
	Checks      []string                         `json:"checks"`
	Forks       []goldenFork                     `json:"forks"`
	Events      int                              `json:"events"`
	Quarantined int                              `json:"quarantined"`
	Agent       capsule.Agent                    `json:"agent"`
	Snapshot    map[string]capsule.SnapshotEntry `json:"snapshot"`
	// Lines that must come back byte for byte: events with a type and
	// envelope fields this tern does not know, and the image message.
	Lines map[string]string `json:"lines"`
	// Blobs named by events, by what names them.
	Blobs map[string]string `json:"blobs"`
}

type goldenFork struct {
	Machine string   `json:"machine"`
	Seq     uint64   `json:"seq"`
	IDs     []string `json:"ids"`
}

// goldenKey is a fixed machine key for the golden capsule.
func goldenKey(t *testing.T, name string) *vectorKey {
	sum := sha256.Sum256([]byte("tern golden capsule: " + name))
	return newVectorKey(t, name, hex.EncodeToString(sum[:]))
}

// writeGolden makes the golden capsule with today's write path and
// returns the tar's path and what reading it must give.
func writeGolden(t *testing.T, out string) goldenExpected {
	t.Helper()
	ctx := context.Background()
	laptop, desktop, newer := goldenKey(t, "laptop"), goldenKey(t, "desktop"), goldenKey(t, "a newer tern")
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "agent")
	c, err := capsule.New(dir, "golden", laptop)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	d, err := capsule.OpenDir(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	addMembers(t, d, laptop, desktop, newer)
	message := func(role string, parts ...any) journal.Draft {
		b, err := json.Marshal(map[string]any{"role": role, "content": parts})
		if err != nil {
			t.Fatal(err)
		}
		return journal.Draft{Type: "message", Session: "s1", Turn: "t1", Body: b}
	}
	text := func(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
	if _, err := d.Append(ctx, laptop, 0,
		message("user", text("Tidy the README, and keep the logo.")),
		message("assistant", text("I will look at the workspace first.")),
	); err != nil {
		t.Fatal(err)
	}

	ws := filepath.Join(tmp, "workspace")
	logo := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{0x00, 0xff, 0x7f, 0x80}, 16)...)
	for name, data := range map[string][]byte{
		"README.md":       []byte("# Golden\n\nA workspace with a little of everything.\n"),
		"src/main.go":     []byte("package main\n\nfunc main() {}\n"),
		"assets/logo.png": logo,
	} {
		writeFile(t, filepath.Join(ws, filepath.FromSlash(name)), data)
	}
	if err := os.MkdirAll(filepath.Join(ws, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Snapshot(ctx, laptop, ws); err != nil {
		t.Fatal(err)
	}
	logoCID := capsule.BlobCID(sha256Hex(logo))
	if _, err := d.Append(ctx, laptop, 0, message("user", text("This is the logo:"),
		map[string]any{"type": "image", "cid": logoCID, "media_type": "image/png"})); err != nil {
		t.Fatal(err)
	}

	agent := capsule.DefaultAgent("golden")
	agent.Instructions = "You keep READMEs tidy."
	agent.Tools = []capsule.Tool{{Name: "read_file", Description: "Read a workspace file.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`), Effect: "pure"}}
	agentData, err := agent.Encode()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, capsule.AgentFile), agentData)
	if _, err := d.AcceptEdits(ctx, laptop); err != nil {
		t.Fatal(err)
	}

	if _, err := d.Append(ctx, laptop, 0, journal.Draft{Type: "x.later.memory", Session: "s1", Turn: "t2",
		Body: json.RawMessage(`{"summary":"The user likes short READMEs.","weights":[0.25,0.5,1e3],"nested":{"unknown":true,"note":"kept byte for byte"}}`)}); err != nil {
		t.Fatal(err)
	}
	// An event from a newer tern: an envelope field this one does not know.
	evs, err := d.Events()
	if err != nil {
		t.Fatal(err)
	}
	var clock uint64
	for _, e := range evs {
		clock = max(clock, e.Clock)
	}
	base, err := journal.NewEvent(newer, journal.Stamp{Seq: 1, Clock: clock + 1, Time: time.Date(2031, 1, 2, 3, 4, 5, 6, time.UTC)},
		journal.Draft{Type: "x.later.plan", Session: "s1", Turn: "t2", Body: json.RawMessage(`{"steps":["read","tidy"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	later, err := journal.ParseLine(bytes.TrimSuffix(edited(t, newer, lineOf(base), func(m map[string]json.RawMessage) {
		m["deadline"] = jsonString("2031-02-01T00:00:00Z")
	}), []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddEvents(ctx, []*journal.Event{later}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	// Two copies, one key: the laptop's key restored on a second machine.
	packed := filepath.Join(tmp, "before-fork.tar")
	c, err = capsule.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := capsule.PackFile(c, packed, capsule.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	copies := []string{filepath.Join(tmp, "copy-a"), filepath.Join(tmp, "copy-b")}
	for i, cp := range copies {
		if err := capsule.Unpack(packed, cp, capsule.Limits{}); err != nil {
			t.Fatal(err)
		}
		d, err := capsule.OpenDir(ctx, cp, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Append(ctx, laptop, 0, message("assistant", text([]string{"Done on the laptop.", "Done on the restored backup."}[i]))); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if _, err := d.Append(ctx, desktop, 0, message("user", text("Thanks, from the desktop."))); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := openCapsule(t, copies[0]), openCapsule(t, copies[1])
	res, err := capsule.Merge(a, b, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Forks) != 1 {
		t.Fatalf("the merge found forks %v, want one", res.Forks)
	}

	g := openCapsule(t, out)
	rep, err := capsule.Verify(out, capsule.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := g.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	exp := goldenExpected{
		Tar: filepath.Base(out), SHA256: sha256Hex(data), AgentID: g.ID(), Holder: g.Manifest().Holder,
		Checks: problemChecks(rep), Events: rep.Events, Quarantined: rep.Quarantined,
		Agent: agent, Snapshot: snap.Entries,
		Lines: map[string]string{"newer envelope field": string(later.Line())},
		Blobs: map[string]string{"image part": logoCID},
	}
	for _, f := range res.Forks {
		exp.Forks = append(exp.Forks, goldenFork(f))
	}
	events, err := g.Journal()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		switch {
		case e.Type == "x.later.memory":
			exp.Lines["unknown type"] = string(e.Line())
		case bytes.Contains(e.Body, []byte(logoCID)) && e.Type == "message":
			exp.Lines["image message"] = string(e.Line())
		case e.Type == capsule.FileUpdatedEventType:
			var body capsule.FileUpdatedBody
			if err := json.Unmarshal(e.Body, &body); err != nil {
				t.Fatal(err)
			}
			exp.Blobs["accepted edit of "+body.Path] = body.CID
		}
	}
	return exp
}

func openCapsule(t *testing.T, path string) *capsule.Capsule {
	t.Helper()
	c, err := capsule.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestGoldenCapsule(t *testing.T) {
	if *updateGolden {
		if err := os.RemoveAll(goldenDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		exp := writeGolden(t, filepath.Join(goldenDir, "capsule.tar"))
		data, err := json.MarshalIndent(exp, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(goldenDir, "expected.json"), append(data, '\n'))
	}
	data, err := os.ReadFile(filepath.Join(goldenDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp goldenExpected
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join(goldenDir, exp.Tar), exp)
}

// TestGoldenGeneratorStillRuns writes a new golden capsule with today's
// code, in a temporary folder, and checks it the way the committed one is
// checked: the write path it takes must keep working.
func TestGoldenGeneratorStillRuns(t *testing.T) {
	out := filepath.Join(t.TempDir(), "capsule.tar")
	checkGolden(t, out, writeGolden(t, out))
}

// checkGolden checks a golden capsule tar against what reading it must give.
func checkGolden(t *testing.T, path string, exp goldenExpected) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256Hex(data) != exp.SHA256 {
		t.Fatalf("%s has sha256 %s, expected.json says %s: the golden capsule changed", path, sha256Hex(data), exp.SHA256)
	}
	g := openCapsule(t, path)
	if g.ID() != exp.AgentID || g.Manifest().Holder != exp.Holder {
		t.Errorf("agent %s held by %+v, want %s held by %+v", g.ID(), g.Manifest().Holder, exp.AgentID, exp.Holder)
	}

	t.Run("it verifies with the fork as its only problem", func(t *testing.T) {
		rep, err := capsule.Verify(path, capsule.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := problemChecks(rep); !slices.Equal(got, exp.Checks) || !slices.Equal(exp.Checks, []string{checkFork}) {
			t.Fatalf("checks %v (problems %v), want %v", got, rep.Problems, exp.Checks)
		}
		var forks []goldenFork
		for _, p := range rep.Problems {
			var fe *journal.ForkError
			if p.File != capsule.JournalFile || !errors.As(p.Err, &fe) {
				t.Fatalf("problem %v is not a fork in the journal", p)
			}
			forks = append(forks, goldenFork(fe.Fork))
		}
		if !slices.EqualFunc(forks, exp.Forks, func(a, b goldenFork) bool {
			return a.Machine == b.Machine && a.Seq == b.Seq && slices.Equal(a.IDs, b.IDs)
		}) {
			t.Errorf("forks %+v, want %+v", forks, exp.Forks)
		}
		if rep.Events != exp.Events || rep.Quarantined != exp.Quarantined {
			t.Errorf("%d events, %d quarantined; want %d and %d", rep.Events, rep.Quarantined, exp.Events, exp.Quarantined)
		}
	})

	t.Run("it reads as written", func(t *testing.T) {
		agent, err := g.Agent()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(exp.Agent)
		if got, _ := json.Marshal(agent); !bytes.Equal(got, want) {
			t.Errorf("agent.json reads as %s, want the accepted edit %s", got, want)
		}
		snap, err := g.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(snap.Entries, exp.Snapshot) {
			t.Errorf("snapshot %+v, want %+v", snap.Entries, exp.Snapshot)
		}
		events, err := g.Journal()
		if err != nil {
			t.Fatal(err)
		}
		lines := map[string]bool{}
		for _, e := range events {
			lines[string(e.Line())] = true
		}
		for what, line := range exp.Lines {
			if !lines[line] {
				t.Errorf("the %s event did not come back byte for byte: %s", what, line)
			}
		}
		for what, c := range exp.Blobs {
			h, err := capsule.ParseBlobCID(c)
			if err != nil {
				t.Fatal(err)
			}
			rc, _, err := g.OpenBlob(h)
			if err != nil {
				t.Fatalf("the blob of the %s: %v", what, err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || sha256Hex(b) != h {
				t.Errorf("the blob of the %s: %v, or it does not hash to its name", what, err)
			}
		}
		ws := filepath.Join(t.TempDir(), "ws")
		if err := g.Materialize(ws); err != nil {
			t.Fatal(err)
		}
		for p, e := range exp.Snapshot {
			if e.Type != "file" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(ws, filepath.FromSlash(p)))
			if err != nil || capsule.BlobCID(sha256Hex(b)) != e.CID {
				t.Errorf("materialized %s: %v, or not the snapshot's content", p, err)
			}
		}
	})

	t.Run("it merges with itself and with a copy of itself into the same bytes", func(t *testing.T) {
		// Unpack refuses a capsule with any problem, a fork included, so the
		// folder copy is extracted here.
		tmp := t.TempDir()
		folder, tarCopy := filepath.Join(tmp, "copy"), filepath.Join(tmp, "copy.tar")
		untar(t, data, folder)
		if err := os.WriteFile(tarCopy, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for name, other := range map[string]string{"itself": path, "a copy of its tar": tarCopy, "a copy in a folder": folder} {
			out := filepath.Join(tmp, "merged-with-"+filepath.Base(other)+".tar")
			if _, err := capsule.Merge(g, openCapsule(t, other), out); err != nil {
				t.Fatalf("merge with %s: %v", name, err)
			}
			merged, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(merged, data) {
				t.Errorf("merged with %s, it packs to other bytes", name)
			}
		}
	})

	t.Run("it packs again to the same bytes", func(t *testing.T) {
		var buf bytes.Buffer
		if err := capsule.Pack(g, &buf, capsule.PackOptions{}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), data) {
			t.Error("packing the golden capsule gives other bytes")
		}
	})
}

// untar extracts a capsule tar into a new folder, as any tar tool would.
func untar(t *testing.T, data []byte, dir string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, b)
	}
}

// addMembers has by add each of peers to the agent's members.
func addMembers(t *testing.T, d *capsule.Dir, by journal.Signer, peers ...journal.Signer) {
	t.Helper()
	for _, p := range peers {
		body, _ := json.Marshal(journal.MemberBody{Peer: p.Machine()})
		if _, err := d.AppendReserved(context.Background(), by, 0, journal.Draft{Type: journal.MemberAddedType, Body: body}); err != nil {
			t.Fatal(err)
		}
	}
}
