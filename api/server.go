package api

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

// Config is what a Server serves, and how.
type Config struct {
	Node    Node
	Runtime Runtime
	// Home is $TERN_HOME: errors name the paths inside it relative to it,
	// and exports are staged in it.
	Home string
	// Info is node.json: the API's address, its bearer token, the peer ID.
	Info Info
	// Metrics serves /metrics; MetricsPublic serves it without the token.
	Metrics       http.Handler
	MetricsPublic bool
	Log           *slog.Logger
}

// Server is the node's loopback HTTP API and web page (docs/API.md).
type Server struct {
	cfg     Config
	node    Node
	rt      Runtime
	log     *slog.Logger
	ui      uiAuth      // the web page's login codes and sessions
	streams openStreams // the turn streams it serves
	// heartbeat is how often a turn stream with nothing to say sends a
	// comment.
	heartbeat time.Duration
}

// New makes the API of cfg.Node.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	srv := &Server{cfg: cfg, node: cfg.Node, rt: cfg.Runtime, log: cfg.Log, heartbeat: heartbeat}
	srv.ui.cookie = uiCookie
	if u, err := url.Parse(cfg.Info.API); err == nil {
		srv.ui.cookie += u.Port()
	}
	return srv
}

// Handler is the API's handler: every route, behind the loopback, token
// and CSRF checks.
func (srv *Server) Handler() http.Handler { return srv.routes() }

// CutStreams ends every turn stream the API serves, as dropped
// connections would, and returns how many there were.
func (srv *Server) CutStreams() int { return srv.streams.cut() }

// SetHeartbeat sets how often an idle turn stream sends a comment (15 s).
func (srv *Server) SetHeartbeat(d time.Duration) { srv.heartbeat = d }

// maxImport bounds a capsule tar uploaded to the API.
const maxImport = 64 << 30

// MaxDraftLine bounds one line of the drafts appended through the API.
const MaxDraftLine = 64 << 20

// routes is the loopback HTTP API. Every request must name the API as a
// loopback address (see loopbackOnly) and carry the bearer token of
// node.json; /metrics, in Prometheus's text format, needs the token too
// unless cfg.MetricsPublic.
//
// An error answer is {"error": "..."}, naming paths inside $TERN_HOME
// relative to it, with a status that says whose fault it was:
//
//   - 400: the request is malformed: not an agent id, a draft line or a
//     peer ID that does not parse, an uploaded tar that is not a sound
//     capsule.
//   - 401: no bearer token, or the wrong one.
//   - 403: a Host or Origin other than the API's loopback address.
//   - 404: the node holds no capsule of that agent.
//   - 409: the request conflicts with what the node holds: an uploaded
//     copy differs from the held one in a file tern cannot merge, or this
//     machine's own chain in the journal is forked or broken.
//   - 413: over a limit: a tar over maxImport, a draft line over 64 MiB.
//   - 500: the node failed: its disk, a damaged capsule of its own, a
//     peers.json or shares.json it cannot reload.
//   - 503: the node is shutting down; try again once it runs.
func (srv *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", srv.handleStatus)
	mux.HandleFunc("GET /v1/capsules", srv.handleList)
	mux.HandleFunc("POST /v1/capsules", srv.handleImport)
	mux.HandleFunc("GET /v1/capsules/{id}/export", srv.handleExport)
	mux.HandleFunc("POST /v1/capsules/{id}/events", srv.handleAppend)
	mux.HandleFunc("POST /v1/capsules/{id}/heal", srv.handleHeal)
	mux.HandleFunc("POST /v1/capsules/{id}/accept", srv.handleAccept)
	mux.HandleFunc("GET /v1/capsules/{id}/members", srv.handleMembers)
	mux.HandleFunc("POST /v1/capsules/{id}/members", srv.handleAddMember)
	mux.HandleFunc("DELETE /v1/capsules/{id}/members/{peer}", srv.handleRemoveMember)
	mux.HandleFunc("POST /v1/capsules/{id}/snapshot", srv.handleSnapshot)
	mux.HandleFunc("POST /v1/capsules/{id}/migrate", srv.handleMigrate)
	mux.HandleFunc("GET /v1/capsules/{id}/holder", srv.handleHolder)
	mux.HandleFunc("POST /v1/capsules/{id}/resolve", srv.handleResolve)
	mux.HandleFunc("GET /v1/capsules/{id}/sync", srv.handleSyncState)
	mux.HandleFunc("POST /v1/capsules/{id}/model/test", srv.handleModelTest)
	mux.HandleFunc("POST /v1/peers/reload", srv.handleReloadPeers)
	mux.HandleFunc("GET /v1/peers/pending", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, srv.node.PendingPeers()) })
	mux.HandleFunc("POST /v1/shares/reload", srv.handleReloadShares)
	srv.sessionRoutes(mux)
	mux.HandleFunc("POST /v1/ui/codes", srv.handleUICode)
	root := http.NewServeMux()
	srv.uiRoutes(root)
	if metrics := srv.cfg.Metrics; metrics != nil {
		if !srv.cfg.MetricsPublic {
			metrics = srv.auth(metrics)
		}
		root.Handle("GET /metrics", metrics)
	}
	root.HandleFunc("GET "+MCPCallbackPath, srv.handleMCPCallback) // admitted by its state: see there
	root.Handle("/", srv.auth(mux))
	var host, port string // left empty (refusing every request) if the address does not parse
	if api, err := url.Parse(srv.cfg.Info.API); err == nil {
		host, port = api.Hostname(), api.Port()
	}
	return loopbackOnly(host, port, root)
}

