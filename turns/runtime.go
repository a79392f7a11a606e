package turns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/fencing"
	"github.com/tern-dev/tern/internal/procgroup"
	"github.com/tern-dev/tern/internal/providerid"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/render"
	"github.com/tern-dev/tern/session"
	"github.com/tern-dev/tern/tool"
)

// maxSteps bounds the model steps of one turn.
const maxSteps = 24

// Runtime is the node's turn runners and live streams.
type Runtime struct {
	node Node
	cfg  Config
	log  *slog.Logger
	ctx  context.Context // done when the node closes

	mu           sync.Mutex
	runners      map[string]*runner   // by session: its one running turn's runner
	live         map[string]*liveTurn // by turn, while it runs here
	sessions     map[string]string    // session → agent, as learnt
	sessionLocks keyedLocks           // by session: one request that starts or cancels a turn at a time
	mcps         map[string]*agentMCP // by agent: its MCP servers' sessions, while it runs here
	workspaces   keyedLocks           // by agent: its working folder, for a tool call and the snapshot after it, or a snapshot by hand
	models       func(provider.Settings) (provider.Model, error)
	// closing tracks the MCP connections being closed in the background
	// (an agent that stopped running here, servers agent.json changed);
	// the node's Close waits for them.
	closing sync.WaitGroup

	// What the runtime wrote, for the benchmarks: durable appends (each
	// one group commit: one write and one fsync of the journal) and
	// workspace snapshots.
	appends, snapshots atomic.Int64
}

