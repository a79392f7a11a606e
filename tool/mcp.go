package tool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/procgroup"
)

// MCPPrefix begins the name of every tool an MCP server gives an agent:
// mcp__SERVER__TOOL, a name every provider accepts.
const MCPPrefix = "mcp__"

// Secrets gives the value of a named secret (the node's keyring).
type Secrets interface {
	Get(name string) (string, error)
}

// MCP is an agent's MCP servers (agent.json's mcp_servers), each connected
// on first use and kept until Close: stdio servers run in the agent's
// workspace; secrets come from this machine, never from the capsule.
type MCP struct {
	servers map[string]capsule.MCPServer
	env     MCPEnv
	ctx     context.Context // ends at Close: the connections' lifetime
	cancel  context.CancelFunc

	mu      sync.Mutex
	closed  bool
	conns   map[string]*mcpConn
	dialing map[string]*dialing     // connections under way
	pending map[string]*pendingAuth // authorizations servers wait for
}

// MCPEnv is where an agent's MCP servers run on this machine.
type MCPEnv struct {
	// Secrets gives the values of the secrets servers name; if it also
	// has Set(name, value string) error, OAuth tokens are kept there (and
	// only there), under MCPTokenSecret of the server.
	Secrets Secrets
	// Workspace is the folder stdio servers run in, and their HOME: they
	// get the environment shell's command gets (commandEnv), with their
	// secrets and env, and nothing else of this process's.
	Workspace string
	// RedirectURL is where an authorization server sends the person's
	// browser back to with the code (the node's /v1/mcp/callback); empty:
	// http://127.0.0.1/callback, whose address the person copies.
	RedirectURL string
	// Processes is where a stdio server's process group is recorded
	// while it runs, so that the node's next start ends what it left
	// after a crash (the node's $TERN_HOME/processes); empty: no record.
	Processes procgroup.Dir
}

// mcpConn is one server's session and the tools it last listed.
type mcpConn struct {
	session *mcp.ClientSession
	tools   []*mcp.Tool
	stale   bool // the server said its tools changed
}

