package capsule

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tern-dev/tern/journal"
)

func TestReachSaysWhatAnAgentRunsAndSends(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		name string
		edit func(a *Agent)
		want Reach
	}{
		{"the default agent", func(a *Agent) {}, Reach{}},
		{"a key to the provider's own API", func(a *Agent) { a.Provider, a.Model, a.KeySecret = "anthropic", "m", "K" }, Reach{}},
		{"a base URL without a key", func(a *Agent) { a.Provider, a.Model, a.BaseURL = "openai-chat", "m", "http://h/v1" }, Reach{}},
		{"a key to a base URL", func(a *Agent) { a.Provider, a.Model, a.BaseURL, a.KeySecret = "openai-chat", "m", "http://h/v1", "K" },
			Reach{Sends: []string{"the secret K to http://h/v1 (the model)"}}},
		{"the embedder's key to a base URL", func(a *Agent) {
			a.Memory = &MemorySettings{Embedder: "openai", Model: "e", BaseURL: "http://e/v1", KeySecret: "E"}
		}, Reach{Sends: []string{"the secret E to http://e/v1 (the memory embedder)"}}},
		{"MCP servers", func(a *Agent) {
			a.MCPServers = map[string]MCPServer{
				"b": {URL: "https://mcp.example/mcp", Secrets: []string{"T"}},
				"a": {Command: "npx", Args: []string{"-y", "srv"}},
			}
		}, Reach{Commands: []string{"a: npx -y srv"}, Sends: []string{"requests to the MCP server b at https://mcp.example/mcp with the secrets T"}}},
		{"an approval turned off", func(a *Agent) { a.Tools = []Tool{{Name: "deploy", Effect: "at-most-once", Approval: &no}} },
			Reach{Approvals: []string{"deploy"}}},
		{"an approval a pure tool never needed", func(a *Agent) { a.Tools = []Tool{{Name: "look", Effect: "pure", Approval: &no}} }, Reach{}},
		{"an approval asked for", func(a *Agent) { a.Tools = []Tool{{Name: "deploy", Approval: &yes}} }, Reach{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := DefaultAgent("x")
			tc.edit(&a)
			if got := a.Reach(); !slices.Equal(got.Commands, tc.want.Commands) || !slices.Equal(got.Sends, tc.want.Sends) || !slices.Equal(got.Approvals, tc.want.Approvals) {
				t.Fatalf("Reach() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// An agent.json that runs a command counts once a machine of the person's
// accepted exactly its bytes; another machine's word, or an acceptance of
// other bytes, does not. Accepting again as it is needs no edit.
func TestAnAgentJSONThatRunsACommandNeedsOneOfOurMachinesToAcceptIt(t *testing.T) {
	me, them := newSigner(t), newSigner(t)
	dir := emptyCapsule(t, me, "agent")
	addMember(t, dir, me, them)
	ours := func(m string) bool { return m == me.Machine() }
	editFile(t, dir, AgentFile, func([]byte) []byte {
		a := DefaultAgent("agent")
		a.MCPServers = map[string]MCPServer{"x": {Command: "run-me"}}
		data, _ := a.Encode()
		return data
	})
	trust := func() error {
		c := mustOpen(t, dir)
		defer c.Close()
		_, err := c.TrustedAgent(dir, ours)
		return err
	}
	var na *NotAcceptedError
	if err := trust(); !errors.As(err, &na) || !strings.Contains(err.Error(), "run x: run-me") {
		t.Fatalf("an edit nobody accepted: %v", err)
	}
	if _, err := accept(t, dir, them); err != nil {
		t.Fatal(err)
	}
	if err := trust(); !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("accepted by a machine that is not ours: %v", err)
	}
	got, err := accept(t, dir, me)
	if err != nil || !slices.Equal(got, []string{AgentFile + " (as it is)"}) {
		t.Fatalf("accepting it as it is: %v %v", got, err)
	}
	if err := trust(); err != nil {
		t.Fatalf("accepted by this machine: %v", err)
	}
	if got, err := accept(t, dir, me); err != nil || len(got) != 0 {
		t.Fatalf("accepting it again: %v %v", got, err)
	}
	editFile(t, dir, AgentFile, func(b []byte) []byte { return []byte(strings.Replace(string(b), "run-me", "run-me-too", 1)) })
	if err := trust(); !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("other bytes than those accepted: %v", err)
	}
}

func TestACapsuleIsForeignWhenNoneOfItsMembersIsOurs(t *testing.T) {
	me, them := newSigner(t), newSigner(t)
	ours := func(m string) bool { return m == me.Machine() }
	events := func(dir string) []*journal.Event {
		c := mustOpen(t, dir)
		defer c.Close()
		evs, err := c.Journal()
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	theirs := emptyCapsule(t, them, "theirs")
	if !Foreign(events(theirs), mustOpen(t, theirs).ID(), ours) {
		t.Fatal("a capsule only they are members of is not foreign")
	}
	addMember(t, theirs, them, me)
	if Foreign(events(theirs), mustOpen(t, theirs).ID(), ours) {
		t.Fatal("a capsule this machine is a member of is foreign")
	}
	// An agent from before members: its writers stand for its members.
	legacy := filepath.Join(t.TempDir(), "legacy")
	c, err := NewLegacy(legacy, "old", them.Machine())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if !Foreign(events(legacy), c.ID(), ours) {
		t.Fatal("a legacy capsule nobody of ours wrote is not foreign")
	}
	d, err := OpenDir(context.Background(), legacy, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Append(context.Background(), me, 0, userMessage(t, "mine too")); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if Foreign(events(legacy), c.ID(), ours) {
		t.Fatal("a legacy capsule this machine wrote in is foreign")
	}
}

// A hand edit of the environment spec (the secrets a shell call gets) is
// not read by what runs calls until it is accepted.
func TestAnEnvironmentEditCountsOnceAccepted(t *testing.T) {
	s := newSigner(t)
	dir := emptyCapsule(t, s, "agent")
	editFile(t, dir, EnvironmentFile, func([]byte) []byte {
		return []byte(`{"workdir":"workspace","packages":[],"env":{},"secrets":["GITHUB_TOKEN"]}` + "\n")
	})
	read := func() (EnvSpec, error) {
		c := mustOpen(t, dir)
		defer c.Close()
		return c.AcceptedEnvironment()
	}
	if _, err := read(); !errors.Is(err, ErrUnaccepted) {
		t.Fatalf("an edit not accepted: %v", err)
	}
	if _, err := accept(t, dir, s); err != nil {
		t.Fatal(err)
	}
	if spec, err := read(); err != nil || !slices.Equal(spec.Secrets, []string{"GITHUB_TOKEN"}) {
		t.Fatalf("once accepted: %+v %v", spec, err)
	}
}