// loopbackNames are the names a request may give the API by, besides the
// address it listens on.
var loopbackNames = []string{"127.0.0.1", "localhost", "::1"}

// loopbackOnly serves a request only if its Host is a loopback name (or
// listenHost, the loopback address the API listens on) with the API's own
// port, and its Origin, if it has one, is http:// and such a host. A web
// page the person visits thus cannot use the API: not through DNS
// rebinding (its own name made to resolve to 127.0.0.1 stays in Host) nor
// by a request from its own origin. Anything else is refused with 403.
func loopbackOnly(listenHost, port string, next http.Handler) http.Handler {
	names := append(slices.Clone(loopbackNames), listenHost)
	ours := func(hostport string) bool {
		h, p, err := net.SplitHostPort(hostport)
		if err != nil { // no port: the default one
			h, p = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
		}
		if p == "" {
			p = "80"
		}
		return p == port && slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(h, n) })
	}
	refused := func(w http.ResponseWriter, header, value string) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s %q refused: this node's API answers only to http://127.0.0.1:%s, http://localhost:%s or http://[::1]:%s",
			header, value, port, port, port))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ours(r.Host) {
			refused(w, "Host", r.Host)
			return
		}
		for _, o := range r.Header.Values("Origin") {
			rest, ok := strings.CutPrefix(o, "http://")
			if !ok || !ours(rest) {
				refused(w, "Origin", o)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// auth admits a request with the bearer token, or from the web page: a
// live session cookie and, for anything but GET and HEAD, the session's
// CSRF token (ui.go).
func (srv *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store") // answers about this node now, for its clients only
		if srv.bearerOK(r) {
			next.ServeHTTP(w, r)
			return
		}
		if _, s, ok := srv.ui.session(r); ok && r.Header.Get("Authorization") == "" {
			if r.Method != http.MethodGet && r.Method != http.MethodHead &&
				subtle.ConstantTimeCompare([]byte(r.Header.Get(uiCSRFHeader)), []byte(s.csrf)) != 1 {
				srv.httpError(w, http.StatusForbidden, errors.New("the page's request lacks the session's CSRF token (X-CSRF-Token), or has a wrong one: reload the page"))
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		srv.httpError(w, http.StatusUnauthorized, errors.New("missing or wrong bearer token (see node.json)"))
	})
}

// bearerOK reports whether r carries the node's bearer token.
func (srv *Server) bearerOK(r *http.Request) bool {
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+srv.cfg.Info.Token)) == 1
}