// keyedLocks is a mutex per key, made on first use, whose wait a context
// can end.
type keyedLocks struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// lock takes key's lock, or fails with ctx's error; call the func it
// returns to release it.
func (kl *keyedLocks) lock(ctx context.Context, key string) (func(), error) {
	kl.mu.Lock()
	if kl.m == nil {
		kl.m = map[string]chan struct{}{}
	}
	ch := kl.m[key]
	if ch == nil {
		ch = make(chan struct{}, 1)
		kl.m[key] = ch
	}
	kl.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runner is the goroutine of one running turn.
type runner struct {
	agent, session, turn string
	cancel               context.CancelCauseFunc // errNotHere: the agent stopped running here
	done                 chan struct{}
}

// New makes the runtime of node's agents; it ends the process groups a
// killed run of the node left before it starts any of its own. Turns
// run until ctx, the node's life, ends.
func New(ctx context.Context, node Node, cfg Config) *Runtime {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.API == nil {
		cfg.API = func() string { return "" }
	}
	rt := &Runtime{node: node, cfg: cfg, log: cfg.Log, ctx: ctx, runners: map[string]*runner{}, live: map[string]*liveTurn{}, sessions: map[string]string{},
		models: func(s provider.Settings) (provider.Model, error) { return provider.New(s) }}
	rt.endLeftovers()
	return rt
}

// WorkspacesDir holds, inside $TERN_HOME, the workspace of every agent
// the node runs, one folder per agent.
const WorkspacesDir = "workspaces"

// ProcessesDir is the folder of the node's home that records the process
// group of each shell command and stdio MCP server the node runs, while
// it runs (internal/procgroup).
const ProcessesDir = "processes"

// processes is the node's record of its running process groups.
func (rt *Runtime) processes() procgroup.Dir {
	return procgroup.Dir(filepath.Join(rt.cfg.Home, ProcessesDir))
}

// leftoverWait bounds how long a node's start waits for the process
// groups a killed run left to be gone; what is left then is ended again
// before its call is reconciled.
const leftoverWait = 10 * time.Second

// endLeftovers ends the process groups an earlier run of this node left
// running (it was killed, or crashed): what shell commands started in the
// background, what stdio MCP servers started. It runs before the node
// starts any process of its own.
func (rt *Runtime) endLeftovers() {
	if rt.cfg.Disabled {
		return // the simulator's nodes run no tools
	}
	ctx, cancel := context.WithTimeout(rt.ctx, leftoverWait)
	defer cancel()
	names, err := rt.processes().EndAll(ctx)
	if len(names) > 0 {
		rt.log.Info("ended the processes an earlier run of this node left running", "records", names)
	}
	if err != nil {
		rt.log.Warn("could not end every process an earlier run of this node left running", "err", err)
	}
}

// errNotHere is a runner's reason to stop: the agent does not run on this
// node (it moved, or a migration froze it). The turn stays running in the
// journal, for the node that runs the agent to continue.
var errNotHere = errors.New("the agent does not run on this node")

// newID returns prefix followed by 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// start runs the turn's runner unless one runs it already.
func (rt *Runtime) start(agent, sessionID, turnID string) {
	if rt.cfg.Disabled {
		return // the simulator's workload has no sessions
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if r := rt.runners[sessionID]; r != nil && r.turn == turnID {
		return
	}
	ctx, cancel := context.WithCancelCause(rt.ctx)
	r := &runner{agent: agent, session: sessionID, turn: turnID, cancel: cancel, done: make(chan struct{})}
	rt.runners[sessionID] = r
	rt.sessions[sessionID] = agent
	started := rt.cfg.Spawn(func() {
		defer close(r.done)
		defer cancel(nil)
		lt := rt.liveOf(agent, sessionID, turnID)
		err := rt.run(ctx, r, lt)
		rt.mu.Lock()
		if rt.runners[sessionID] == r {
			delete(rt.runners, sessionID)
		}
		rt.mu.Unlock()
		if errors.Is(context.Cause(ctx), errNotHere) {
			err = errNotHere
		}
		switch {
		case err == nil, ctx.Err() != nil && !errors.Is(err, errNotHere):
		case errors.Is(err, errNotHere), errors.Is(err, fencing.ErrFrozen):
			rt.log.Info("a turn stopped at a safe point: the agent does not run here now", "agent", agent, "turn", turnID)
			rt.handOver(agent, lt)
		default:
			rt.log.Warn("a turn's runner stopped", "agent", agent, "turn", turnID, "err", err)
		}
		rt.dropLive(turnID, lt)
	})
	if !started { // the node is closing: no runner, and nothing waits for one
		delete(rt.runners, sessionID)
		cancel(nil)
		close(r.done)
	}
}

// stop stops the runner of the session, if any, and waits for it.
func (rt *Runtime) stop(sessionID string) {
	rt.mu.Lock()
	r := rt.runners[sessionID]
	rt.mu.Unlock()
	if r != nil {
		r.cancel(nil)
		<-r.done
	}
}

// StopAgent stops the runners of the agent's turns, which stay running in
// the journal: the agent stopped running here (a migration committed).
// A model step in flight is dropped; its node takes it again.
func (rt *Runtime) StopAgent(agent string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, r := range rt.runners {
		if r.agent == agent {
			r.cancel(errNotHere)
		}
	}
	if am := rt.mcps[agent]; am != nil {
		delete(rt.mcps, agent)
		rt.closeMCP(am.m) // the node that runs it next connects with its own keyring
	}
}

// closeMCP closes an agent's MCP connections in the background (a stdio
// server may take a moment to stop); the node's Close waits for it.
func (rt *Runtime) closeMCP(m *tool.MCP) {
	rt.closing.Go(func() { m.Close() })
}

// agentMCP is an agent's MCP servers as the runtime connected them, and
// the declaration they were connected by.
type agentMCP struct {
	servers string // agent.json's mcp_servers, as JSON
	m       *tool.MCP
	found   map[string]string // by server: what the runtime last logged of it ("" reachable)
}

// mcpEnv is where an agent's MCP servers run on this node: its keyring,
// the agent's workspace, and the node's callback for authorizations.
func (rt *Runtime) mcpEnv(ws string) tool.MCPEnv {
	return tool.MCPEnv{Secrets: rt.cfg.Secrets, Workspace: ws, RedirectURL: rt.cfg.API() + api.MCPCallbackPath, Processes: rt.processes()}
}

// mcpOf returns the agent's MCP servers as the runtime connects them,
// made on first use and again when agent.json changes them; closed when
// the agent stops running here or the node stops.
func (rt *Runtime) mcpOf(agent string, servers map[string]capsule.MCPServer, ws string) *tool.MCP {
	key, _ := json.Marshal(servers)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.mcps == nil {
		rt.mcps = map[string]*agentMCP{}
	}
	am := rt.mcps[agent]
	if am == nil || am.servers != string(key) {
		if am != nil {
			rt.closeMCP(am.m)
		}
		am = &agentMCP{servers: string(key), m: tool.NewMCP(servers, rt.mcpEnv(ws))}
		rt.mcps[agent] = am
		m := am.m
		rt.cfg.Spawn(func() {
			<-rt.ctx.Done()
			m.Close()
		})
	}
	return am.m
}

// addMCPTools offers the turn the tools of the agent's MCP servers: it
// adds their definitions to v.agent.Tools (those agent.json does not list
// itself) and keeps them in v.mcp. A server that waits for authorization
// is in v.mcpAuth; one that cannot be reached is logged, and its tools
// are not offered.
func (rt *Runtime) addMCPTools(ctx context.Context, agent string, v *view, ws string) {
	if len(v.agent.MCPServers) == 0 {
		return
	}
	tools, states := rt.mcpOf(agent, v.agent.MCPServers, ws).Tools(ctx)
	v.mcpDown = map[string]string{}
	for _, st := range states {
		switch st.State {
		case tool.MCPNeedsAuthorization:
			v.mcpAuth = append(v.mcpAuth, st)
		case tool.MCPUnavailable:
			v.mcpDown[st.Name] = st.Error
			if rt.mcpNews(agent, st.Name, st.Error) {
				rt.log.Warn("an MCP server of the agent cannot be reached; its tools are not offered", "agent", agent, "server", st.Name, "err", st.Error)
			}
		default:
			if rt.mcpNews(agent, st.Name, "") {
				rt.log.Info("an MCP server of the agent is reachable again", "agent", agent, "server", st.Name)
			}
		}
	}
	v.mcp = map[string]tool.Tool{}
	for _, t := range tools {
		v.mcp[t.Name] = t
		if !slices.ContainsFunc(v.agent.Tools, func(d capsule.Tool) bool { return d.Name == t.Name }) {
			v.agent.Tools = append(v.agent.Tools, t.Definition())
		}
	}
}

// mcpNews records what the runtime last found of an agent's MCP server
// ("" when reachable) and reports whether it differs from what it found
// before, and so is worth a log line: once per change, not per step.
func (rt *Runtime) mcpNews(agent, server, problem string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	am := rt.mcps[agent]
	if am == nil {
		return problem != ""
	}
	if am.found == nil {
		am.found = map[string]string{}
	}
	before, seen := am.found[server]
	am.found[server] = problem
	return before != problem && (seen || problem != "")
}

// mcpAuthActionID is the id of the mcp_auth action of turn about server.
func mcpAuthActionID(turn, server string) string {
	return session.ActionID(session.KindMCPAuth, turn+"_"+server)
}

// mcpAuthActions are the mcp_auth actions of the servers that wait for
// authorization, but for those the answers this turn continues with
// declined: the turn runs without their tools, and a later turn asks
// again.
func mcpAuthActions(v *view) []session.Action {
	var out []session.Action
	for _, st := range v.mcpAuth {
		if v.turn.Continues != "" {
			ans, ok := v.sess.Answered(mcpAuthActionID(v.turn.Continues, st.Name))
			if ok && ans.Approve != nil && !*ans.Approve {
				continue
			}
		}
		out = append(out, session.Action{ID: mcpAuthActionID(v.turn.ID, st.Name), Kind: session.KindMCPAuth,
			Tool: tool.MCPPrefix + st.Name, Server: st.Name, URL: st.AuthorizationURL, Scopes: st.Scopes})
	}
	return out
}

// AuthorizeMCP gives the agent's MCP server the authorization a person
// answered an mcp_auth action with.
func (rt *Runtime) AuthorizeMCP(ctx context.Context, agent, server, value string) error {
	var a capsule.Agent
	if err := rt.node.With(agent, func(d *capsule.Dir) error {
		var err error
		a, err = d.RunnableAgent(agent, rt.node.Ours)
		return err
	}); err != nil {
		return err
	}
	ws, err := rt.workspace(agent)
	if err != nil {
		return err
	}
	return rt.mcpOf(agent, a.MCPServers, ws).Authorize(ctx, server, value)
}

// Resume starts a runner for every running turn of the agent: after the
// node starts running it (its start-up, a migration's commit).
func (rt *Runtime) Resume(agent string) {
	if rt.cfg.Disabled {
		return
	}
	st, err := rt.state(agent)
	if err != nil {
		rt.log.Warn("could not read the agent's sessions to resume its turns", "agent", agent, "err", err)
		return
	}
	for id, s := range st.Sessions {
		if t := s.Active(); t != nil {
			rt.log.Info("resuming a running turn", "agent", agent, "session", id, "turn", t.ID)
			rt.start(agent, id, t.ID)
		}
	}
}

// state derives every session of the agent from its journal.
func (rt *Runtime) state(agent string) (*session.State, error) {
	var st *session.State
	err := rt.node.With(agent, func(d *capsule.Dir) error {
		evs, err := d.Events()
		if err != nil {
			return err
		}
		view, _ := journal.Readable(evs)
		st = session.Derive(view)
		return nil
	})
	if err == nil {
		rt.mu.Lock()
		for id := range st.Sessions {
			rt.sessions[id] = agent
		}
		rt.mu.Unlock()
	}
	return st, err
}

// agentOf returns the agent a session belongs to, looking through every
// capsule the node holds the first time a session is asked for.
func (rt *Runtime) agentOf(sessionID string) (string, error) {
	rt.mu.Lock()
	agent, ok := rt.sessions[sessionID]
	rt.mu.Unlock()
	if ok {
		return agent, nil
	}
	agents, err := rt.node.Agents()
	if err != nil {
		return "", err
	}
	for _, a := range agents {
		st, err := rt.state(a)
		if err == nil && st.Session(sessionID) != nil {
			return a, nil
		}
	}
	return "", fmt.Errorf("session %q: %w on this node", sessionID, session.ErrNoSession)
}

// view is what one pass of a runner reads: the agent's definition and the
// session's events and state.
type view struct {
	agent  capsule.Agent    // as accepted, with its MCP servers' tools added to Tools
	events []*journal.Event // the session's readable events, in order
	sess   *session.Session
	turn   *session.Turn
	mcp    map[string]tool.Tool // the MCP servers' tools, by the name the model sees
	// mcpAuth are the MCP servers that wait for a person to authorize tern.
	mcpAuth []tool.MCPServerState
	// mcpDown says why each MCP server that cannot be reached cannot.
	mcpDown map[string]string
}

func (rt *Runtime) load(agent, sessionID, turnID string) (*view, error) {
	v := &view{}
	err := rt.node.With(agent, func(d *capsule.Dir) error {
		a, err := d.RunnableAgent(agent, rt.node.Ours)
		if err != nil {
			return err
		}
		evs, err := d.Events()
		if err != nil {
			return err
		}
		all, _ := journal.Readable(evs)
		v.agent = a
		for _, e := range all {
			if e.Session == sessionID {
				v.events = append(v.events, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	st := session.Derive(v.events)
	v.sess = st.Session(sessionID)
	if v.sess == nil {
		return nil, fmt.Errorf("session %s: %w", sessionID, session.ErrNoSession)
	}
	v.turn = v.sess.Turn(turnID)
	if v.turn == nil {
		return nil, fmt.Errorf("turn %s is not in session %s", turnID, sessionID)
	}
	return v, nil
}

// hold runs f while the agent runs here, with appends held in: a freeze
// for a migration waits until f returns. f's appends go through
// rt.appendHeld with the epoch it is given.
func (rt *Runtime) hold(agent string, f func(epoch uint64) error) error {
	epoch, release, err := rt.node.Hold(agent)
	if err != nil {
		return err
	}
	defer release()
	if epoch == 0 {
		return errNotHere
	}
	return f(epoch)
}

// appendHeld appends drafts at epoch (inside hold), gossips them and hands
// each event of a turn to that turn's live stream.
func (rt *Runtime) appendHeld(ctx context.Context, agent string, epoch uint64, drafts []journal.Draft) ([]*journal.Event, error) {
	evs, err := rt.node.AppendAt(ctx, agent, epoch, drafts)
	if err != nil {
		return nil, err
	}
	rt.appends.Add(1)
	rt.mu.Lock()
	for _, e := range evs {
		if lt := rt.live[e.Turn]; lt != nil {
			lt.add(e)
			if e.Type == session.TurnEnded && rt.runners[lt.session] == nil {
				delete(rt.live, e.Turn) // ended with no runner (a cancel): nothing more comes
			}
		}
	}
	rt.mu.Unlock()
	return evs, nil
}

// appendTurn appends drafts while the agent runs here.
func (rt *Runtime) appendTurn(ctx context.Context, agent string, drafts ...journal.Draft) ([]*journal.Event, error) {
	var evs []*journal.Event
	err := rt.hold(agent, func(epoch uint64) error {
		var err error
		evs, err = rt.appendHeld(ctx, agent, epoch, drafts)
		return err
	})
	return evs, err
}

// draft makes a draft of the turn with body marshalled.
func draft(sessionID, turnID, typ string, body any) journal.Draft {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err) // maps, strings and raw JSON only
	}
	return journal.Draft{Type: typ, Session: sessionID, Turn: turnID, Body: b}
}

// run is a runner's loop (see the top of this file): it reloads the
// turn, asks session.Next what to do, and does it.
func (rt *Runtime) run(ctx context.Context, r *runner, lt *liveTurn) error {
	ws, err := rt.workspace(r.agent)
	if err != nil {
		return rt.fail(ctx, r, fmt.Sprintf("the agent's workspace could not be prepared: %v", err))
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !rt.node.Runs(r.agent) {
			return errNotHere // a safe point: a migration froze it, or it moved
		}
		v, err := rt.load(r.agent, r.session, r.turn)
		if errors.Is(err, capsule.ErrUnaccepted) {
			return rt.fail(ctx, r, fmt.Sprintf("agent %s: %v", r.agent, err))
		}
		if err != nil {
			return err
		}
		if v.turn.Status != session.Running {
			return nil
		}
		rt.addMCPTools(ctx, r.agent, v, ws)
		d, err := rt.settle(ctx, r, v, ws)
		if err != nil {
			return err
		}
		switch d.Do {
		case session.DoStop:
			return nil
		case session.DoAnswer, session.DoRun:
			if len(d.Actions) == 0 {
				continue // reload: a result may have been the model's cue
			}
			fallthrough // what Next found to ask before this call
		case session.DoPause:
			_, err := rt.appendTurn(ctx, r.agent, draft(r.session, r.turn, session.TurnEnded,
				map[string]any{"status": session.Paused, "required_actions": d.Actions}))
			return err
		case session.DoComplete:
			_, err := rt.appendTurn(ctx, r.agent, draft(r.session, r.turn, session.TurnEnded, map[string]any{"status": session.Completed}))
			return err
		case session.DoFail:
			return rt.fail(ctx, r, d.Why)
		case session.DoStep:
			if err := rt.step(ctx, r, v, lt); err != nil {
				return err
			}
		}
	}
}

// fail ends the turn as failed, saying why.
func (rt *Runtime) fail(ctx context.Context, r *runner, why string) error {
	_, err := rt.appendTurn(ctx, r.agent, draft(r.session, r.turn, session.TurnEnded, map[string]any{"status": session.Failed, "error": why}))
	return err
}

// turnEvents returns the turn's events in order: its sequence numbers are
// their positions, from 1.
func (v *view) turnEvents() []*journal.Event {
	byID := make(map[string]*journal.Event, len(v.events))
	for _, e := range v.events {
		byID[e.ID] = e
	}
	out := make([]*journal.Event, 0, len(v.turn.Events))
	for _, id := range v.turn.Events {
		out = append(out, byID[id])
	}
	return out
}

// steps counts the model steps of the turn (one turn.usage each).
func steps(v *view) int {
	n := 0
	for _, e := range v.turnEvents() {
		if e.Type == provider.UsageType {
			n++
		}
	}
	return n
}

// callPolicy is how the runtime treats one call: the built-in tool if it
// is one, whether agent.json declares it, its effect and whether it needs
// approval.
type callPolicy struct {
	builtin  tool.Tool
	isBuilt  bool
	declared bool
	effect   string
	approval bool
}

// writes reports whether the call may change the workspace, so that a
// snapshot follows it.
func (p callPolicy) writes() bool { return p.effect != tool.Pure && !p.builtin.NoWorkspace }

// policyOf is the policy of a call of name with args in agent a: a
// built-in tool's effect comes from the tool (http_request's from its
// method); agent.json's "approval" overrides the default; a declared tool
// that is not built in is the client's (at-most-once, its effect as
// declared).
func policyOf(a capsule.Agent, name string, args json.RawMessage, mcpTools map[string]tool.Tool) callPolicy {
	var p callPolicy
	i := slices.IndexFunc(a.Tools, func(t capsule.Tool) bool { return t.Name == name })
	if t, ok := mcpTools[name]; ok {
		// Declared by mcp_servers; agent.json may still list it, to
		// give it another effect or approval.
		var decl *capsule.Tool
		if i >= 0 {
			decl = &a.Tools[i]
		}
		p.builtin, p.isBuilt, p.declared = t, true, true
		p.effect, p.approval = tool.MCPPolicy(t, decl)
		return p
	}
	p.declared = i >= 0
	p.builtin, p.isBuilt = tool.Builtin(name)
	if p.isBuilt {
		p.effect, p.approval = p.builtin.EffectOf(args)
	} else {
		p.effect, p.approval = tool.AtMostOnce, true
		if p.declared && a.Tools[i].Effect != "" {
			p.effect = a.Tools[i].Effect
			p.approval = p.effect != tool.Pure
		}
	}
	if i >= 0 && a.Tools[i].Approval != nil {
		p.approval = *a.Tools[i].Approval
	}
	return p
}

// settle decides, under the agent's workspace lock, what the turn does
// next (session.Next), and carries out what concerns its tools: the status
// check of an unfinished operation, a result to write, a call to run. It
// returns the decision. Nothing of an unfinished call may still run while
// the runtime decides what became of it: a node killed during the call
// left its record, and the group is ended (and gone) first.
func (rt *Runtime) settle(ctx context.Context, r *runner, v *view, ws string) (session.Decision, error) {
	unlock, err := rt.workspaces.lock(ctx, r.agent)
	if err != nil {
		return session.Decision{}, err
	}
	defer unlock()
	for _, in := range v.sess.Unfinished() {
		if err := rt.processes().End(ctx, in.OperationID); err != nil {
			return session.Decision{}, fmt.Errorf("operation %s cannot be reconciled while its processes run: %w", in.OperationID, err)
		}
	}
	policy := session.Policy{MaxSteps: maxSteps, Tool: func(name string, args json.RawMessage) session.ToolPolicy {
		p := policyOf(v.agent, name, args, v.mcp)
		tp := session.ToolPolicy{Offered: p.declared, Runs: p.isBuilt, Approval: p.approval}
		if !tp.Offered {
			tp.Missing = noTool(v, name)
		}
		return tp
	}}
	sv := session.View{Session: v.sess, Turn: v.turn, Events: v.events, Steps: steps(v), Checks: map[string]session.Check{}, Waiting: mcpAuthActions(v)}
	for {
		d := session.Next(sv, policy)
		switch d.Do {
		case session.DoCheck:
			sv.Checks[d.OperationID] = rt.check(ctx, r, v, ws, d)
			continue
		case session.DoAnswer:
			var drafts []journal.Draft
			if d.Outcome != nil {
				drafts = append(drafts, draft(r.session, r.turn, session.OperationOutcome, d.Outcome))
			}
			drafts = append(drafts, toolResult(r.session, r.turn, d.CallID, d.Text, d.IsError))
			_, err := rt.appendTurn(ctx, r.agent, drafts...)
			return d, err
		case session.DoRun:
			p := policyOf(v.agent, d.Tool, d.Arguments, v.mcp)
			c := tool.Call{Workspace: ws, Arguments: d.Arguments, Approved: d.Approved}
			if d.Retry {
				c = tool.Call{Workspace: ws, Arguments: d.Arguments, OperationID: d.OperationID, Memory: &turnMemory{rt, r, 0}}
			}
			return d, rt.callTool(ctx, r, d.CallID, d.OperationID, p, c, d.Retry)
		}
		return d, nil
	}
}

// check runs the status check of the unfinished operation d names: what
// its tool says became of it, or CheckUnknown when it has no check or the
// check cannot tell.
func (rt *Runtime) check(ctx context.Context, r *runner, v *view, ws string, d session.Decision) session.Check {
	p := policyOf(v.agent, d.Tool, d.Arguments, v.mcp)
	if !p.isBuilt {
		return session.CheckUnknown
	}
	c := tool.Call{Workspace: ws, Arguments: d.Arguments, OperationID: d.OperationID, Memory: &turnMemory{rt, r, 0}}
	if ch, err := p.builtin.Check(ctx, c); err == nil {
		return ch
	}
	return session.CheckUnknown
}

// noTool says why there is no tool name to call: an MCP server that cannot
// be reached or waits for authorization, or a name agent.json does not
// declare.
func noTool(v *view, name string) string {
	if rest, ok := strings.CutPrefix(name, tool.MCPPrefix); ok {
		server, _, _ := strings.Cut(rest, "__")
		if why, down := v.mcpDown[server]; down {
			return fmt.Sprintf("The MCP server %s cannot be reached now, so %s is not offered: %s", server, name, why)
		}
		for _, st := range v.mcpAuth {
			if st.Name == server {
				return fmt.Sprintf("The MCP server %s waits for a person to authorize tern, so %s is not offered yet.", server, name)
			}
		}
	}
	return fmt.Sprintf("There is no tool %q: agent.json declares %s.", name, toolNames(v.agent))
}

func toolNames(a capsule.Agent) string {
	if len(a.Tools) == 0 {
		return "no tools"
	}
	names := make([]string, len(a.Tools))
	for i, t := range a.Tools {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// turnMemory is the agent's memory as a tool call of a turn reaches it:
// searches through the node, notes appended under the call's hold (epoch)
// as events of the turn.
type turnMemory struct {
	rt    *Runtime
	r     *runner
	epoch uint64
}

func (m *turnMemory) Search(ctx context.Context, q memory.Query) ([]memory.Result, error) {
	return m.rt.SearchMemory(ctx, m.r.agent, q)
}

func (m *turnMemory) Notes() (memory.Notes, error) {
	mem, err := m.rt.agentMemory(m.r.agent)
	if err != nil {
		return nil, err
	}
	return mem.Notes, nil
}

func (m *turnMemory) Note(ctx context.Context, id, text string, tags []string, revise bool) error {
	var d journal.Draft
	var err error
	if revise {
		var notes memory.Notes
		if notes, err = m.Notes(); err != nil {
			return err
		}
		n := notes.Find(id)
		if n == nil || n.Removed() {
			return fmt.Errorf("note %s: %w", id, memory.ErrNoNote)
		}
		d, err = memory.ReviseDraft(n, text, tags)
	} else {
		d, err = memory.AddDraftAs(id, text, tags)
	}
	if err != nil {
		return err
	}
	d.Session, d.Turn = m.r.session, m.r.turn
	_, err = m.rt.appendHeld(ctx, m.r.agent, m.epoch, []journal.Draft{d})
	return err
}

// toolResult is a tool_result draft with one text part.
func toolResult(sessionID, turnID, callID, text string, isError bool) journal.Draft {
	return draft(sessionID, turnID, "tool_result", map[string]any{
		"call_id": callID, "content": []any{map[string]string{"type": "text", "text": text}}, "is_error": isError})
}

// runBuiltin runs p's built-in tool with c. shell's command gets the
// variables the agent's environment (environment/spec.json) declares, its
// secrets from this node's store (tool.DeclaredEnv); a secret that does not
// resolve here is a Go error saying how to set it, and nothing runs.
func (rt *Runtime) runBuiltin(ctx context.Context, agent string, p callPolicy, c tool.Call) (tool.Result, error) {
	if p.builtin.Name == "shell" {
		var spec capsule.EnvSpec
		err := rt.node.With(agent, func(d *capsule.Dir) (err error) {
			spec, err = d.AcceptedEnvironment()
			return err
		})
		if err == nil {
			c.Env, err = tool.DeclaredEnv(spec, rt.cfg.Secrets)
		}
		if err != nil {
			return tool.Result{}, fmt.Errorf("the command did not run: %w", err)
		}
	}
	return p.builtin.Run(ctx, c)
}

// callTool runs one call of a built-in tool. A non-pure call runs between
// its operation.intent (unless retrying one: then the intent is there) and
// its operation.outcome, all under one hold, so a freeze never splits it.
func (rt *Runtime) callTool(ctx context.Context, r *runner, callID, opID string, p callPolicy, c tool.Call, retry bool) error {
	return rt.hold(r.agent, func(epoch uint64) error {
		c.Memory = &turnMemory{rt, r, epoch}
		c.Processes = rt.processes()
		c.Home = rt.cfg.Home // what a confined shell command may not read
		pure := p.effect == tool.Pure
		if !pure {
			c.OperationID = opID
			if !retry {
				if _, err := rt.appendHeld(ctx, r.agent, epoch, []journal.Draft{draft(r.session, r.turn, session.OperationIntent,
					map[string]any{"operation_id": opID, "call_id": callID, "tool": p.builtin.Name, "effect": p.effect})}); err != nil {
					return err
				}
			}
		}
		res, err := rt.runBuiltin(ctx, r.agent, p, c)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err() // cancelled: the intent stays without outcome, to reconcile
			}
			if errors.Is(err, tool.ErrUncertain) && !pure && !retry {
				// The intent stays without outcome: the next pass
				// reconciles it (a person says, for an at-most-once call).
				rt.log.Warn("a tool call may or may not have taken effect; it is reconciled, not run again blind", "agent", r.agent, "call", callID, "err", err)
				if p.writes() {
					rt.snapshotHeld(ctx, r.agent, epoch, c.Workspace) // whatever it did to the workspace moves with it
				}
				return nil
			}
			res = tool.Result{Output: fmt.Sprintf("The tool could not run: %v", err), IsError: true}
		}
		drafts := []journal.Draft{}
		if !pure {
			status := "done"
			if res.IsError {
				status = "error"
			}
			drafts = append(drafts, draft(r.session, r.turn, session.OperationOutcome, map[string]any{"operation_id": opID, "status": status}))
		}
		result, err := rt.toolResultOf(r, callID, res)
		if err != nil {
			return err
		}
		if _, err = rt.appendHeld(ctx, r.agent, epoch, append(drafts, result)); err != nil {
			return err
		}
		if p.writes() {
			rt.snapshotHeld(ctx, r.agent, epoch, c.Workspace)
		}
		return nil
	})
}

// agentBlobs gives render the blobs of an agent's capsule: the images and
// files of its messages and tool results.
type agentBlobs struct {
	node  Node
	agent string
}

// maxRequestBlob bounds one image or file read into a request body.
const maxRequestBlob = 64 << 20

func (b agentBlobs) Blob(cid string) (data []byte, err error) {
	err = b.node.With(b.agent, func(d *capsule.Dir) error {
		data, err = d.ReadBlob(cid, maxRequestBlob)
		return err
	})
	return data, err
}

// toolResultOf is the tool_result draft of res: its text, and its images
// and files stored as blobs of the capsule first, named by CID.
func (rt *Runtime) toolResultOf(r *runner, callID string, res tool.Result) (journal.Draft, error) {
	if len(res.Parts) == 0 {
		return toolResult(r.session, r.turn, callID, res.Output, res.IsError), nil
	}
	var content []any
	err := rt.node.With(r.agent, func(d *capsule.Dir) error {
		for _, p := range res.Parts {
			m := p.Media
			if m == nil {
				if p.Text != "" {
					content = append(content, map[string]string{"type": "text", "text": p.Text})
				}
				continue
			}
			cid, err := d.PutBlob(m.Data)
			if err != nil {
				return fmt.Errorf("keeping the %s the tool answered with: %w", m.Kind, err)
			}
			part := map[string]string{"type": m.Kind, "cid": cid, "media_type": m.MediaType}
			if m.Kind == "file" {
				part["name"] = m.Name
			}
			content = append(content, part)
		}
		return nil
	})
	return draft(r.session, r.turn, "tool_result", map[string]any{"call_id": callID, "content": content, "is_error": res.IsError}), err
}

// step takes one model step: it renders the session for the turn's
// model, streams the answer to the turn's subscribers and appends the
// step whole. A provider's error fails the turn with its words; a request
// over the context window is fitted to three quarters of its estimate and
// sent once more.
func (rt *Runtime) step(ctx context.Context, r *runner, v *view, lt *liveTurn) error {
	s, err := rt.settings(r.agent, v)
	if err != nil {
		return rt.fail(ctx, r, err.Error())
	}
	m, err := rt.models(s)
	if err != nil {
		return rt.fail(ctx, r, err.Error())
	}
	target := render.Target{Provider: s.Wire(), Model: s.Model, Host: s.Host(), Stream: true}
	var res *provider.Result
	for attempt := 0; ; attempt++ {
		req, err := render.Render(render.Request{Events: v.events, Agent: v.agent, Target: target, Blobs: agentBlobs{rt.node, r.agent}})
		if err != nil {
			return rt.fail(ctx, r, fmt.Sprintf("the request could not be rendered: %v", err))
		}
		lt.beginStep()
		res, err = m.Step(ctx, req.Body, lt.delta)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, provider.ErrContextLength) && attempt == 0 && req.Tokens > 0 {
			target.Window = req.Tokens * 3 / 4
			continue
		}
		if errors.Is(err, provider.ErrUnavailable) || errors.Is(err, provider.ErrRateLimited) {
			_, err := rt.appendTurn(ctx, r.agent, draft(r.session, r.turn, session.TurnEnded,
				map[string]any{"status": session.Failed, "error": err.Error(), "retryable": true}))
			return err
		}
		return rt.fail(ctx, r, err.Error())
	}
	for i := range res.Drafts {
		res.Drafts[i].Session, res.Drafts[i].Turn = r.session, r.turn
	}
	_, err = rt.appendTurn(ctx, r.agent, res.Drafts...)
	return err
}

// defaultKeySecrets names the secret a turn's key comes from when the turn
// asks for another provider than agent.json's (whose key_secret is for its
// own provider).
var defaultKeySecrets = map[providerid.ID]string{
	providerid.OpenAIChat: "OPENAI_KEY", providerid.OpenAIResponses: "OPENAI_KEY", providerid.Anthropic: "ANTHROPIC_KEY", providerid.Gemini: "GEMINI_KEY",
}

// settings are the model settings of the turn: agent.json's, or those the
// turn asked for.
func (rt *Runtime) settings(agent string, v *view) (provider.Settings, error) {
	a := v.agent
	m := v.turn.Model
	if m == nil || (m.Provider == a.Provider && m.Name == a.Model) {
		return provider.SettingsFor(a, rt.cfg.Secrets)
	}
	if m.Provider != a.Provider {
		a.BaseURL, a.KeySecret = "", defaultKeySecrets[providerid.ID(m.Provider)]
	}
	a.Provider, a.Model = m.Provider, m.Name
	s, err := provider.SettingsFor(a, rt.cfg.Secrets)
	if err != nil && a.KeySecret != "" {
		err = fmt.Errorf("the turn asks for %s model %s, whose key comes from the secret %s on the node that runs the agent: %w", m.Provider, m.Name, a.KeySecret, err)
	}
	return s, err
}

// workspace returns the agent's workspace folder on this node,
// materializing it from the capsule's snapshot if it is not there.
func (rt *Runtime) workspace(agent string) (string, error) {
	ws := filepath.Join(rt.cfg.Home, WorkspacesDir, agent)
	if _, err := os.Stat(ws); err == nil {
		return ws, nil
	}
	if err := os.MkdirAll(filepath.Dir(ws), 0o700); err != nil {
		return "", err
	}
	err := rt.node.With(agent, func(d *capsule.Dir) error { return d.Materialize(ws) })
	return ws, err
}

// snapshotHeld records the workspace in the capsule after a tool call
// that may have changed it, so the change syncs and migrates: inside the
// call's hold (rt.hold), so a freeze for a migration waits for it too. A
// failure is logged: the next call's snapshot takes the change with it.
func (rt *Runtime) snapshotHeld(ctx context.Context, agent string, epoch uint64, ws string) {
	rt.snapshots.Add(1)
	err := rt.node.SnapshotAt(ctx, agent, epoch, ws)
	if err != nil {
		rt.log.Warn("could not snapshot the workspace after a tool call", "agent", agent, "err", err)
	}
}

// handOver waits for the migration that stopped a runner to end: if the
// agent runs here again (the migration aborted), its turns resume; if it
// runs elsewhere, the turn's live stream says where.
func (rt *Runtime) handOver(agent string, lt *liveTurn) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if rt.node.Runs(agent) {
			rt.dropLive(lt.turn, lt) // its subscribers follow the resumed runner
			rt.Resume(agent)
			return
		}
		st, err := rt.node.HolderState(agent)
		if err == nil && st.State != "frozen" && st.Holder.Peer != "" && st.Holder.Peer != rt.node.Self() {
			lt.move(st.Holder.Peer)
			return
		}
		select {
		case <-rt.ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// begin writes a planned turn (drafts, from st.Plan under the session's
// lock) and starts its runner. The MCP authorizations its answers (rs)
// give are handed over first: one that fails writes nothing and wraps
// api.ErrAuthorizing. A running turn the plan cancels is stopped before its
// end is written.
func (rt *Runtime) begin(ctx context.Context, agent, sessionID, turnID string, st *session.State, drafts []journal.Draft, rs []session.Response) error {
	if err := rt.authorizeAnswers(ctx, agent, st.Session(sessionID).Pending(), rs); err != nil {
		return fmt.Errorf("%w: %w", api.ErrAuthorizing, err)
	}
	if active := st.Session(sessionID).Active(); active != nil {
		rt.stop(sessionID) // cancel_active: its runner stops before its end is written
	}
	if _, err := rt.appendTurn(ctx, agent, drafts...); err != nil {
		return err
	}
	rt.start(agent, sessionID, turnID)
	return nil
}

// TurnEvents returns the turn's events in order, from the journal.
func (rt *Runtime) TurnEvents(agent string, t *session.Turn) []*journal.Event {
	v, err := rt.load(agent, t.Session, t.ID)
	if err != nil {
		return nil
	}
	return v.turnEvents()
}

// The runtime as the API drives it (api.Runtime).

// State is the agent's sessions and turns.
func (rt *Runtime) State(agent string) (*session.State, error) { return rt.state(agent) }

// AgentOf is the agent a session belongs to.
func (rt *Runtime) AgentOf(sessionID string) (string, error) { return rt.agentOf(sessionID) }

// NewSession writes a new session of the agent and returns its id.
func (rt *Runtime) NewSession(ctx context.Context, agent string) (string, error) {
	id := newID("ses_")
	if _, err := rt.appendTurn(ctx, agent, journal.Draft{Type: session.SessionCreated, Session: id, Body: json.RawMessage(`{}`)}); err != nil {
		return "", err
	}
	rt.mu.Lock()
	rt.sessions[id] = agent
	rt.mu.Unlock()
	return id, nil
}

// NewTurn plans a turn of req in the session and begins it. A session
// whose turn runs refuses it (session.ErrTurnRunning), naming that turn
// (active).
func (rt *Runtime) NewTurn(ctx context.Context, agent, sessionID string, req session.Request) (turn, active string, err error) {
	// One request at a time per session: Plan reads the state the append
	// extends.
	unlock, _ := rt.sessionLocks.lock(context.Background(), sessionID)
	defer unlock()
	st, err := rt.state(agent)
	if err != nil {
		return "", "", err
	}
	req.Turn = newID("turn_")
	drafts, err := st.Plan(sessionID, req)
	if err != nil {
		if errors.Is(err, session.ErrTurnRunning) {
			active = st.Session(sessionID).Active().ID
		}
		return "", active, err
	}
	if err := rt.begin(ctx, agent, sessionID, req.Turn, st, drafts, req.Responses); err != nil {
		return "", "", err
	}
	return req.Turn, "", nil
}

// CancelTurn stops a running turn's runner and writes its end, cancelled,
// and returns the turn as it is then.
func (rt *Runtime) CancelTurn(ctx context.Context, agent string, t *session.Turn) (*session.Turn, error) {
	unlock, _ := rt.sessionLocks.lock(context.Background(), t.Session)
	defer unlock()
	rt.stop(t.Session)
	st, err := rt.state(agent)
	if err != nil {
		return nil, err
	}
	if cur := st.Session(t.Session).Turn(t.ID); cur.Status == session.Running {
		if _, err := rt.appendTurn(ctx, agent, draft(t.Session, t.ID, session.TurnEnded, map[string]any{"status": session.Cancelled})); err != nil {
			return nil, err
		}
		if st, err = rt.state(agent); err != nil {
			return nil, err
		}
	}
	return st.Session(t.Session).Turn(t.ID), nil
}

// Live is the turn's live stream.
func (rt *Runtime) Live(agent, sessionID, turnID string) api.Live {
	return rt.liveOf(agent, sessionID, turnID)
}

// LockWorkspace takes the agent's workspace folder, as a tool call and
// the snapshot after it do: a snapshot by hand takes it too.
func (rt *Runtime) LockWorkspace(ctx context.Context, agent string) (unlock func(), err error) {
	return rt.workspaces.lock(ctx, agent)
}

// Wait waits for the MCP connections being closed in the background; the
// node's Close calls it.
func (rt *Runtime) Wait() { rt.closing.Wait() }

// SetModels makes the model of each step with models instead of
// provider.New: tests put theirs in between.
func (rt *Runtime) SetModels(models func(provider.Settings) (provider.Model, error)) {
	rt.models = models
}

// Writes counts what the runtime wrote, for the benchmarks: durable
// appends (each one group commit: one write and one fsync of the
// journal) and workspace snapshots.
func (rt *Runtime) Writes() (appends, snapshots int64) {
	return rt.appends.Load(), rt.snapshots.Load()
}

// MCPConnected reports whether the runtime holds sessions with the
// agent's MCP servers (it does while the agent runs here).
func (rt *Runtime) MCPConnected(agent string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.mcps[agent] != nil
}
