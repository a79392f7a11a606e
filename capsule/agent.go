package capsule

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"regexp"
)

// Agent is agent.json: what the agent is, which model it talks to by
// default and which tools it may call. Fields a later tern adds are refused
// by ParseAgent until this one knows them.
type Agent struct {
	Name         string `json:"name"`
	Instructions string `json:"instructions"`
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	Tools        []Tool `json:"tools"`
}

// Tool is one tool definition: a name, what it does, a JSON Schema for its
// arguments and its effect class (pure, idempotent or at-most-once).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Effect      string          `json:"effect,omitempty"`
}

// DefaultAgent is the agent.json of a new capsule: the built-in offline
// model and no tools.
func DefaultAgent(name string) Agent {
	return Agent{
		Name:         name,
		Instructions: "You are a helpful assistant.",
		Provider:     "offline",
		Model:        "tern-offline",
		Tools:        []Tool{},
	}
}

// Encode returns agent.json's bytes: indented JSON for people, ending in a newline.
func (a Agent) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseAgent reads agent.json strictly.
func ParseAgent(data []byte) (Agent, error) {
	var a Agent
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("agent.json: %v", err)
	}
	if a.Name == "" {
		return a, fmt.Errorf("agent.json: name is empty")
	}
	for i, t := range a.Tools {
		if t.Name == "" {
			return a, fmt.Errorf("agent.json: tools[%d] has no name", i)
		}
		switch t.Effect {
		case "", "pure", "idempotent", "at-most-once":
		default:
			return a, fmt.Errorf("agent.json: tool %q: effect %q is not pure, idempotent or at-most-once", t.Name, t.Effect)
		}
	}
	return a, nil
}

var agentIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// NewAgentID returns a fresh random agent id: a lowercase UUID (version 4).
func NewAgentID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ValidAgentID reports whether id is a well-formed agent id.
func ValidAgentID(id string) bool { return agentIDPattern.MatchString(id) }

func checkAgentID(id string) error {
	if !agentIDPattern.MatchString(id) {
		return fmt.Errorf("agent id %q is not a lowercase UUID", id)
	}
	return nil
}