// httpError answers with code and {"error": message}, the message naming
// the paths inside $TERN_HOME relative to it (see homeRelative).
func (srv *Server) httpError(w http.ResponseWriter, code int, err error) {
	writeError(w, code, srv.homeRelative(err.Error()))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// homeRelative is HomeRelative of the node's home.
func (srv *Server) homeRelative(msg string) string { return HomeRelative(srv.cfg.Home, msg) }

// HomeRelative rewrites msg so that the paths inside home ($TERN_HOME) it
// holds are relative to it (capsules/<id>/manifest.json) and home itself
// reads "$TERN_HOME": where the node keeps its files is not the API's to
// tell. It knows the home by every absolute spelling the node's errors
// use: as given, cleaned, and with symbolic links resolved.
func HomeRelative(home, msg string) string {
	var homes []string
	if filepath.IsAbs(home) {
		homes = append(homes, home)
	}
	if abs, err := filepath.Abs(home); err == nil {
		homes = append(homes, abs)
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			homes = append(homes, real)
		}
	}
	for _, h := range homes {
		h = strings.TrimRight(h, string(filepath.Separator))
		if h == "" || filepath.Dir(h) == h { // a root: no path would be left to read
			continue
		}
		msg = relativeTo(msg, h)
	}
	return msg
}

