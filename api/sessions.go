package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/providerid"
	"github.com/tern-dev/tern/internal/sse"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/session"
)

// The sessions API (docs/API.md, "Sessions and turns").

// heartbeat is how often an SSE stream with nothing to say sends a comment.
var heartbeat = 15 * time.Second

// heartbeatFrame is the comment it sends.
var heartbeatFrame, _ = sse.AppendComment(nil, "heartbeat")

// TurnInfo is a turn as the API shows it.
type TurnInfo struct {
	ID              string           `json:"id"`
	Session         string           `json:"session"`
	Agent           string           `json:"agent"`
	Status          session.Status   `json:"status"`
	Continues       string           `json:"continues,omitempty"`
	ContinuedBy     string           `json:"continued_by,omitempty"` // the turn that answered this paused one
	Error           string           `json:"error,omitempty"`
	Retryable       bool             `json:"retryable,omitempty"` // a failure of the model API that trying again may fix
	CancelledBy     string           `json:"cancelled_by,omitempty"`
	RequiredActions []session.Action `json:"required_actions"`
	Events          int              `json:"events"` // the sequence number of its last event
	// MovedTo is the peer that runs the agent now, when the turn runs and
	// this node does not run the agent.
	MovedTo string `json:"moved_to,omitempty"`
}

// PendingAction is a required action waiting for an answer, with where it
// waits.
type PendingAction struct {
	session.Action
	Agent   string `json:"agent"`
	Session string `json:"session"`
	Turn    string `json:"turn"`
}

func (srv *Server) sessionRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/agents/{agent}/sessions", srv.handleNewSession)
	mux.HandleFunc("GET /v1/agents/{agent}/sessions", srv.handleSessions)
	mux.HandleFunc("GET /v1/agents/{agent}/memory", srv.handleNotes)
	mux.HandleFunc("POST /v1/agents/{agent}/memory", srv.handleNote)
	mux.HandleFunc("GET /v1/agents/{agent}/memory/search", srv.handleSearch)
	mux.HandleFunc("POST /v1/agents/{agent}/memory/reindex", srv.handleReindex)
	mux.HandleFunc("GET /v1/agents/{agent}/mcp", srv.handleMCP)
	mux.HandleFunc("DELETE /v1/agents/{agent}/memory/{note}", srv.handleForget)
	mux.HandleFunc("GET /v1/agents/{agent}/actions", srv.handleActions)
	mux.HandleFunc("GET /v1/actions", srv.handleActions)
	mux.HandleFunc("POST /v1/sessions/{session}/turns", srv.handleNewTurn)
	mux.HandleFunc("GET /v1/sessions/{session}/turns", srv.handleTurns)
	mux.HandleFunc("GET /v1/sessions/{session}/turns/{turn}", srv.handleTurn)
	mux.HandleFunc("GET /v1/sessions/{session}/turns/{turn}/events", srv.handleTurnEvents)
	mux.HandleFunc("POST /v1/sessions/{session}/turns/{turn}/cancel", srv.handleCancelTurn)
	mux.HandleFunc("GET /v1/turns/{turn}", srv.handleTurnByID)
}

// handleTurnByID is GET /v1/turns/{turn}: the turn of that id in whichever
// session of the agents this node holds, as GET …/turns/{turn} answers it
// (its session included): what a command given only a turn id needs.
func (srv *Server) handleTurnByID(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("turn")
	agents, err := srv.node.Agents()
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	for _, agent := range agents {
		st, err := srv.rt.State(agent)
		if err != nil {
			continue
		}
		for _, s := range st.Sessions {
			if t := s.Turn(id); t != nil {
				writeJSON(w, srv.turnInfo(agent, t))
				return
			}
		}
	}
	srv.httpError(w, http.StatusNotFound, fmt.Errorf("no turn %s in the agents this node holds (tern session list AGENT lists a session's last turn)", id))
}

// pathAgent is the {agent} of the path, answered 400/404 if it is not an
// agent the node holds.
func (srv *Server) pathAgent(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("agent")
	if !capsule.ValidAgentID(id) {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("%q is not an agent id", id))
		return "", false
	}
	if !srv.node.Holds(id) {
		srv.httpError(w, http.StatusNotFound, fmt.Errorf("agent %s: %w", id, ErrUnknownAgent))
		return "", false
	}
	return id, true
}

