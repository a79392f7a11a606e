package capsule

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Agent is agent.json: what the agent is, which model it talks to by
// default and which tools it may call. Fields a later tern adds are refused
// by ParseAgent until this one knows them.
type Agent struct {
	Name         string `json:"name"`
	Instructions string `json:"instructions"`
	// Provider is the wire protocol of the model API (Providers).
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// BaseURL is the API's base URL in its official SDK's convention;
	// empty means the provider's default (docs/PROVIDERS.md).
	BaseURL string `json:"base_url,omitempty"`
	// KeySecret is the name of the secret that holds the API key (tern
	// secret set NAME), never the key; empty sends no key.
	KeySecret string `json:"key_secret,omitempty"`
	Tools     []Tool `json:"tools"`
}

// Providers are the names agent.json's provider may take: the wire
// protocols tern speaks, and the built-in offline model.
var Providers = []string{"openai-chat", "openai-responses", "anthropic", "gemini", "ollama", "offline"}

// OfflineModel is the one model of the offline provider.
const OfflineModel = "tern-offline"

var secretName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

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
		Model:        OfflineModel,
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
	if err := a.checkModel(); err != nil {
		return a, fmt.Errorf("agent.json: %v", err)
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

// checkModel checks provider, model, base_url and key_secret.
func (a Agent) checkModel() error {
	if !slices.Contains(Providers, a.Provider) {
		return fmt.Errorf("provider %q is not one of %s", a.Provider, strings.Join(Providers, ", "))
	}
	switch {
	case a.Model == "":
		return fmt.Errorf("model is empty: name the %s model to use", a.Provider)
	case strings.TrimSpace(a.Model) != a.Model || strings.ContainsAny(a.Model, " \t\n"):
		return fmt.Errorf("model %q has spaces in it", a.Model)
	case a.Provider == "offline" && a.Model != OfflineModel:
		return fmt.Errorf("model %q: the offline provider has one model, %q", a.Model, OfflineModel)
	}
	if a.BaseURL != "" {
		u, err := url.Parse(a.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("base_url %q is not an http:// or https:// URL", a.BaseURL)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("base_url %q carries credentials or a query: give the API's base URL only; a key goes in a secret (key_secret)", redactURL(u))
		}
		if a.Provider == "offline" {
			return fmt.Errorf("base_url: the offline provider runs in tern and has none")
		}
	}
	if a.KeySecret != "" && (!secretName.MatchString(a.KeySecret) || looksLikeKey(a.KeySecret)) {
		return fmt.Errorf("key_secret is not a secret name (a letter, then letters, digits or _; at most 64; it looks like a key?): it names the secret that holds the key, such as OPENAI_KEY, never the key itself")
	}
	return nil
}

// looksLikeKey reports whether a would-be secret name looks like an API
// key pasted in its place: a known key prefix, or a long run of mixed
// case and digits no one would choose as a name.
func looksLikeKey(s string) bool {
	for _, p := range []string{"sk", "AIza", "gsk_", "xai-", "key-"} {
		if strings.HasPrefix(s, p) && len(s) > 20 {
			return true
		}
	}
	lower, upper, digit := false, false, 0
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit++
		}
	}
	return len(s) >= 24 && lower && upper && digit >= 3
}

// redactURL is u without its user info and query.
func redactURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
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
