package capsule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tern-dev/tern/journal"
)

// AgentAcceptedType is the event with which a machine accepts agent.json
// as it is: its body is an AgentAcceptedBody naming the file's bytes. What
// agent.json would run on a machine or send from it takes effect only once
// a machine of the person's accepted it (docs/FORMAT.md, "agent.accepted").
const AgentAcceptedType = "agent.accepted"

// AgentAcceptedBody names the agent.json accepted: the sha256 of its
// bytes, 64 lowercase hex digits.
type AgentAcceptedBody struct {
	SHA256 string `json:"sha256"`
}

// Reach is what an agent.json would make a machine do beyond talking to
// its model's default API: commands it would run, keys it would send to a
// base URL the file names, and approvals it would turn off. Each entry is
// written for a person.
type Reach struct {
	Commands  []string `json:"commands,omitempty"`  // "NAME: command args…", one per stdio MCP server
	Sends     []string `json:"sends,omitempty"`     // "the secret K to URL", and each HTTP MCP server's URL
	Approvals []string `json:"approvals,omitempty"` // tools whose approval it turns off
}

// Empty reports whether the agent.json reaches nothing that needs a
// person's acceptance.
func (r Reach) Empty() bool {
	return len(r.Commands) == 0 && len(r.Sends) == 0 && len(r.Approvals) == 0
}

// String says what the agent.json would do, in one line.
func (r Reach) String() string {
	var parts []string
	if len(r.Commands) > 0 {
		parts = append(parts, "run "+strings.Join(r.Commands, "; "))
	}
	if len(r.Sends) > 0 {
		parts = append(parts, "send "+strings.Join(r.Sends, "; "))
	}
	if len(r.Approvals) > 0 {
		parts = append(parts, "run "+strings.Join(r.Approvals, ", ")+" without asking")
	}
	return strings.Join(parts, ", and ")
}

// Reach returns what a would run and send (see Reach): every MCP server
// (a stdio server's command; an HTTP server's URL, with the secrets it
// names), a base_url given with a key_secret (the model's and the memory
// embedder's), and every tool whose approval it turns off.
func (a Agent) Reach() Reach {
	var r Reach
	for _, name := range slices.Sorted(maps.Keys(a.MCPServers)) {
		s := a.MCPServers[name]
		with := ""
		if len(s.Secrets) > 0 {
			with = " with the secrets " + strings.Join(s.Secrets, ", ")
		}
		if s.Command != "" {
			r.Commands = append(r.Commands, strings.TrimSpace(fmt.Sprintf("%s: %s %s", name, s.Command, strings.Join(s.Args, " ")))+with)
		} else {
			r.Sends = append(r.Sends, fmt.Sprintf("requests to the MCP server %s at %s%s", name, s.URL, with))
		}
	}
	if a.BaseURL != "" && a.KeySecret != "" {
		r.Sends = append(r.Sends, fmt.Sprintf("the secret %s to %s (the model)", a.KeySecret, a.BaseURL))
	}
	if m := a.Memory; m != nil && m.BaseURL != "" && m.KeySecret != "" {
		r.Sends = append(r.Sends, fmt.Sprintf("the secret %s to %s (the memory embedder)", m.KeySecret, m.BaseURL))
	}
	for _, t := range a.Tools {
		if t.Approval != nil && !*t.Approval && DefaultApproval(t) {
			r.Approvals = append(r.Approvals, t.Name)
		}
	}
	return r
}

// DefaultApproval says whether a call of t needs a person's approval when
// agent.json says nothing: package tool sets it to the built-in tools'
// defaults. Without it, and for any other tool, a call needs approval
// unless the tool's effect is pure. Reach counts an approval turned off
// only where this says one is needed.
var DefaultApproval = func(t Tool) bool { return t.Effect != "pure" }

// ErrNotAccepted means agent.json would run commands or send keys (see
// Reach) and no machine of the person's accepted it.
var ErrNotAccepted = errors.New("not accepted by a machine of yours")

// NotAcceptedError is ErrNotAccepted for a person: which capsule, what its
// agent.json would do, and how to accept it.
type NotAcceptedError struct {
	Capsule string // the folder, tar or agent id, as the person named it
	Reach   Reach
	Foreign bool // none of the capsule's members is ours (see Foreign)
	Tar     bool // the capsule is a tar, which accept does not write
}