// runsHere answers when the agent does not run on this node: turns run
// only where the agent runs. 503 with Retry-After when it is this node's
// to run, not yet or not now; 409 naming the node that runs it.
func (srv *Server) runsHere(w http.ResponseWriter, agent string) bool {
	err := srv.node.RunsHere(agent)
	if err == nil {
		return true
	}
	var nh *NotHere
	if !errors.As(err, &nh) {
		srv.httpError(w, StatusOf(err), err)
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	if nh.Later {
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"error": nh.Error()})
		return false
	}
	w.WriteHeader(http.StatusConflict)
	json.NewEncoder(w).Encode(map[string]any{"error": nh.Error(), "peer": nh.Peer})
	return false
}

// runnable answers 409 and reports false when the agent's agent.json
// cannot run (Node.Runnable). A session and a turn are refused before
// anything is written.
func (srv *Server) runnable(w http.ResponseWriter, agent string) bool {
	if err := srv.node.Runnable(agent); err != nil {
		srv.httpError(w, http.StatusConflict, err)
		return false
	}
	return true
}

// handleNewSession is POST /v1/agents/{agent}/sessions → 201 {"id"}.
func (srv *Server) handleNewSession(w http.ResponseWriter, r *http.Request) {
	agent, ok := srv.pathAgent(w, r)
	if !ok || !srv.runsHere(w, agent) || !srv.runnable(w, agent) {
		return
	}
	id, err := srv.rt.NewSession(r.Context(), agent)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]string{"id": id, "agent": agent})
}

// handleSessions is GET /v1/agents/{agent}/sessions: each session with its
// turns' count, its last turn's id and status, and the first words of its
// first message, the session with the newest event first.
func (srv *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	agent, ok := srv.pathAgent(w, r)
	if !ok {
		return
	}
	st, err := srv.rt.State(agent)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	type sessionInfo struct {
		ID       string         `json:"id"`
		Turns    int            `json:"turns"`
		LastTurn string         `json:"last_turn,omitempty"`
		Status   session.Status `json:"status,omitempty"`
		Preview  string         `json:"preview,omitempty"` // the first words of its first message
		clock    uint64         // of its newest event
	}
	evs, err := srv.node.Events(agent)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	view, _ := journal.Readable(evs)
	byID := map[string]*sessionInfo{}
	for id, s := range st.Sessions {
		si := &sessionInfo{ID: id, Turns: len(s.Turns)}
		if t := s.Last(); t != nil {
			si.LastTurn, si.Status = t.ID, t.Status
		}
		byID[id] = si
	}
	for _, e := range view {
		si := byID[e.Session]
		if si == nil {
			continue
		}
		si.clock = max(si.clock, e.Clock)
		if si.Preview == "" && e.Type == "message" {
			si.Preview = previewOf(e.Body)
		}
	}
	out := make([]sessionInfo, 0, len(byID))
	for _, si := range byID {
		out = append(out, *si)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].clock != out[j].clock {
			return out[i].clock > out[j].clock
		}
		return out[i].ID < out[j].ID
	})
	writeJSON(w, out)
}

// previewOf is the first words of a message body's text: at most 60
// characters, on one line.
func previewOf(body []byte) string {
	var m struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	for _, p := range m.Content {
		if p.Type == "text" && strings.TrimSpace(p.Text) != "" {
			text := strings.Join(strings.Fields(p.Text), " ")
			if r := []rune(text); len(r) > 60 {
				text = string(r[:59]) + "…"
			}
			return text
		}
	}
	return ""
}