// relativeTo rewrites every path in msg that is dir or lies inside it:
// dir/a/b becomes a/b, dir itself $TERN_HOME. A path only starting like
// dir (dir + "2/x") or holding it (/x + dir) is another path, left alone.
func relativeTo(msg, dir string) string {
	const seps = "/" + string(filepath.Separator)
	bounds := func(c byte) bool { return strings.IndexByte(" \t\n\"'`:;,()[]<>=", c) >= 0 }
	var b strings.Builder
	for {
		i := strings.Index(msg, dir)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		b.WriteString(msg[:i])
		rest := msg[i+len(dir):]
		inside := strings.TrimLeft(rest, seps)
		switch {
		case i > 0 && !bounds(msg[i-1]):
			b.WriteString(dir)
			msg = rest
		case len(inside) < len(rest) && inside != "" && !bounds(inside[0]):
			msg = inside
		case len(inside) < len(rest) || rest == "" || bounds(rest[0]):
			b.WriteString("$TERN_HOME")
			msg = inside
		default:
			b.WriteString(dir)
			msg = rest
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// Status is what GET /v1/status returns and tern status prints.
type Status struct {
	PeerID   string          `json:"peer_id"`
	Addrs    []string        `json:"addrs"`
	API      string          `json:"api"`
	Peers    []PeerStatus    `json:"peers"`
	Capsules []CapsuleStatus `json:"capsules"`
	// Transfers are the blobs moving between this node and its peers now.
	Transfers []Transfer `json:"transfers"`
}

// PeerStatus is a paired peer and whether it is connected now.
type PeerStatus struct {
	Peer
	Connected bool `json:"connected"`
	// Why says why a paired peer is not connected: never seen, no
	// address to dial, or the last dial's error (the other side refusing
	// this machine reads as a handshake that failed).
	Why string `json:"why,omitempty"`
	// DisconnectedAt is when the last connection with a paired peer that
	// is not connected now ended; absent if it was not connected since
	// this node started.
	DisconnectedAt *time.Time `json:"disconnected_at,omitempty"`
}

// CapsuleStatus is one held capsule's journal summary.
type CapsuleStatus struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"` // the agent's name, from agent.json
	Runs        bool           `json:"runs"` // this node runs the agent (holds it active)
	Events      int            `json:"events"`
	Vector      journal.Vector `json:"vector"`
	Forks       []journal.Fork `json:"forks"`
	Quarantined int            `json:"quarantined"` // events of forked or broken chains, kept in the journal
	Rejected    int            `json:"rejected"`    // lines peers sent that failed their checks (quarantine folder)
	// Refused counts the events of machines that are not the agent's
	// members that this node refused since it started (never stored;
	// each logged with its writer's key).
	Refused uint64 `json:"refused"`
	Wants   int    `json:"wants"` // blobs the journal refers to that are not here yet
	// Incomplete means the capsule is still arriving: it wants blobs
	// (a first copy from a peer comes as its journal, then its blobs;
	// the transfers in flight show their progress).
	Incomplete bool `json:"incomplete"`
	// Damaged says why the capsule could not be read, with paths relative
	// to $TERN_HOME; the other fields are then empty. The node does not
	// sync a damaged capsule; tern capsule verify names the damage.
	Damaged string `json:"damaged,omitempty"`
}

func (srv *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := srv.node.Status()
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	writeJSON(w, st)
}

func (srv *Server) handleList(w http.ResponseWriter, r *http.Request) {
	st, err := srv.node.Status()
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	writeJSON(w, st.Capsules)
}

// handleImport takes a capsule tar as the request body, unpacked as it
// arrives (Node.ImportFrom): nothing of it is kept when it is cut short or
// does not verify. With ?folder=/abs/path it takes that capsule folder on
// the node's machine instead, copied without a tar (Node.ImportFolder),
// and says how its blobs were copied ("copy").
func (srv *Server) handleImport(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Has("folder") {
		dir := q.Get("folder")
		if !filepath.IsAbs(dir) {
			srv.httpError(w, http.StatusBadRequest, fmt.Errorf("folder %q: give the absolute path of a capsule folder on the node's machine", dir))
			return
		}
		id, merged, copied, err := srv.node.ImportFolder(dir)
		if err != nil {
			code := statusOr(err, http.StatusBadRequest)
			if errors.Is(err, fs.ErrNotExist) {
				code = http.StatusBadRequest // the folder named
			}
			srv.httpError(w, code, fmt.Errorf("%s: %w", dir, err))
			return
		}
		writeJSON(w, map[string]any{"id": id, "merged": merged, "copy": copied})
		return
	}
	body := &readErrors{r: http.MaxBytesReader(w, r.Body, maxImport)}
	id, merged, err := srv.node.ImportFrom(body)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(body.err, &tooLarge):
		srv.httpError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("the uploaded tar is over the limit of %d bytes", maxImport))
		return
	case body.err != nil:
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("reading the uploaded tar: %w", body.err))
		return
	case err != nil:
		srv.httpError(w, statusOr(err, http.StatusBadRequest), fmt.Errorf("the uploaded tar: %w", err))
		return
	}
	writeJSON(w, map[string]any{"id": id, "merged": merged})
}

// readErrors is a reader that keeps its reader's error (io.EOF aside):
// when a copy to a file fails, it tells the client's fault from the disk's.
type readErrors struct {
	r   io.Reader
	err error
}

func (r *readErrors) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

func (srv *Server) handleExport(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	tmp, err := os.MkdirTemp(srv.cfg.Home, ".export-*")
	if err != nil {
		srv.httpError(w, http.StatusInternalServerError, err)
		return
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "capsule.tar")
	if err := srv.node.ExportFile(id, out); err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	http.ServeFile(w, r, out)
}

// handleAppend appends draft events (one JSON object per line) signed by
// this node, all or nothing, and returns their ids.
func (srv *Server) handleAppend(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	var drafts []journal.Draft
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 64<<10), MaxDraftLine)
	for line := 1; sc.Scan(); line++ {
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		d, err := journal.ParseDraft([]byte(b))
		if err != nil {
			srv.httpError(w, http.StatusBadRequest, fmt.Errorf("line %d: %w", line, err))
			return
		}
		drafts = append(drafts, d)
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		srv.httpError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("a draft line is over the limit of %d bytes", MaxDraftLine))
		return
	} else if err != nil {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("reading the drafts: %w", err))
		return
	}
	evs, err := srv.node.Append(r.Context(), id, drafts)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	writeJSON(w, map[string]any{"ids": ids})
}

