package capsule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/tern-dev/tern/internal/providerid"
	"github.com/tern-dev/tern/memory"
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
	// Memory chooses how the agent's notes are indexed; absent: the
	// built-in embedder, notes only.
	Memory *MemorySettings `json:"memory,omitempty"`
	// MCPServers are the MCP servers whose tools the agent gets, by name,
	// in the shape other MCP clients use.
	MCPServers map[string]MCPServer `json:"mcp_servers,omitempty"`
}

// MCPServer is one MCP server of agent.json: a command run over stdio, or
// a streamable HTTP endpoint. Values of env and headers may name a secret
// as ${NAME}; every secret it lists is also in a stdio server's
// environment under its own name. No secret's value is in the capsule.
type MCPServer struct {
	// Type is optional, as in other clients' files: "stdio", or "http"
	// (also "streamable-http", "streamableHttp") for a url.
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Secrets []string          `json:"secrets,omitempty"`
}

var mcpServerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,31}$`)

// checkMCPServers checks agent.json's mcp_servers.
func checkMCPServers(servers map[string]MCPServer) error {
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s := servers[name]
		at := fmt.Sprintf("mcp_servers.%s", name)
		switch {
		case !mcpServerName.MatchString(name) || strings.Contains(name, "__"):
			return fmt.Errorf("mcp_servers: %q is not a server name (letters, digits, _ and -, at most 32, no __): its tools are offered as mcp__NAME__TOOL", name)
		case s.Type == "sse":
			return fmt.Errorf("%s: type \"sse\" is the older HTTP+SSE transport, which tern does not speak: give the server's streamable HTTP url (often ending in /mcp) and type \"http\"", at)
		case s.Type != "" && s.Type != "stdio" && s.Type != "http" && s.Type != "streamable-http" && s.Type != "streamableHttp":
			return fmt.Errorf("%s: type %q is not \"stdio\" or \"http\"", at, s.Type)
		case (s.Command == "") == (s.URL == ""):
			return fmt.Errorf("%s: give either command (a stdio server) or url (a streamable HTTP server)", at)
		case s.Type == "stdio" && s.Command == "":
			return fmt.Errorf("%s: type \"stdio\" needs command, not url", at)
		case s.Type != "" && s.Type != "stdio" && s.URL == "":
			return fmt.Errorf("%s: type %q needs url, not command", at, s.Type)
		case s.Command != "" && len(s.Headers) > 0:
			return fmt.Errorf("%s: headers are for an HTTP server; a stdio server takes env", at)
		case s.URL != "" && (len(s.Args) > 0 || len(s.Env) > 0):
			return fmt.Errorf("%s: args and env are for a stdio server; an HTTP server takes headers", at)
		}
		if s.URL != "" {
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				return fmt.Errorf("%s: url %q is not an http:// or https:// URL with a host and no user part", at, s.URL)
			}
		}
		for _, sec := range s.Secrets {
			if !secretName.MatchString(sec) || looksLikeKey(sec) {
				return fmt.Errorf("%s: secrets: %q is not a secret name (a letter, then letters, digits or _): list the names of secrets (tern secret set NAME), never their values", at, sec)
			}
		}
		for _, m := range []map[string]string{s.Env, s.Headers} {
			for k, v := range m {
				for _, ref := range secretRefs(v) {
					if !slices.Contains(s.Secrets, ref) {
						return fmt.Errorf("%s: %s names ${%s}, which secrets does not list", at, k, ref)
					}
				}
				if looksLikeKey(strings.TrimSpace(secretRef.ReplaceAllString(v, ""))) {
					return fmt.Errorf("%s: %s looks like a key or token: put it in a secret (tern secret set NAME), list NAME in secrets and write ${NAME} here", at, k)
				}
			}
		}
	}
	return nil
}

var secretRef = regexp.MustCompile(`\$\{([A-Za-z][A-Za-z0-9_]*)\}`)

// secretRefs are the secret names a value refers to as ${NAME}.
func secretRefs(v string) []string {
	var out []string
	for _, m := range secretRef.FindAllStringSubmatch(v, -1) {
		out = append(out, m[1])
	}
	return out
}

// ExpandSecrets replaces each ${NAME} in v with get(NAME).
func ExpandSecrets(v string, get func(name string) (string, error)) (string, error) {
	var err error
	out := secretRef.ReplaceAllStringFunc(v, func(ref string) string {
		val, e := get(ref[2 : len(ref)-1])
		if e != nil && err == nil {
			err = e
		}
		return val
	})
	return out, err
}

// MemorySettings are agent.json's "memory": the embedder that builds the
// semantic index, and whether the workspace's text files are indexed too.
type MemorySettings struct {
	// Embedder is "builtin" (the default: offline, no download), "openai"
	// (any OpenAI-compatible /v1/embeddings), "ollama" or "gemini".
	Embedder  string `json:"embedder,omitempty"`
	Model     string `json:"model,omitempty"`      // the provider's embedding model
	BaseURL   string `json:"base_url,omitempty"`   // as for the agent's model; empty: the provider's default
	KeySecret string `json:"key_secret,omitempty"` // the secret holding the key, never the key
	Dim       int    `json:"dim,omitempty"`        // the vectors' dimension; 0: the model's own
	Workspace bool   `json:"workspace,omitempty"`  // index the workspace's text files as well as the notes
}

// EmbedderSpec is what the agent's index records as its embedder.
func (a Agent) EmbedderSpec() memory.EmbedderSpec {
	m := a.Memory
	if m == nil || m.Embedder == "" || providerid.Embedder(m.Embedder) == providerid.Builtin {
		return memory.BuiltinSpec
	}
	return memory.EmbedderSpec{Name: m.Embedder, Model: m.Model, Dim: m.Dim}
}

// check checks agent.json's memory settings.
func (m *MemorySettings) check() error {
	if m == nil {
		return nil
	}
	embedders := providerid.Names(providerid.Embedders())
	if m.Embedder != "" && !slices.Contains(embedders, m.Embedder) {
		return fmt.Errorf("memory.embedder %q is not one of %s", m.Embedder, strings.Join(embedders, ", "))
	}
	builtin := m.Embedder == "" || providerid.Embedder(m.Embedder) == providerid.Builtin
	switch {
	case builtin && (m.Model != "" || m.BaseURL != "" || m.KeySecret != "" || m.Dim != 0):
		return fmt.Errorf("memory: the built-in embedder takes no model, base_url, key_secret or dim; set memory.embedder to openai, ollama or gemini to use a provider's")
	case !builtin && m.Model == "":
		return fmt.Errorf("memory.model is empty: name the %s embedding model to use", m.Embedder)
	case m.Dim < 0 || m.Dim > 8192:
		return fmt.Errorf("memory.dim %d: give the vectors' dimension (1 to 8192), or leave it out", m.Dim)
	}
	if m.BaseURL != "" {
		u, err := url.Parse(m.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
			return fmt.Errorf("memory.base_url %q is not an http:// or https:// base URL", m.BaseURL)
		}
	}
	if m.KeySecret != "" && (!secretName.MatchString(m.KeySecret) || looksLikeKey(m.KeySecret)) {
		return fmt.Errorf("memory.key_secret is not a secret name (a letter, then letters, digits or _): it names the secret that holds the key, never the key itself")
	}
	return nil
}

// OfflineModel is the one model of the offline provider
// (providerid.OfflineModel).
const OfflineModel = providerid.OfflineModel

var secretName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// Tool is one tool definition: a name, what it does, a JSON Schema for its
// arguments and its effect class (pure, idempotent or at-most-once).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Effect      string          `json:"effect,omitempty"`
	// Approval says whether a call needs a person's approval before it
	// runs; absent means the tool's default (the built-in tools': their
	// own; any other tool's: yes unless its effect is pure).
	Approval *bool `json:"approval,omitempty"`
}

// DefaultAgent is the agent.json of a new capsule: the built-in offline
// model and no tools.
func DefaultAgent(name string) Agent {
	return Agent{
		Name:         name,
		Instructions: "You are a helpful assistant.",
		Provider:     string(providerid.Offline),
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
		return a, fmt.Errorf("agent.json: %s", describeJSONError(data, err))
	}
	if a.Name == "" {
		return a, fmt.Errorf("agent.json: name is empty")
	}
	if err := a.checkModel(); err != nil {
		return a, fmt.Errorf("agent.json: %v", err)
	}
	if err := a.Memory.check(); err != nil {
		return a, fmt.Errorf("agent.json: %v", err)
	}
	if err := checkMCPServers(a.MCPServers); err != nil {
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
	provider, err := providerid.Parse(a.Provider)
	if err != nil {
		return err
	}
	switch {
	case a.Model == "":
		return fmt.Errorf("model is empty: name the %s model to use", a.Provider)
	case strings.TrimSpace(a.Model) != a.Model || strings.ContainsAny(a.Model, " \t\n"):
		return fmt.Errorf("model %q has spaces in it", a.Model)
	case provider == providerid.Offline && a.Model != OfflineModel:
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
		if provider == providerid.Offline {
			return fmt.Errorf("base_url: the offline provider runs in tern and has none")
		}
		if err := checkBaseURLPath(provider, a.BaseURL); err != nil {
			return err
		}
	}
	if a.KeySecret != "" && (!secretName.MatchString(a.KeySecret) || looksLikeKey(a.KeySecret)) {
		return fmt.Errorf("key_secret is not a secret name (a letter, then letters, digits or _; at most 64; it looks like a key?): it names the secret that holds the key, such as OPENAI_KEY, never the key itself")
	}
	return nil
}

// endpointPaths are the paths each provider's client adds to base_url
// itself, lower-cased: a base_url ending in one would be posted to twice
// the path (…/chat/completions/chat/completions) and fail with a 404 far
// from its cause.
var endpointPaths = map[providerid.ID][]string{
	providerid.OpenAIChat:      {"/chat/completions", "/completions", "/chat"},
	providerid.OpenAIResponses: {"/responses"},
	providerid.Anthropic:       {"/v1/messages", "/messages", "/v1"},
	providerid.Gemini:          {"/v1beta", "/v1", "/models", ":streamgeneratecontent", ":generatecontent"},
	providerid.Ollama:          {"/api/chat", "/api"},
}

// checkBaseURLPath refuses a base_url that ends in a path the provider's
// client adds itself, saying what to write instead.
func checkBaseURLPath(provider providerid.ID, base string) error {
	trimmed := strings.TrimRight(base, "/")
	lower := strings.ToLower(trimmed)
	if provider == providerid.Gemini {
		if i := strings.Index(lower, "/v1beta/"); i >= 0 { // …/v1beta/models/gemini-x:streamGenerateContent
			lower, trimmed = lower[:i+len("/v1beta")], trimmed[:i+len("/v1beta")]
		}
	}
	for _, p := range endpointPaths[provider] {
		if strings.HasSuffix(lower, p) {
			return fmt.Errorf("base_url %q ends in %q, which tern adds itself: write %q (the official SDK's convention)",
				base, trimmed[len(trimmed)-len(p):], trimmed[:len(trimmed)-len(p)])
		}
	}
	if provider == providerid.Ollama && strings.HasSuffix(lower, "/v1") {
		return fmt.Errorf("base_url %q is Ollama's OpenAI-compatible API: use provider \"openai-chat\" with it, or provider \"ollama\" with %q",
			base, trimmed[:len(trimmed)-len("/v1")])
	}
	return nil
}

// describeJSONError says in a person's words what is wrong with a JSON
// file and where (line and column), instead of naming Go types.
func describeJSONError(data []byte, err error) string {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return fmt.Sprintf("%s: the file must hold a JSON object, not %s", lineCol(data, typ.Offset), article(typ.Value))
		}
		return fmt.Sprintf("%s: %q must be %s, not %s", lineCol(data, typ.Offset), field, jsonKind(typ.Type), article(typ.Value))
	case errors.As(err, &syn):
		return fmt.Sprintf("%s: not valid JSON: %s", lineCol(data, syn.Offset), strings.TrimPrefix(syn.Error(), "invalid character "))
	case errors.Is(err, io.EOF):
		return "the file is empty: it must hold a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the file ends in the middle of its JSON"
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		where := ""
		if i := bytes.Index(data, []byte(f)); i >= 0 { // f is quoted: the key's first occurrence
			where = lineCol(data, int64(i)) + ": "
		}
		return where + "unknown field " + f + " (a newer tern's field, or a typo?)"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// lineCol turns a byte offset into "line L, column C".
func lineCol(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

// jsonKind names what a Go type is in JSON.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another kind of value"
}

// article names the JSON value a decoder found ("number 5", "object").
func article(value string) string {
	kind, _, _ := strings.Cut(value, " ")
	switch kind {
	case "bool":
		return "true or false"
	case "array":
		return "a list"
	case "object":
		return "an object"
	}
	return "a " + kind
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

// ValidAgentID reports whether id is a well-formed agent id.
func ValidAgentID(id string) bool { return agentIDPattern.MatchString(id) }

func checkAgentID(id string) error {
	if !agentIDPattern.MatchString(id) {
		return fmt.Errorf("agent id %q is not a lowercase UUID", id)
	}
	return nil
}
