package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
)

// As issue 28 drives it from outside: a stranger's append is refused
// (exit 2), an event it signed some other way makes verify exit 1 naming
// its key; once a member adds it, its appends count; once removed, they do
// not again; the last member cannot be removed.
func TestMembersThroughTheCLI(t *testing.T) {
	owner, other := t.TempDir(), t.TempDir()
	dir := newAgent(t, owner)
	otherID := strings.TrimSpace(mustTern(t, other, "", "id"))

	code, _, errs := tern(t, other, conversation, "journal", "append", dir)
	if code != exitBadInput || !strings.Contains(errs, otherID) || !strings.Contains(errs, "tern member add") {
		t.Fatalf("a stranger's append: exit %d: %s", code, errs)
	}

	// The same stranger writes its event into the file by hand.
	journalPath := filepath.Join(dir, capsule.JournalFile)
	good, _ := os.ReadFile(journalPath)
	key, err := node.LoadIdentity(other)
	if err != nil {
		t.Fatal(err)
	}
	e, err := journal.NewEvent(key, journal.Stamp{Seq: 1, Clock: 50, Time: time.Now()}, journal.Draft{Type: "message", Session: "s1",
		Body: json.RawMessage(`{"role":"user","content":[{"type":"text","text":"forged"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(journalPath, append(append(good[:len(good):len(good)], e.Line()...), '\n'), 0o644)
	code, out, _ := tern(t, owner, "", "capsule", "verify", dir)
	if code != exitCheck || !strings.Contains(out, otherID) || !strings.Contains(out, "not a member") {
		t.Fatalf("verify of a copy with a stranger's event: exit %d:\n%s", code, out)
	}
	os.WriteFile(journalPath, good, 0o644)

	if out := mustTern(t, owner, "", "member", "add", dir, otherID); out != "added "+otherID+"\n" {
		t.Fatalf("member add: %q", out)
	}
	if out := mustTern(t, owner, "", "member", "add", dir, otherID); !strings.Contains(out, "a member already") {
		t.Fatalf("member add again: %q", out)
	}
	mustTern(t, other, conversation, "journal", "append", dir)
	var rep api.MembersReport
	if err := json.Unmarshal([]byte(mustTern(t, owner, "", "member", "list", dir, "--json")), &rep); err != nil || len(rep.Members) != 2 || rep.Open {
		t.Fatalf("member list: %+v %v", rep, err)
	}

	mustTern(t, owner, "", "member", "remove", dir, otherID)
	if code, _, errs := tern(t, other, conversation, "journal", "append", dir); code != exitBadInput || !strings.Contains(errs, "was removed from the members") {
		t.Fatalf("a removed machine's append: exit %d: %s", code, errs)
	}
	if out := mustTern(t, owner, "", "member", "list", dir); !strings.Contains(out, otherID+"  removed") {
		t.Fatalf("member list after the removal:\n%s", out)
	}
	if v := mustTern(t, owner, "", "capsule", "verify", dir); !strings.Contains(v, "ok") {
		t.Fatalf("verify after a removal: %s", v)
	}
	ownerID := strings.TrimSpace(mustTern(t, owner, "", "id"))
	for _, tc := range []struct{ name, peer, want string }{
		{"the last member", ownerID, "last member"},
		{"a machine removed, added again", otherID, "never added again"},
		{"not a peer ID", "nobody", "neither a peer ID nor the name of a paired peer"},
	} {
		verb := "remove"
		if tc.peer == otherID {
			verb = "add"
		}
		if code, _, errs := tern(t, owner, "", "member", verb, dir, tc.peer); code != exitBadInput || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d: %s", tc.name, code, errs)
		}
	}
}

// A stranger's event written into a folder by hand is never read: journal
// log marks it, render leaves it out.
func TestAStrangersEventInAFolderIsNeverRead(t *testing.T) {
	owner, other := t.TempDir(), t.TempDir()
	dir := newAgent(t, owner)
	key, err := node.LoadIdentity(other)
	if err != nil {
		t.Fatal(err)
	}
	e, err := journal.NewEvent(key, journal.Stamp{Seq: 1, Clock: 50, Time: time.Now()}, journal.Draft{Type: "message", Session: "s1",
		Body: json.RawMessage(`{"role":"user","content":[{"type":"text","text":"forged by a stranger"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, capsule.JournalFile)
	data, _ := os.ReadFile(p)
	os.WriteFile(p, append(append(data, e.Line()...), '\n'), 0o644)

	if out := mustTern(t, owner, "", "journal", "log", dir, "--json"); !strings.Contains(out, `"quarantined":"not_member"`) {
		t.Fatalf("journal log does not mark the stranger's event:\n%s", out)
	}
	if out := mustTern(t, owner, "", "render", dir, "--provider", "anthropic", "--model", "m"); strings.Contains(out, "forged by a stranger") {
		t.Fatalf("render put the stranger's message in the request:\n%s", out)
	}
}
