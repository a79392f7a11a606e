package capsule

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tern-dev/tern/internal/atomicfile"
)

// crashAfterCommit performs the first half of an update of agent.json:
// the new content as agent.json.next and the manifest that commits it, but not the
// final rename, as a crash right after the commit point leaves it.
func crashAfterCommit(t *testing.T, dir string, agent []byte) {
	t.Helper()
	c := mustOpen(t, dir)
	if err := atomicfile.WriteFile(filepath.Join(dir, filepath.FromSlash(AgentFile))+nextSuffix, agent, 0o644); err != nil {
		t.Fatal(err)
	}
	m := *c.Manifest()
	m.Files = map[string]FileEntry{}
	for k, v := range c.Manifest().Files {
		m.Files[k] = v
	}
	m.Files[AgentFile] = entryOf(agent)
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func logTo(buf *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(buf, nil)) }

func TestACrashAfterTheCommitPointLeavesTheNewCapsule(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	agent, _ := DefaultAgent("renamed").Encode()
	crashAfterCommit(t, dir, agent)

	rep := mustVerify(t, dir)
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "interrupted update") {
		t.Errorf("notes = %v", rep.Notes)
	}
	got, err := mustOpen(t, dir).ReadFile(AgentFile)
	if err != nil || !bytes.Equal(got, agent) {
		t.Fatalf("a reader sees %q, %v; want the committed agent.json", got, err)
	}
	packed := filepath.Join(t.TempDir(), "a.tar")
	packTo(t, dir, packed, PackOptions{})
	mustVerify(t, packed)

	var log bytes.Buffer
	d, err := OpenDir(context.Background(), dir, logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if !strings.Contains(log.String(), "completing an update") {
		t.Errorf("recovery was not logged: %s", log.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(AgentFile))); !bytes.Equal(b, agent) {
		t.Errorf("agent.json after recovery = %q", b)
	}
	if rep := mustVerify(t, dir); len(rep.Notes) != 0 {
		t.Errorf("notes after recovery: %v", rep.Notes)
	}
}

func TestACrashBeforeTheCommitPointLeavesTheOldCapsule(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	next := filepath.Join(dir, filepath.FromSlash(NotesFile)) + nextSuffix
	os.WriteFile(next, []byte("never committed"), 0o644)
	os.WriteFile(filepath.Join(dir, "memory", atomicfile.TempPrefix+"123"), []byte("half a file"), 0o644)
	blob := bytes.Repeat([]byte("b"), 10)
	sum := entryOf(blob).SHA256
	os.WriteFile(filepath.Join(dir, filepath.FromSlash(BlobPath(sum))), blob, 0o644)

	rep := mustVerify(t, dir)
	if len(rep.Notes) != 3 {
		t.Errorf("notes = %v, want three (update, temp file, blob)", rep.Notes)
	}
	if got, _ := mustOpen(t, dir).ReadFile(NotesFile); len(got) != 0 {
		t.Fatalf("a reader sees the uncommitted notes %q", got)
	}
	var log bytes.Buffer
	d, err := OpenDir(context.Background(), dir, logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	for _, p := range []string{next, filepath.Join(dir, "memory", atomicfile.TempPrefix+"123")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s survived recovery", p)
		}
	}
	if !strings.Contains(log.String(), "discarding an update") || !strings.Contains(log.String(), "temporary file") {
		t.Errorf("log = %s", log.String())
	}
}

func TestATornJournalTailIsANoteAndTheNextAppendRepairsIt(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	jpath := filepath.Join(dir, filepath.FromSlash(JournalFile))
	f, _ := os.OpenFile(jpath, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte(`{"body":{"role":"us`))
	f.Close()

	rep := mustVerify(t, dir)
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "torn last line") {
		t.Fatalf("notes = %v", rep.Notes)
	}
	var log bytes.Buffer
	d, err := OpenDir(context.Background(), dir, logTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Append(context.Background(), s, 0, userMessage(t, "after the crash")); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if !strings.Contains(strings.ToLower(log.String()), "torn") {
		t.Errorf("the repair was not logged: %s", log.String())
	}
	if rep := mustVerify(t, dir); len(rep.Notes) != 0 || rep.Events != 6 {
		t.Errorf("after repair: %+v", rep)
	}
}

func TestEventsAppendedAfterTheSealVerifyAsANote(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	before, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	d, _ := OpenDir(context.Background(), dir, nil)
	if _, err := d.Append(context.Background(), s, 0, userMessage(t, "unsealed")); err != nil {
		t.Fatal(err)
	}
	d.Close()
	// Put the old manifest back: the state a crash between append and seal leaves.
	os.WriteFile(filepath.Join(dir, ManifestFile), before, 0o644)
	rep := mustVerify(t, dir)
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "after the manifest's seal") {
		t.Fatalf("notes = %v", rep.Notes)
	}
	// But a line that is not a valid event there is damage.
	f, _ := os.OpenFile(filepath.Join(dir, filepath.FromSlash(JournalFile)), os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte("{\"not\":\"an event\"}\n"))
	f.Close()
	rep, _ = Verify(dir, VerifyOptions{})
	if !namesFile(rep, JournalFile) {
		t.Fatalf("a bad unsealed line passed: %+v", rep)
	}
}

// A reader that finds a file other than the manifest lists it, and then no
// NAME.next because the update renamed it over NAME meanwhile, reads the
// committed content, not the old.
func TestAReaderBetweenACommitAndItsRenameReadsTheCommittedFile(t *testing.T) {
	dir := fullCapsule(t, newSigner(t))
	final := filepath.Join(dir, filepath.FromSlash(NotesFile))
	committed := []byte("# Notes\n\nwritten by the update\n")
	if err := os.WriteFile(final+nextSuffix, committed, 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	m.Files[NotesFile] = entryOf(committed)
	if data, err = m.Encode(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644); err != nil { // the commit point
		t.Fatal(err)
	}
	c := mustOpen(t, dir)
	betweenReads = func() { os.Rename(final+nextSuffix, final) } // the update installs it
	defer func() { betweenReads = nil }()
	got, err := c.ReadFile(NotesFile)
	if err != nil || !bytes.Equal(got, committed) {
		t.Fatalf("ReadFile = %q, %v; want the committed %q", got, err, committed)
	}
}