// NewMCP returns the MCP servers of an agent, not yet connected.
func NewMCP(servers map[string]capsule.MCPServer, env MCPEnv) *MCP {
	if env.RedirectURL == "" {
		env.RedirectURL = "http://127.0.0.1/callback"
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &MCP{servers: servers, env: env, ctx: ctx, cancel: cancel,
		conns: map[string]*mcpConn{}, dialing: map[string]*dialing{}, pending: map[string]*pendingAuth{}}
}

// The states of a server.
const (
	MCPConnected          = "connected"
	MCPUnavailable        = "unavailable"
	MCPNeedsAuthorization = "needs_authorization"
)

// MCPServerState is what tern mcp list and the runtime know of a server.
type MCPServerState struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`  // "stdio" or "http"
	State string `json:"state"` // connected, unavailable or needs_authorization
	Error string `json:"error,omitempty"`
	// AuthorizationURL is where the person authorizes tern, when the
	// server needs it; Scopes are the scopes it asks for.
	AuthorizationURL string     `json:"authorization_url,omitempty"`
	Scopes           []string   `json:"scopes,omitempty"`
	Tools            []MCPTools `json:"tools"`
}

// MCPTools is one tool of a server as an agent sees it.
type MCPTools struct {
	Name     string `json:"name"` // as offered to the model: mcp__SERVER__TOOL
	Tool     string `json:"tool"` // as the server names it
	Effect   string `json:"effect"`
	Approval bool   `json:"approval"`
}

// Tools connects to every server not yet connected and returns their
// tools as built-in tools named mcp__SERVER__TOOL, with each server's
// state. A server that cannot be reached is in the states with its error
// and gives no tools; the others still do.
func (m *MCP) Tools(ctx context.Context) ([]Tool, []MCPServerState) {
	var tools []Tool
	var states []MCPServerState
	for _, name := range slices.Sorted(maps.Keys(m.servers)) {
		st := MCPServerState{Name: name, Kind: "stdio", State: MCPConnected, Tools: []MCPTools{}}
		if m.servers[name].URL != "" {
			st.Kind = "http"
		}
		list, err := m.list(ctx, name)
		var need *AuthorizationNeeded
		switch {
		case errors.As(err, &need):
			st.State, st.Error = MCPNeedsAuthorization, err.Error()
			st.AuthorizationURL, st.Scopes = need.URL, need.Scopes
		case err != nil:
			st.State, st.Error = MCPUnavailable, err.Error()
		}
		for _, t := range list {
			tl := m.tool(name, t)
			tools = append(tools, tl)
			st.Tools = append(st.Tools, MCPTools{Name: tl.Name, Tool: t.Name, Effect: tl.Effect, Approval: tl.Approval})
		}
		states = append(states, st)
	}
	return tools, states
}

// Status is Tools as a person asks for it: an open session is pinged
// first, and one that does not answer is connected again, so that a
// server that went away shows as unavailable rather than as it was.
func (m *MCP) Status(ctx context.Context) []MCPServerState {
	m.mu.Lock()
	open := maps.Clone(m.conns)
	m.mu.Unlock()
	for name, c := range open {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := c.session.Ping(pctx, nil); err != nil {
			m.drop(name, c)
		}
		cancel()
	}
	_, states := m.Tools(ctx)
	return states
}

// Close ends every session (a stdio server's process with it) and every
// authorization waiting.
func (m *MCP) Close() {
	m.cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for name, c := range m.conns {
		c.session.Close()
		delete(m.conns, name)
	}
}

// list returns a server's tools, connecting first if need be, and listing
// again after the server said they changed.
func (m *MCP) list(ctx context.Context, name string) ([]*mcp.Tool, error) {
	c, err := m.conn(ctx, name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	tools, stale := c.tools, c.stale
	m.mu.Unlock()
	if tools != nil && !stale {
		return tools, nil
	}
	var out []*mcp.Tool
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			m.drop(name, c)
			return nil, fmt.Errorf("mcp server %s: listing its tools: %w", name, err)
		}
		out = append(out, t)
	}
	if out == nil {
		out = []*mcp.Tool{}
	}
	m.mu.Lock()
	c.tools, c.stale = out, false
	m.mu.Unlock()
	return out, nil
}

// conn returns the server's session, connecting when there is none. A
// server that asks for authorization gives an *AuthorizationNeeded while
// its connection waits for Authorize.
func (m *MCP) conn(ctx context.Context, name string) (*mcpConn, error) {
	if _, ok := m.servers[name]; !ok {
		return nil, fmt.Errorf("agent.json declares no MCP server %q", name)
	}
	m.mu.Lock()
	if c := m.conns[name]; c != nil {
		m.mu.Unlock()
		return c, nil
	}
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("mcp server %s: its connections were closed", name)
	}
	d := m.dialing[name]
	if d == nil {
		d = &dialing{done: make(chan struct{}), asked: make(chan struct{})}
		m.dialing[name] = d
		go m.dial(name, d)
	}
	m.mu.Unlock()
	select {
	case <-d.done: // first: once connected, asked is closed too
		return d.conn, d.err
	default:
	}
	select {
	case <-d.done:
		return d.conn, d.err
	case <-d.asked:
		m.mu.Lock()
		p := m.pending[name]
		m.mu.Unlock()
		if p != nil {
			return nil, &AuthorizationNeeded{Server: name, URL: p.url, Scopes: p.scopes}
		}
		select { // being answered: wait for the connection
		case <-d.done:
			return d.conn, d.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// dialing is one server's connection under way.
type dialing struct {
	done      chan struct{} // closed when it connected or failed
	conn      *mcpConn
	err       error
	asked     chan struct{} // closed when the server asked for authorization
	askOnce   sync.Once
	waiting   atomic.Bool // for a person: the connect timeout does not apply
	abandoned atomic.Bool // its authorization was answered otherwise: no more asking
}

// connectTimeout bounds a connection that waits for no person.
const connectTimeout = 60 * time.Second

// dial connects to server name for d, under the MCP's lifetime rather than
// a caller's: a connection waiting for authorization outlives the turn
// that found it waiting.
func (m *MCP) dial(name string, d *dialing) {
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	timer := time.AfterFunc(connectTimeout, func() {
		if !d.waiting.Load() {
			cancel()
		}
	})
	defer timer.Stop()
	c, err := m.connect(ctx, name, d)
	m.mu.Lock()
	if m.dialing[name] == d {
		delete(m.dialing, name)
	}
	if err == nil && m.closed {
		c.session.Close()
		c, err = nil, fmt.Errorf("mcp server %s: its connections were closed", name)
	} else if err == nil {
		m.conns[name] = c
	}
	m.mu.Unlock()
	d.conn, d.err = c, err
	close(d.done)
}

// connect opens a session with server name.
func (m *MCP) connect(ctx context.Context, name string, d *dialing) (*mcpConn, error) {
	s := m.servers[name]
	transport, err := m.transport(name, s, d)
	if err != nil {
		return nil, err
	}
	c := &mcpConn{}
	client := mcp.NewClient(&mcp.Implementation{Name: "tern", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			m.mu.Lock()
			c.stale = true
			m.mu.Unlock()
		},
	})
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp server %s: %s", name, connectError(s, err))
	}
	c.session = session
	return c, nil
}

// drop forgets a session that failed, so the next use connects again.
func (m *MCP) drop(name string, c *mcpConn) {
	m.mu.Lock()
	if m.conns[name] == c {
		delete(m.conns, name)
	}
	m.mu.Unlock()
	c.session.Close()
}

func connectError(s capsule.MCPServer, err error) string {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return fmt.Sprintf("its command %q cannot be run on this machine (%v): install it, or fix command in agent.json's mcp_servers", s.Command, ee.Err)
	}
	if s.URL != "" {
		return fmt.Sprintf("cannot connect to %s: %v", s.URL, err)
	}
	return fmt.Sprintf("%s did not start as an MCP server: %v", s.Command, err)
}

// transport is how tern reaches server s: its command over stdio, or its
// URL over streamable HTTP (with OAuth unless its headers authorize it),
// with ${SECRET}s expanded from this machine.
func (m *MCP) transport(name string, s capsule.MCPServer, d *dialing) (mcp.Transport, error) {
	get := func(secret string) (string, error) {
		if m.env.Secrets == nil {
			return "", fmt.Errorf("mcp server %s needs the secret %s, and no secret store is open", name, secret)
		}
		v, err := m.env.Secrets.Get(secret)
		if err != nil {
			return "", fmt.Errorf("mcp server %s needs the secret %s: %w", name, secret, err)
		}
		return v, nil
	}
	if s.URL != "" {
		headers := http.Header{}
		for k, v := range s.Headers {
			val, err := capsule.ExpandSecrets(v, get)
			if err != nil {
				return nil, err
			}
			headers.Set(k, val)
		}
		t := &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: &http.Client{Transport: headerTransport{headers, http.DefaultTransport}}}
		if headers.Get("Authorization") == "" {
			h, err := m.oauth(name, d)
			if err != nil {
				return nil, err
			}
			t.OAuthHandler = h
		}
		return t, nil
	}
	path, err := exec.LookPath(s.Command)
	if err != nil {
		return nil, fmt.Errorf("mcp server %s: its command %q %s: install it, or fix command in agent.json's mcp_servers", name, s.Command, MissingCommand(s.Command))
	}
	var declared []string
	for _, sec := range s.Secrets {
		v, err := get(sec)
		if err != nil {
			return nil, err
		}
		declared = append(declared, sec+"="+v)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		v, err := capsule.ExpandSecrets(s.Env[k], get)
		if err != nil {
			return nil, err
		}
		declared = append(declared, k+"="+v)
	}
	cmd := exec.Command(path, s.Args...)
	cmd.Dir = m.env.Workspace
	cmd.Env = commandEnv(os.Environ(), m.env.Workspace, os.TempDir(), declared)
	return &serverTransport{cmd: cmd, server: name, records: m.env.Processes}, nil
}

// serverTransport runs a stdio server as mcp.CommandTransport does, but
// in a process group of its own that dies with this process (Linux:
// procgroup.Prepare) and is recorded while it runs, so that what the
// server started is ended too: when the connection closes, and after a
// crash by the node's next start.
type serverTransport struct {
	cmd     *exec.Cmd
	server  string
	records procgroup.Dir
}

func (t *serverTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	seclude()
	procgroup.Prepare(t.cmd)
	var conn mcp.Connection
	err := procgroup.Spawn(func() (err error) {
		conn, err = (&mcp.CommandTransport{Command: t.cmd}).Connect(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	var suffix [4]byte
	rand.Read(suffix[:])
	name := "mcp_" + t.server + "_" + hex.EncodeToString(suffix[:])
	g, err := procgroup.Of(t.cmd.Process.Pid)
	if err == nil {
		err = t.records.Keep(name, g)
	}
	end := func() {
		ctx, cancel := context.WithTimeout(context.Background(), groupEndWait)
		defer cancel()
		if procgroup.End(ctx, g) == nil {
			t.records.Drop(name) // else the node's next start ends it
		}
	}
	if err != nil {
		end()
		conn.Close()
		return nil, err
	}
	return &serverConn{Connection: conn, end: end}, nil
}

// serverConn is a stdio server's connection whose Close also ends what is
// left of the server's process group.
type serverConn struct {
	mcp.Connection
	once sync.Once
	end  func()
}

func (c *serverConn) Close() error {
	err := c.Connection.Close() // closes stdin, waits, then signals the server
	c.once.Do(c.end)
	return err
}

// MissingCommand says how command is missing: a path names no executable
// file; a bare name is not on PATH.
func MissingCommand(command string) string {
	if strings.ContainsRune(command, '/') {
		return "is not an executable file on this machine"
	}
	return "is not on this machine's PATH"
}

// headerTransport adds a server's headers to each request.
type headerTransport struct {
	headers http.Header
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header[k] = v
	}
	return h.next.RoundTrip(r)
}

var unsafeNameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// MCPToolName is the name the model sees for tool of server: every
// provider accepts [a-zA-Z0-9_-]{1,64}.
func MCPToolName(server, tool string) string {
	n := MCPPrefix + server + "__" + unsafeNameChars.ReplaceAllString(tool, "_")
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

// MCPPolicy is the effect and approval of MCP tool t once agent.json's
// entry for it (decl, by its mcp__ name; nil if none) is applied: an
// effect there replaces the server's (any but pure then needs approval),
// and an approval there decides.
func MCPPolicy(t Tool, decl *capsule.Tool) (effect string, approval bool) {
	effect, approval = t.Effect, t.Approval
	if decl == nil {
		return effect, approval
	}
	if decl.Effect != "" {
		effect, approval = decl.Effect, decl.Effect != Pure
	}
	if decl.Approval != nil {
		approval = *decl.Approval
	}
	return effect, approval
}

// WithOverrides returns the states with agent.json's entries for their
// tools (decls) applied, as the runtime applies them.
func WithOverrides(states []MCPServerState, decls []capsule.Tool) []MCPServerState {
	for i := range states {
		for j, tl := range states[i].Tools {
			k := slices.IndexFunc(decls, func(d capsule.Tool) bool { return d.Name == tl.Name })
			if k < 0 {
				continue
			}
			e, a := MCPPolicy(Tool{Effect: tl.Effect, Approval: tl.Approval}, &decls[k])
			states[i].Tools[j].Effect, states[i].Tools[j].Approval = e, a
		}
	}
	return states
}

// tool makes one server tool a Tool: its effect from the server's
// annotations (readOnlyHint: pure; idempotentHint: idempotent; anything
// else at-most-once). Every tool but a read-only one needs approval by
// default: idempotent says a second call repeats the first harmlessly,
// not that the first is harmless (a file overwritten, twice).
func (m *MCP) tool(server string, t *mcp.Tool) Tool {
	effect := AtMostOnce
	if a := t.Annotations; a != nil {
		switch {
		case a.ReadOnlyHint:
			effect = Pure
		case a.IdempotentHint:
			effect = Idempotent
		}
	}
	params, err := json.Marshal(t.InputSchema)
	if err != nil || string(params) == "null" {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	name := t.Name
	return Tool{
		Name:        MCPToolName(server, name),
		Description: t.Description,
		Parameters:  params,
		Effect:      effect,
		Approval:    effect != Pure,
		NoWorkspace: m.servers[server].URL != "", // a stdio server runs in the workspace, and may write it
		Run: func(ctx context.Context, c Call) (Result, error) {
			return m.call(ctx, server, name, c.Arguments, effect != AtMostOnce)
		},
	}
}

// call calls a tool of a server. An answer of the server, error or not,
// is a result. A connection that fails during the call is forgotten (the
// next use connects again, to a restarted server too); the call is then
// made again on a new connection when repeating it is harmless
// (repeatable: the server's annotations say read-only or idempotent) or
// it never reached the server, and otherwise fails with ErrUncertain: the
// runtime keeps its intent without outcome, to be reconciled, never
// retried blind.
func (m *MCP) call(ctx context.Context, server, name string, args json.RawMessage, repeatable bool) (Result, error) {
	var a map[string]any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return failf("the arguments are not a JSON object: %v", err)
		}
	}
	var last error
	for attempt := 0; attempt < len(mcpRetryDelays)+1; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(mcpRetryDelays[attempt-1]):
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
		}
		c, err := m.conn(ctx, server)
		if err != nil {
			if last != nil {
				return Result{}, fmt.Errorf("mcp server %s, tool %s: %v; connecting again: %w", server, name, last, err)
			}
			return Result{}, err // not sent: certain
		}
		res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: a})
		if err == nil {
			return mcpResult(res), nil
		}
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		if errors.Is(err, errAuthorizeAgain) { // refused unserved: certain
			m.drop(server, c)
			return Result{}, fmt.Errorf("mcp server %s, tool %s: %w", server, name, errAuthorizeAgain)
		}
		var answered *jsonrpc.Error
		if errors.As(err, &answered) && answered.Code != rejectedByTransport {
			return Result{Output: fmt.Sprintf("mcp server %s refused the call: %s", server, answered.Message), IsError: true}, nil
		}
		m.drop(server, c)
		last = err
		if !repeatable && !neverSent(err) {
			return Result{}, fmt.Errorf("mcp server %s, tool %s: the connection failed during the call (%v): %w", server, name, err, ErrUncertain)
		}
	}
	return Result{}, fmt.Errorf("mcp server %s, tool %s: the connection failed, also on a new one: %v", server, name, last)
}

// mcpRetryDelays are the waits before each new attempt of a call whose
// connection failed, giving a restarting server time to come back.
var mcpRetryDelays = []time.Duration{300 * time.Millisecond, time.Second}

// rejectedByTransport is the JSON-RPC code the SDK gives a request its
// transport could not deliver (or whose HTTP answer was an error status):
// not an answer of the server.
const rejectedByTransport = -32005

// neverSent reports whether err says the request never left this machine:
// its connection could not even be opened.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// mcpResult is an MCP tool result as the model reads it: text parts as
// they are, structured content as JSON (when no text stands for it), an
// embedded resource's text; images, audio and binary resources as media
// the runtime keeps as blobs.
func mcpResult(res *mcp.CallToolResult) Result {
	var parts []Part // the texts and media, in the server's order
	addText := func(t string) { parts = append(parts, Part{Text: t}) }
	addMedia := func(kind, mediaType, name string, data []byte) {
		if len(data) > MediaCap {
			addText(fmt.Sprintf("[%s %s, %s, %d bytes: over the %d MiB kept, left out]", kind, name, mediaType, len(data), MediaCap>>20))
			return
		}
		parts = append(parts, Part{Media: &Media{Kind: kind, MediaType: mediaType, Name: name, Data: data}})
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			addText(c.Text)
		case *mcp.ImageContent:
			addMedia("image", c.MIMEType, "", c.Data)
		case *mcp.AudioContent:
			addMedia("file", c.MIMEType, "audio", c.Data)
		case *mcp.EmbeddedResource:
			if r := c.Resource; r != nil && r.Blob == nil {
				addText(fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
			} else if r != nil {
				addMedia("file", r.MIMEType, path.Base(r.URI), r.Blob)
			}
		case *mcp.ResourceLink:
			addText(fmt.Sprintf("[resource link %s: %s]", c.URI, c.Name))
		default:
			b, _ := json.Marshal(c)
			addText(string(b))
		}
	}
	var texts []string
	var media []Part
	for _, p := range parts {
		if p.Media != nil {
			media = append(media, p)
		} else {
			texts = append(texts, p.Text)
		}
	}
	if res.StructuredContent != nil && len(texts) == 0 {
		b, _ := json.Marshal(res.StructuredContent)
		texts = append(texts, string(b))
		parts = append([]Part{{Text: texts[0]}}, parts...)
	}
	r := Result{Output: strings.Join(texts, "\n"), IsError: res.IsError}
	if len(r.Output) > OutputCap {
		r.Output, r.Cut = string(trimPartialRune([]byte(r.Output[:OutputCap])))+"\n[the result was cut at 64 KiB]", true
		parts = append([]Part{{Text: r.Output}}, media...) // the cut text first, then the media
	}
	if len(media) > 0 {
		r.Parts = parts
	}
	return r
}