// handleActions is GET /v1/actions (every agent this node runs: where
// the actions can be answered) and GET /v1/agents/{agent}/actions (that
// agent's, wherever it runs, from this node's copy): the pending required
// actions, each session's in the order of its calls.
func (srv *Server) handleActions(w http.ResponseWriter, r *http.Request) {
	var agents []string
	if r.PathValue("agent") != "" {
		agent, ok := srv.pathAgent(w, r)
		if !ok {
			return
		}
		agents = []string{agent}
	} else {
		all, err := srv.node.Agents()
		if err != nil {
			srv.httpError(w, StatusOf(err), err)
			return
		}
		for _, a := range all {
			if srv.node.Runs(a) {
				agents = append(agents, a)
			}
		}
	}
	out := []PendingAction{}
	for _, agent := range agents {
		st, err := srv.rt.State(agent)
		if err != nil {
			continue
		}
		for id, s := range st.Sessions {
			last := s.Last()
			for _, a := range s.Pending() {
				out = append(out, PendingAction{Action: a, Agent: agent, Session: id, Turn: last.ID})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Session < out[j].Session }) // each session's in call order
	writeJSON(w, out)
}

// turnRequest is the body of POST /v1/sessions/{session}/turns.
type turnRequest struct {
	Text         string             `json:"text"`
	Responses    []session.Response `json:"responses"`
	CancelActive bool               `json:"cancel_active"`
	Model        *session.Model     `json:"model"`
}

// sessionOf finds the session's agent, answering 404 if no agent this
// node holds has it.
func (srv *Server) sessionOf(w http.ResponseWriter, r *http.Request) (agent, sessionID string, ok bool) {
	sessionID = r.PathValue("session")
	agent, err := srv.rt.AgentOf(sessionID)
	if err != nil {
		srv.httpError(w, http.StatusNotFound, err)
		return "", "", false
	}
	return agent, sessionID, true
}

// handleNewTurn is POST /v1/sessions/{session}/turns → 201 {"id", "status"}.
func (srv *Server) handleNewTurn(w http.ResponseWriter, r *http.Request) {
	agent, sessionID, ok := srv.sessionOf(w, r)
	if !ok {
		return
	}
	var req turnRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxDraftLine))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("the request body: %v (want {\"text\": …} and/or {\"responses\": […]})", err))
		return
	}
	if m := req.Model; m != nil {
		s := provider.Settings{Provider: m.Provider, Model: m.Name}
		if err := s.Check(); err != nil {
			srv.httpError(w, http.StatusUnprocessableEntity, fmt.Errorf("model: %w", err))
			return
		}
		if providerid.ID(m.Provider) == providerid.Offline && m.Name != providerid.OfflineModel {
			srv.httpError(w, http.StatusUnprocessableEntity, fmt.Errorf("model: the offline provider has one model, %q", providerid.OfflineModel))
			return
		}
	}
	if !srv.runsHere(w, agent) {
		return
	}
	if !srv.runnable(w, agent) {
		return
	}
	turnID, active, err := srv.rt.NewTurn(r.Context(), agent, sessionID, session.Request{Text: req.Text, Responses: req.Responses, CancelActive: req.CancelActive, Model: req.Model})
	if err != nil {
		body := map[string]any{"error": srv.homeRelative(err.Error())}
		if active != "" {
			body["active_turn"] = active
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(StatusOf(err))
		json.NewEncoder(w).Encode(body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]any{"id": turnID, "session": sessionID, "status": session.Running})
}

// turnInfo is the API's view of turn t of the agent.
func (srv *Server) turnInfo(agent string, t *session.Turn) TurnInfo {
	ti := TurnInfo{ID: t.ID, Session: t.Session, Agent: agent, Status: t.Status, Continues: t.Continues, ContinuedBy: t.ContinuedBy, Error: t.Error, Retryable: t.Retryable,
		CancelledBy: t.CancelledBy, RequiredActions: t.Actions, Events: len(t.Events)}
	if ti.RequiredActions == nil {
		ti.RequiredActions = []session.Action{}
	}
	if t.Status == session.Running {
		ti.MovedTo = srv.node.MovedTo(agent)
	}
	return ti
}

// handleTurns is GET /v1/sessions/{session}/turns: its turns, newest last.
func (srv *Server) handleTurns(w http.ResponseWriter, r *http.Request) {
	agent, sessionID, ok := srv.sessionOf(w, r)
	if !ok {
		return
	}
	st, err := srv.rt.State(agent)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	out := []TurnInfo{}
	for _, t := range st.Session(sessionID).Turns {
		out = append(out, srv.turnInfo(agent, t))
	}
	writeJSON(w, out)
}

// handleTurn is GET /v1/sessions/{session}/turns/{turn}.
func (srv *Server) handleTurn(w http.ResponseWriter, r *http.Request) {
	agent, t, ok := srv.pathTurn(w, r)
	if !ok {
		return
	}
	writeJSON(w, srv.turnInfo(agent, t))
}

func (srv *Server) pathTurn(w http.ResponseWriter, r *http.Request) (string, *session.Turn, bool) {
	agent, sessionID, ok := srv.sessionOf(w, r)
	if !ok {
		return "", nil, false
	}
	st, err := srv.rt.State(agent)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return "", nil, false
	}
	t := st.Session(sessionID).Turn(r.PathValue("turn"))
	if t == nil {
		srv.httpError(w, http.StatusNotFound, fmt.Errorf("session %s has no turn %q", sessionID, r.PathValue("turn")))
		return "", nil, false
	}
	return agent, t, true
}

