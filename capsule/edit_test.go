package capsule

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func editFile(t *testing.T, dir, name string, edit func([]byte) []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func accept(t *testing.T, dir string, s *testSigner) ([]string, error) {
	t.Helper()
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	return d.AcceptEdits(context.Background(), s)
}

func TestAnAcceptedEditOfTheAgentVerifiesAndIsJournaled(t *testing.T) {
	s := newSigner(t)
	dir := fullCapsule(t, s)
	editFile(t, dir, AgentFile, func(b []byte) []byte {
		b = bytes.Replace(b, []byte(`"offline"`), []byte(`"anthropic"`), 1)
		return bytes.Replace(b, []byte(`"tern-offline"`), []byte(`"claude-sonnet-4-5"`), 1)
	})
	if rep, _ := Verify(dir, VerifyOptions{}); rep.OK() {
		t.Fatal("an unaccepted edit verified")
	}
	names, err := accept(t, dir, s)
	if err != nil || len(names) != 1 || names[0] != AgentFile {
		t.Fatalf("accept: %v %v", names, err)
	}
	mustVerify(t, dir)
	a, _ := mustOpen(t, dir).Agent()
	if a.Model != "claude-sonnet-4-5" {
		t.Fatalf("model = %q", a.Model)
	}
	evs, _ := mustOpen(t, dir).Journal()
	if last := evs[len(evs)-1]; last.Type != FileUpdatedEventType || !strings.Contains(string(last.Body), AgentFile) {
		t.Fatalf("last event %s %s", last.Type, last.Body)
	}
	if names, err := accept(t, dir, s); err != nil || len(names) != 0 {
		t.Fatalf("accepting again: %v %v", names, err)
	}
}

func TestAcceptRefusesAnInvalidEditAndChangesNothing(t *testing.T) {
	s := newSigner(t)
	cases := []struct {
		name, file string
		edit       func([]byte) []byte
		want       string
	}{
		{"agent.json that is not JSON", AgentFile, func([]byte) []byte { return []byte("{") }, AgentFile},
		{"a secret under env", EnvironmentFile, func([]byte) []byte {
			return []byte(`{"workdir":"w","packages":[],"env":{"GITHUB_TOKEN":"ghp_x"},"secrets":[]}`)
		}, "secrets"},
		{"an edit of a file tern writes", SnapshotFile, func(b []byte) []byte { return append(b, ' ') }, "only"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := fullCapsule(t, s)
			before, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
			jbefore, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(JournalFile)))
			editFile(t, dir, tc.file, tc.edit)
			_, err := accept(t, dir, s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("accept: %v, want an error mentioning %q", err, tc.want)
			}
			after, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
			jafter, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(JournalFile)))
			if !bytes.Equal(before, after) || !bytes.Equal(jbefore, jafter) {
				t.Fatal("a refused accept changed the manifest or the journal")
			}
		})
	}
}

func TestTheLatestAcceptedEditWinsAMerge(t *testing.T) {
	a, b, laptop, desktop := diverge(t)
	editFile(t, a, AgentFile, func(b []byte) []byte {
		return bytes.Replace(b, []byte(`helpful assistant`), []byte(`laptop assistant`), 1)
	})
	if _, err := accept(t, a, laptop); err != nil {
		t.Fatal(err)
	}
	editFile(t, b, AgentFile, func(b []byte) []byte {
		return bytes.Replace(b, []byte(`helpful assistant`), []byte(`desktop assistant`), 1)
	})
	if _, err := accept(t, b, desktop); err != nil {
		t.Fatal(err)
	}
	// b made more events (see diverge), so its edit has the higher clock.
	var packs [][]byte
	for _, order := range [][2]string{{a, b}, {b, a}} {
		out := filepath.Join(t.TempDir(), "m")
		merge(t, order[0], order[1], out)
		ag, err := mustOpen(t, out).Agent()
		if err != nil {
			t.Fatal(err)
		}
		if ag.Instructions != "You are a desktop assistant." {
			t.Fatalf("merged instructions %q", ag.Instructions)
		}
		packs = append(packs, packTo(t, out, filepath.Join(t.TempDir(), "m.tar"), PackOptions{}))
	}
	if !bytes.Equal(packs[0], packs[1]) {
		t.Fatal("merge orders differ")
	}
}

func TestCopiesWithDifferentUnacceptedFilesDoNotMerge(t *testing.T) {
	a, b, _, _ := diverge(t)
	// agent.json written without the file.updated event an accept makes:
	// there is no latest edit to take.
	writeAgentIn := func(dir, name string) {
		d, _ := OpenDir(context.Background(), dir, nil)
		defer d.Close()
		data, _ := DefaultAgent(name).Encode()
		if err := d.commit(map[string][]byte{AgentFile: data}, nil); err != nil {
			t.Fatal(err)
		}
	}
	writeAgentIn(a, "one")
	writeAgentIn(b, "two")
	_, err := Merge(mustOpen(t, a), mustOpen(t, b), filepath.Join(t.TempDir(), "m"))
	if err == nil || !strings.Contains(err.Error(), AgentFile) {
		t.Fatalf("merge of differing agent definitions: %v", err)
	}
}