// handleAccept accepts the hand edits of the node's copy of the agent
// ({"accepted": [file names]}; empty when every file matches). A file
// that does not parse is 400, naming it; damage to another file is 409.
func (srv *Server) handleAccept(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	names, err := srv.node.Accept(r.Context(), id)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	if names == nil {
		names = []string{}
	}
	writeJSON(w, map[string]any{"accepted": names})
}

// SnapshotRequest is the body of POST /v1/capsules/{id}/snapshot.
type SnapshotRequest struct {
	Workspace string   `json:"workspace"` // an absolute path of a folder on the node's machine
	Exclude   []string `json:"exclude"`   // patterns to leave out, as in .ternignore
}

// handleSnapshot records a folder on the node's machine as the agent's
// workspace snapshot (see Node.Snapshot) and answers with the snapshot
// event's body and the paths left out.
func (srv *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	var req SnapshotRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("the request body: %v (want {\"workspace\": \"/abs/path\", \"exclude\": [...]})", err))
		return
	}
	if !filepath.IsAbs(req.Workspace) {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("workspace %q: give the absolute path of a folder on the node's machine", req.Workspace))
		return
	}
	body, left, err := srv.node.Snapshot(r.Context(), id, req.Workspace, capsule.SnapshotOptions{Exclude: req.Exclude})
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	if left == nil {
		left = []string{}
	}
	writeJSON(w, map[string]any{"snapshot": body.Snapshot, "files": body.Files, "bytes": body.Bytes, "left_out": left})
}

// handleHeal heals the forks of this node's own chain in the agent's
// capsule (see capsule.Dir.Heal) and returns the ids of the events it
// appended ({"ids": []} when there was nothing to heal).
func (srv *Server) handleHeal(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	evs, err := srv.node.Heal(r.Context(), id)
	if err != nil && !errors.Is(err, journal.ErrNothingToHeal) {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	writeJSON(w, map[string]any{"ids": ids})
}

// SyncState is what the node knows of one capsule and one peer. The peer
// holds the whole capsule (InSync) once it holds every event this node
// holds and every blob the capsule holds or wants.
type SyncState struct {
	Ours journal.Vector `json:"ours"`
	// Peer is a vector of events both held when their last exchange
	// ended; null before the first.
	Peer journal.Vector `json:"peer"`
	// Events says whether the peer holds every event this node holds.
	Events bool `json:"events"`
	// Blobs is how many blobs the capsule holds or wants; PeerLacks, how
	// many of them the peer lacks. The peer is asked only once Events
	// holds; until then, or when it cannot be asked, all are counted.
	Blobs     int `json:"blobs"`
	PeerLacks int `json:"peer_lacks"`
	// Transfers are the capsule's blobs moving between the two right now.
	Transfers []Transfer `json:"transfers"`
	InSync    bool       `json:"in_sync"`
}

func (srv *Server) handleSyncState(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.agentID(w, r)
	if !ok {
		return
	}
	p, err := peer.Decode(r.URL.Query().Get("peer"))
	if err != nil {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("peer: %w", err))
		return
	}
	st, err := srv.node.SyncState(r.Context(), p, id)
	if err != nil {
		srv.httpError(w, StatusOf(err), err)
		return
	}
	writeJSON(w, st)
}

func (srv *Server) handleReloadPeers(w http.ResponseWriter, r *http.Request) {
	peers, err := srv.node.ReloadPeers()
	if err != nil {
		srv.httpError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, peers)
}

func (srv *Server) handleReloadShares(w http.ResponseWriter, r *http.Request) {
	if err := srv.node.ReloadShares(); err != nil {
		srv.httpError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, map[string]bool{"ok": true})
}

// agentID returns the request's agent id, or answers 400 if it is not one.
func (srv *Server) agentID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !capsule.ValidAgentID(id) {
		srv.httpError(w, http.StatusBadRequest, fmt.Errorf("%q is not an agent id", id))
		return "", false
	}
	return id, true
}