// handleCancelTurn is POST /v1/sessions/{session}/turns/{turn}/cancel: a
// running turn's runner stops and its end is written, cancelled; a turn
// already ended is answered as it is.
func (srv *Server) handleCancelTurn(w http.ResponseWriter, r *http.Request) {
	agent, t, ok := srv.pathTurn(w, r)
	if !ok {
		return
	}
	if t.Status != session.Running {
		writeJSON(w, srv.turnInfo(agent, t))
		return
	}
	if !srv.runsHere(w, agent) {
		return
	}
	cur, err := srv.rt.CancelTurn(r.Context(), agent, t)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	writeJSON(w, srv.turnInfo(agent, cur))
}

// handleTurnEvents is GET /v1/sessions/{session}/turns/{turn}/events: the
// turn's events as server-sent events, from after Last-Event-ID (or
// ?after=N), then live while the turn runs here, with the model's deltas
// as "delta" events (no id: they are previews, replaced by the step's
// events). It ends after turn.ended. When the agent moves while the turn
// runs, the stream goes on, relayed from the node that runs it now over
// libp2p (relay.go); with ?relay=0, or when that node cannot be reached,
// it ends with a "moved" event naming that node's peer ID instead.
func (srv *Server) handleTurnEvents(w http.ResponseWriter, r *http.Request) {
	agent, t, ok := srv.pathTurn(w, r)
	if !ok {
		return
	}
	after := 0
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		after, ok = srv.parseAfter(w, "Last-Event-ID", v)
		if !ok {
			return
		}
	} else if v := r.URL.Query().Get("after"); v != "" {
		after, ok = srv.parseAfter(w, "after", v)
		if !ok {
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := &sseOut{w: w}
	out.flusher, _ = w.(http.Flusher)
	ctx, done := srv.streams.add(r.Context())
	defer done()
	moved, sent := srv.streamTurn(ctx, out, agent, t, after)
	for hops := 0; moved != "" && r.URL.Query().Get("relay") != "0" && hops < 3; hops++ {
		next, n2, err := srv.relayTurn(ctx, out, moved, agent, t, sent)
		sent = n2
		if err != nil {
			srv.log.Info("could not relay a moved turn's stream; the client is told where it went", "turn", t.ID, "peer", moved, "err", err)
			break
		}
		moved = next
	}
	if moved != "" {
		out.buf.Write(encodeFrame(jsonFrame("moved", map[string]string{"peer": moved})))
	}
	out.flush()
}

// openStreams are the turn streams a node serves, so that a test can end
// them all from the server's side, as a dropped connection would.
type openStreams struct {
	mu      sync.Mutex
	next    int
	cancels map[int]context.CancelFunc
}

// add registers a stream; done unregisters it.
func (s *openStreams) add(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancels == nil {
		s.cancels = map[int]context.CancelFunc{}
	}
	id := s.next
	s.next++
	s.cancels[id] = cancel
	return ctx, func() {
		s.mu.Lock()
		delete(s.cancels, id)
		s.mu.Unlock()
		cancel()
	}
}

// cut ends every open stream and returns how many there were.
func (s *openStreams) cut() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cancel := range s.cancels {
		cancel()
	}
	return len(s.cancels)
}

// sseOut buffers server-sent events and writes them out on flush.
type sseOut struct {
	w       io.Writer
	flusher http.Flusher
	buf     bytes.Buffer
}

// flush writes what is buffered; false when the client is gone.
func (o *sseOut) flush() bool {
	if o.buf.Len() == 0 {
		return true
	}
	_, err := o.w.Write(o.buf.Bytes())
	o.buf.Reset()
	if o.flusher != nil {
		o.flusher.Flush()
	}
	return err == nil
}

