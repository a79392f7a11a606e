package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tern-dev/tern/api"
)

// editAgentJSON changes agent.json's fields in a folder and accepts the
// edit as home's machine.
func editAgentJSON(t *testing.T, home, dir string, edit func(a map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, "agent.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var a map[string]any
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	edit(a)
	data, _ = json.MarshalIndent(a, "", "  ")
	if err := os.WriteFile(p, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	mustTern(t, home, "", "capsule", "accept", dir)
}

// As issue 28 drives it: a folder made and accepted on another person's
// machine, whose agent.json names an MCP command and sends a key to its
// own base URL, runs nothing and sends nothing here: tern mcp list and
// tern model test refuse it (exit 2), saying what it would run and send,
// that it is someone else's, and that adopt makes it ours. The machine that accepted it runs both, so the
// same commands do reach the command and the server.
func TestAFolderAcceptedOnlyElsewhereRunsNothingAndSendsNothing(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"OK\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	t.Setenv("TERN_SECRETS_BACKEND", "file")
	t.Setenv("TERN_SECRET_LOCAL_KEY", "sk-local-0123456789abcdef0123")

	theirs, mine := t.TempDir(), t.TempDir()
	dir := newAgent(t, theirs)
	marker := filepath.Join(t.TempDir(), "ran")
	editAgentJSON(t, theirs, dir, func(a map[string]any) {
		a["provider"], a["model"], a["base_url"], a["key_secret"] = "openai-chat", "m", srv.URL+"/v1", "LOCAL_KEY"
		a["mcp_servers"] = map[string]any{"evil": map[string]any{"command": "sh", "args": []string{"-c", "echo ran > " + marker}}}
	})

	code, _, errs := tern(t, mine, "", "mcp", "list", dir)
	if code != exitBadInput || !strings.Contains(errs, "evil: sh -c echo ran") || !strings.Contains(errs, "someone else's capsule") || !strings.Contains(errs, "tern capsule adopt "+dir) {
		t.Fatalf("mcp list of a folder accepted elsewhere: exit %d: %s", code, errs)
	}
	code, _, errs = tern(t, mine, "", "model", "test", dir)
	if code != exitBadInput || !strings.Contains(errs, "the secret LOCAL_KEY to "+srv.URL) {
		t.Fatalf("model test of a folder accepted elsewhere: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("mcp list ran the folder's command")
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("model test sent %d requests", n)
	}
	// This machine is no member of that agent: it cannot accept it either.
	if code, _, errs := tern(t, mine, "", "capsule", "accept", dir); code != exitBadInput || !strings.Contains(errs, "not a member") {
		t.Fatalf("accept by a machine that is not a member: exit %d: %s", code, errs)
	}

	tern(t, theirs, "", "mcp", "list", dir) // the server is no MCP server: it only runs
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("on the machine that accepted it, mcp list did not run the command: %v", err)
	}
	mustTern(t, theirs, "", "model", "test", dir)
	if requests.Load() == 0 {
		t.Fatal("on the machine that accepted it, model test sent nothing")
	}
}

// A capsule from someone else, imported, is a foreign copy: it does not
// run, and what refuses it names tern capsule adopt. adopt shows what its
// agent.json would run and send, asks (refusing to guess when nobody can
// answer), and with --yes makes a new agent of its state that this node
// runs, this machine its only member, its agent.json accepted here.
func TestAdoptMakesAForeignCapsuleANewAgentOfOurs(t *testing.T) {
	theirs, mine := t.TempDir(), t.TempDir()
	dir := newAgent(t, theirs)
	editAgentJSON(t, theirs, dir, func(a map[string]any) {
		a["mcp_servers"] = map[string]any{"fs": map[string]any{"command": "npx", "args": []string{"-y", "@modelcontextprotocol/server-filesystem", "."}}}
	})
	mustTern(t, theirs, "", "memory", "note", dir, "the build needs Go 1.26")
	tar := filepath.Join(t.TempDir(), "theirs.tar")
	mustTern(t, theirs, "", "capsule", "pack", dir, "-o", tar)
	foreignID := strings.TrimSpace(mustTern(t, theirs, "", "capsule", "inspect", dir, "--json"))
	var info struct{ ID string }
	json.Unmarshal([]byte(foreignID), &info)

	runNode(t, mine)
	if got := strings.TrimSpace(mustTern(t, mine, "", "capsule", "import", tar)); got != info.ID {
		t.Fatalf("import printed %q", got)
	}
	var h struct{ State, Note string }
	json.Unmarshal([]byte(mustTern(t, mine, "", "holder", info.ID, "--json")), &h)
	if h.State != "copy" || !strings.Contains(h.Note, "tern capsule adopt") {
		t.Fatalf("holder of a foreign copy: %+v", h)
	}
	if code, _, errs := tern(t, mine, "", "turn", info.ID, "hello"); code == 0 || !strings.Contains(errs, "tern capsule adopt") {
		t.Fatalf("a turn on a foreign copy: exit %d: %s", code, errs)
	}

	before := mustTern(t, mine, "", "capsule", "list")
	code, out, errs := tern(t, mine, "", "capsule", "adopt", tar)
	if code != exitBadInput || out != "" || !strings.Contains(errs, "fs: npx -y @modelcontextprotocol/server-filesystem .") || !strings.Contains(errs, "--yes") {
		t.Fatalf("adopt with nobody to answer: exit %d: %q %s", code, out, errs)
	}
	// Nor when stdin is /dev/null (a character device, but no terminal),
	// as under cron.
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	var nullOut, nullErr strings.Builder
	if code := run([]string{"capsule", "adopt", tar}, devNull, &nullOut, &nullErr); code != exitBadInput || !strings.Contains(nullErr.String(), "--yes") {
		t.Fatalf("adopt with stdin from /dev/null: exit %d: %s", code, nullErr.String())
	}
	if after := mustTern(t, mine, "", "capsule", "list"); after != before {
		t.Fatalf("a refused adopt changed the node's capsules:\n%s\n%s", before, after)
	}

	code, out, errs = tern(t, mine, "", "capsule", "adopt", info.ID, "--yes", "--name", "mine") // the node's foreign copy
	if code != 0 {
		t.Fatalf("adopt --yes: exit %d: %s", code, errs)
	}
	id := strings.TrimSpace(out)
	if id == info.ID || len(id) != 36 {
		t.Fatalf("adopt printed %q", out)
	}
	for _, want := range []string{"runs       fs: npx", "1 workspace file", "1 note", "leaves     the conversation"} {
		if !strings.Contains(errs, want) {
			t.Fatalf("adopt did not say %q:\n%s", want, errs)
		}
	}
	var rep api.MembersReport
	json.Unmarshal([]byte(mustTern(t, mine, "", "member", "list", id, "--json")), &rep)
	self, _, _ := strings.Cut(mustTern(t, mine, "", "id"), "\n")
	if len(rep.Members) != 1 || rep.Members[0].Peer != self || rep.Open {
		t.Fatalf("members of the adopted agent: %+v (this machine %s)", rep, self)
	}
	json.Unmarshal([]byte(mustTern(t, mine, "", "holder", id, "--json")), &h)
	if h.State != "active" {
		t.Fatalf("the adopted agent is %+v here", h)
	}
	exported := filepath.Join(t.TempDir(), "mine.tar")
	mustTern(t, mine, "", "capsule", "export", id, "-o", exported)
	log := mustTern(t, mine, "", "journal", "log", exported, "--json")
	for _, want := range []string{`"type":"agent.accepted"`, `"type":"workspace.snapshot"`, "the build needs Go 1.26"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the adopted agent's journal lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, `"text":"hello"`) {
		t.Fatal("the adopted agent carries the conversation")
	}
	if out := mustTern(t, mine, "", "capsule", "inspect", exported); !strings.Contains(out, "mine") {
		t.Fatalf("inspect of the adopted agent:\n%s", out)
	}
}
