package node

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tern-dev/tern/capsule"
)

// request sends one API request and returns its status and body.
func request(t *testing.T, n *Node, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, n.info.API+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+n.info.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// A capsule none of whose members is this machine or a paired peer is a
// foreign copy: imported with a manifest that names this node its holder,
// it still never runs here, and what refuses it says how to make it ours.
func TestAForeignCapsuleNeverRunsWhateverItsManifestSays(t *testing.T) {
	n := startNode(t, t.TempDir())
	stranger, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "agent")
	c, err := capsule.New(dir, "theirs", stranger)
	if err != nil {
		t.Fatal(err)
	}
	agent := c.ID()
	c.Close()
	d, err := capsule.OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The manifest, which nobody signs, says this node holds it.
	if err := d.SetHolder(capsule.Holder{Peer: n.id.Machine()}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, _, err := n.Import(dir); err != nil {
		t.Fatal(err)
	}
	rep, err := n.Holder(context.Background(), agent)
	if err != nil {
		t.Fatal(err)
	}
	if rep.State != "copy" || !strings.Contains(rep.Note, "foreign") || !strings.Contains(rep.Note, "tern capsule adopt") {
		t.Fatalf("holder report of a foreign copy: %+v", rep.HolderState)
	}
	code, body := request(t, n, "POST", "/v1/agents/"+agent+"/sessions", "")
	if code != http.StatusConflict || !strings.Contains(body, "tern capsule adopt") {
		t.Fatalf("a session on a foreign copy: %d %s", code, body)
	}
	if _, err := n.Resolve(context.Background(), agent, "resume"); err == nil || !strings.Contains(err.Error(), "foreign") {
		t.Fatalf("resolve --resume of a foreign copy: %v", err)
	}
	if m, _ := n.store.Members(agent); m.Has(n.id.Machine()) {
		t.Fatal("the node named itself a member of someone else's agent")
	}
}

// An agent.json that runs a command, accepted only by a member that is
// not one of this person's machines (not this node, not a paired peer),
// runs nothing here: a turn is refused saying what it would run and how
// to accept it; once this node accepts it, the refusal is gone.
func TestARuntimeRunsOnlyWhatAMachineOfOursAccepted(t *testing.T) {
	n := startNode(t, t.TempDir())
	other, err := NewIdentity() // a member, never paired
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "agent")
	c, err := capsule.New(dir, "ours", n.id)
	if err != nil {
		t.Fatal(err)
	}
	agent := c.ID()
	c.Close()
	ctx := context.Background()
	d, err := capsule.OpenDir(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddMember(ctx, n.id, other.Machine()); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	a := capsule.DefaultAgent("ours")
	a.MCPServers = map[string]capsule.MCPServer{"evil": {Command: "sh", Args: []string{"-c", "echo ran > " + marker}}}
	data, _ := a.Encode()
	if err := os.WriteFile(filepath.Join(dir, capsule.AgentFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AcceptEdits(ctx, other); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, _, err := n.Import(dir); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the node runs the agent", func() bool { return n.runs(agent) })

	code, body := request(t, n, "POST", "/v1/agents/"+agent+"/sessions", "")
	if code != http.StatusConflict || !strings.Contains(body, "echo ran") || !strings.Contains(body, "tern capsule accept") {
		t.Fatalf("a session of an agent.json only a stranger accepted: %d %s", code, body)
	}
	if _, err := n.rt.MCPServers(ctx, agent); err == nil || !strings.Contains(err.Error(), "neither this machine nor a paired peer accepted it") {
		t.Fatalf("mcp list through the node: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran")
	}

	if _, err := n.Accept(ctx, agent); err != nil {
		t.Fatal(err)
	}
	if _, err := n.rt.MCPServers(ctx, agent); err != nil {
		t.Fatalf("mcp list once accepted here: %v", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("accepted here, the server's command still did not run: %v", err)
	}
}