// streamTurn writes the turn's events after sequence number after to out:
// replayed from the journal when the turn has ended or runs elsewhere,
// live while it runs here. It returns the peer that runs the agent now if
// the turn runs there (else ""), and the sequence number of the last event
// written.
func (srv *Server) streamTurn(ctx context.Context, out *sseOut, agent string, t *session.Turn, after int) (movedTo string, sent int) {
	for {
		movedTo, sent, detached := srv.streamTurnOnce(ctx, out, agent, t, after)
		if !detached {
			return movedTo, sent
		}
		// The runner stopped without ending the turn or moving it (a
		// cancel about to write its end, a freeze, a runner resumed
		// anew): find the turn again and go on from where the client is.
		after = sent
		st, err := srv.rt.State(agent)
		if err != nil || st.Session(t.Session) == nil || st.Session(t.Session).Turn(t.ID) == nil {
			return "", sent
		}
		t = st.Session(t.Session).Turn(t.ID)
		select {
		case <-ctx.Done():
			return "", sent
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// streamTurnOnce is one attempt of streamTurn; detached reports that the
// live stream it followed lost its runner.
func (srv *Server) streamTurnOnce(ctx context.Context, out *sseOut, agent string, t *session.Turn, after int) (movedTo string, sent int, detached bool) {
	replay := func() int {
		evs := srv.rt.TurnEvents(agent, t)
		sent := after
		for ; sent < len(evs); sent++ {
			out.buf.Write(encodeFrame(itemFrame(sent+1, evs[sent])))
		}
		out.flush()
		return sent
	}
	if t.Status != session.Running {
		return "", replay(), false
	}
	if !srv.node.Runs(agent) {
		if peer := srv.node.HolderElsewhere(ctx, agent); peer != "" {
			return peer, replay(), false
		}
		// The migration that froze it here aborted: it runs here again.
	}
	lt := srv.rt.Live(agent, t.Session, t.ID)
	sent, step, deltas := after, -1, 0
	tick := time.NewTicker(srv.heartbeat)
	defer tick.Stop()
	for {
		s := lt.Since(sent, step, deltas)
		for _, f := range s.Items {
			sent++
			out.buf.Write(f)
		}
		if s.Step != step {
			step, deltas = s.Step, 0
		}
		for _, f := range s.Deltas {
			deltas++
			out.buf.Write(f)
		}
		if s.Ended { // the snapshot holds every item, turn.ended the last
			out.flush()
			return "", sent, false
		}
		if s.MovedTo != "" {
			out.flush()
			return s.MovedTo, sent, false
		}
		if !out.flush() {
			return "", sent, false
		}
		if s.Detached {
			return "", sent, true
		}
		select {
		case <-ctx.Done():
			return "", sent, false
		case <-s.Changed:
		case <-tick.C:
			out.buf.Write(heartbeatFrame)
		}
	}
}

func (srv *Server) parseAfter(w http.ResponseWriter, name, v string) (int, bool) {
	after, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || after < 0 {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("%s %q is not a sequence number (0, 1, 2, …)", name, v))
		return 0, false
	}
	return after, true
}

// MaxFrame bounds one server-sent event that the client and the relay
// read: an event line (journal.MaxLineSize for what a node writes or takes
// from a peer; a capsule's file may hold longer) with its id and name.
const MaxFrame = 64 << 20

// itemFrame is the server-sent event of the turn's event number seq: id
// its sequence number, event its type, data the event as the journal holds
// it (one line of JSON).
func itemFrame(seq int, e *journal.Event) sse.Frame {
	return sse.Frame{ID: strconv.Itoa(seq), Event: e.Type, Data: string(e.Line())}
}

// jsonFrame is a server-sent event without an id whose data is v as JSON.
func jsonFrame(event string, v any) sse.Frame {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{}`)
	}
	return sse.Frame{Event: event, Data: string(b)}
}

// encodeFrame is f as the stream carries it. The writer refuses a field
// that could end its line and so forge the fields after it; none of the
// turn stream's fields can (event names are journal types, which are
// tokens, or this package's; data is JSON, whose line breaks are escaped),
// and a frame that did would be left out, never written as another.
func encodeFrame(f sse.Frame) []byte {
	b, _ := sse.Append(nil, f)
	return b
}

// ItemFrame is the turn stream's encoded server-sent event of the
// turn's event number seq (a live turn encodes each once, for every
// stream that follows it).
func ItemFrame(seq int, e *journal.Event) []byte { return encodeFrame(itemFrame(seq, e)) }

// DeltaFrame is the turn stream's encoded server-sent event of a delta of
// the model step in flight.
func DeltaFrame(d provider.Delta) []byte { return encodeFrame(jsonFrame("delta", deltaJSON(d))) }

// deltaJSON is a delta as the stream carries it.
func deltaJSON(d provider.Delta) map[string]any {
	kinds := map[provider.DeltaKind]string{provider.DeltaText: "text", provider.DeltaReasoning: "reasoning",
		provider.DeltaCall: "call", provider.DeltaCallArgs: "call_arguments"}
	m := map[string]any{"kind": kinds[d.Kind]}
	if d.Text != "" {
		m["text"] = d.Text
	}
	if d.Kind == provider.DeltaCall || d.Kind == provider.DeltaCallArgs {
		m["index"] = d.Index
	}
	if d.ID != "" {
		m["call_id"] = d.ID
	}
	if d.Name != "" {
		m["name"] = d.Name
	}
	return m
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