func (e *NotAcceptedError) Error() string {
	what := fmt.Sprintf("agent.json of %s would %s, and neither this machine nor a paired peer accepted it", e.Capsule, e.Reach)
	switch {
	case e.Foreign:
		return what + fmt.Sprintf(": it is someone else's capsule (none of its members is this machine or a paired peer), so no machine of yours can accept it; read it, and if you trust it, tern capsule adopt %s makes a new agent of its state", e.Capsule)
	case e.Tar:
		return what + fmt.Sprintf(": read it, and if you trust it, unpack the tar (tern capsule unpack %s DIR) and run tern capsule accept DIR", e.Capsule)
	}
	return what + fmt.Sprintf(": read it, and if you trust it, run tern capsule accept %s", e.Capsule)
}

func (e *NotAcceptedError) Unwrap() error { return ErrNotAccepted }

// AgentSum is the sha256 of agent.json's bytes, as agent.accepted names it.
func AgentSum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// AcceptedBy reports whether a machine for which ours is true accepted the
// agent.json whose sha256 is sum: an agent.accepted event of its, on the
// readable lines of events, names it.
func AcceptedBy(sum string, events []*journal.Event, ours func(machine string) bool) bool {
	view, _ := journal.Readable(events)
	for _, e := range view {
		if e.Type == AgentAcceptedType && ours(e.Machine) && acceptedSum(e) == sum {
			return true
		}
	}
	return false
}

// acceptedSum reads an agent.accepted body: its sha256, or "" for a body
// of another shape.
func acceptedSum(e *journal.Event) string {
	var b AgentAcceptedBody
	if json.Unmarshal(e.Body, &b) != nil || len(b.SHA256) != 64 || strings.Trim(b.SHA256, "0123456789abcdef") != "" {
		return ""
	}
	return b.SHA256
}

// TrustedAgent returns agent.json as the folder holds it, unless it would
// run commands or send keys (Reach) and no machine for which ours is true
// (this machine and its paired peers) accepted these bytes: then a
// *NotAcceptedError naming the capsule as name. What lists a folder's MCP
// servers or tests its model reads it through this.
func (c *Capsule) TrustedAgent(name string, ours func(machine string) bool) (Agent, error) {
	data, err := c.ReadFile(AgentFile)
	if err != nil {
		return Agent{}, err
	}
	_, tar := c.src.(*tarSource)
	return trusted(data, c.ID(), name, tar, ours, c.Journal)
}

// RunnableAgent is AcceptedAgent, then TrustedAgent's rule, with the
// events of the open journal: what runs the agent reads it so.
func (d *Dir) RunnableAgent(name string, ours func(machine string) bool) (Agent, error) {
	if _, err := d.AcceptedAgent(); err != nil {
		return Agent{}, err
	}
	data, err := d.ReadFile(AgentFile)
	if err != nil {
		return Agent{}, err
	}
	return trusted(data, d.ID(), name, false, ours, d.Events)
}

func trusted(data []byte, agent, name string, tar bool, ours func(string) bool, events func() ([]*journal.Event, error)) (Agent, error) {
	a, err := ParseAgent(data)
	if err != nil {
		return Agent{}, err
	}
	r := a.Reach()
	if r.Empty() {
		return a, nil
	}
	evs, err := events()
	if err != nil {
		return Agent{}, err
	}
	if !AcceptedBy(AgentSum(data), evs, ours) {
		return Agent{}, &NotAcceptedError{Capsule: name, Reach: r, Foreign: Foreign(evs, agent, ours), Tar: tar}
	}
	return a, nil
}

// Foreign reports whether the capsule belongs to someone else: none of
// its members is a machine for which ours is true (this machine and its
// paired peers). Of an agent from before members, whose journal names
// none, the machines that wrote its events stand for them. A foreign copy
// never runs here; tern capsule adopt makes a new agent of its state.
func Foreign(events []*journal.Event, agent string, ours func(machine string) bool) bool {
	m := journal.MembersOf(agent, events)
	if !m.Open() {
		for _, x := range m.List() {
			if !x.Removed && ours(x.Peer) {
				return false
			}
		}
		return true
	}
	for _, e := range events {
		if ours(e.Machine) {
			return false
		}
	}
	return true
}
