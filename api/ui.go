package api

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"sync"
	"time"
)

// The web page (docs/API.md, "The web page") is served by the node from
// files embedded in the binary, under /ui/. It is no way around the API's
// protection: a person gets in with a one-time login code that only a
// holder of the bearer token can mint (tern ui), which becomes an HttpOnly,
// SameSite=Strict session cookie; a request that changes state with that
// cookie also needs the session's CSRF token in X-CSRF-Token. The bearer
// token itself never reaches the page. Host and Origin are checked for
// every request, as for the API (loopbackOnly).

//go:embed ui
var uiFiles embed.FS

const (
	uiCookie      = "tern_ui_" // and the API's port: cookies do not tell ports apart, and two nodes may share a browser
	uiCSRFHeader  = "X-CSRF-Token"
	uiCodeLife    = 5 * time.Minute
	uiSessionLife = 12 * time.Hour
)

// uiAuth holds the page's login codes and sessions, in memory: a node
// that restarts forgets them, and the person runs tern ui again.
type uiAuth struct {
	cookie   string // the session cookie's name
	mu       sync.Mutex
	codes    map[string]time.Time    // one-time login code → when it expires
	sessions map[string]uiSessionRec // cookie value → session
}

type uiSessionRec struct {
	csrf    string
	expires time.Time
}

// LoginCode is what POST /v1/ui/codes answers: a one-time code, and the
// address that uses it.
type LoginCode struct {
	Code    string    `json:"code"`
	URL     string    `json:"url"`
	Expires time.Time `json:"expires"`
}

// newCode mints a login code.
func (u *uiAuth) newCode() (string, time.Time) {
	code, expires := rand.Text(), time.Now().Add(uiCodeLife)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.codes == nil {
		u.codes = map[string]time.Time{}
	}
	for c, exp := range u.codes { // forget the expired
		if time.Now().After(exp) {
			delete(u.codes, c)
		}
	}
	u.codes[code] = expires
	return code, expires
}

// login spends code (once, before it expires) on a new session and
// returns its cookie value.
func (u *uiAuth) login(code string) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	exp, ok := u.codes[code]
	delete(u.codes, code)
	if !ok || time.Now().After(exp) {
		return "", false
	}
	if u.sessions == nil {
		u.sessions = map[string]uiSessionRec{}
	}
	id := rand.Text() + rand.Text()
	u.sessions[id] = uiSessionRec{csrf: rand.Text(), expires: time.Now().Add(uiSessionLife)}
	return id, true
}

// session returns the session of r's cookie, if it is a live one.
func (u *uiAuth) session(r *http.Request) (string, uiSessionRec, bool) {
	c, err := r.Cookie(u.cookie)
	if err != nil {
		return "", uiSessionRec{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	s, ok := u.sessions[c.Value]
	if !ok || time.Now().After(s.expires) {
		delete(u.sessions, c.Value)
		return "", uiSessionRec{}, false
	}
	return c.Value, s, true
}

func (u *uiAuth) logout(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.sessions, id)
}

// uiRoutes adds the page's routes to root (outside the bearer check).
func (srv *Server) uiRoutes(root *http.ServeMux) {
	static, _ := fs.Sub(uiFiles, "ui")
	files := http.FileServerFS(static)
	root.Handle("GET /ui/", http.StripPrefix("/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		files.ServeHTTP(w, r)
	})))
	root.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusSeeOther) })
	root.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/favicon.svg", http.StatusMovedPermanently)
	})
	root.HandleFunc("GET /ui/login", srv.handleUILogin)
	root.HandleFunc("GET /ui/session", func(w http.ResponseWriter, r *http.Request) {
		_, s, ok := srv.ui.session(r)
		if !ok {
			writeError(w, http.StatusUnauthorized, "no session: run tern ui on this machine and open the address it prints")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, map[string]any{"csrf": s.csrf, "peer_id": srv.cfg.Info.PeerID})
	})
	root.HandleFunc("POST /ui/logout", func(w http.ResponseWriter, r *http.Request) {
		id, s, ok := srv.ui.session(r)
		if ok && subtle.ConstantTimeCompare([]byte(r.Header.Get(uiCSRFHeader)), []byte(s.csrf)) != 1 {
			writeError(w, http.StatusForbidden, "the logout lacks the session's CSRF token (X-CSRF-Token), or has a wrong one")
			return
		}
		if ok {
			srv.ui.logout(id)
		}
		http.SetCookie(w, &http.Cookie{Name: srv.ui.cookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
		w.WriteHeader(http.StatusNoContent)
	})
}

// handleUILogin is GET /ui/login?code=…: a code from tern ui becomes a
// session cookie, once.
func (srv *Server) handleUILogin(w http.ResponseWriter, r *http.Request) {
	id, ok := srv.ui.login(r.URL.Query().Get("code"))
	if !ok {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "<!doctype html><meta charset=\"utf-8\"><title>tern</title><link rel=\"stylesheet\" href=\"/ui/style.css\"><link rel=\"icon\" href=\"/ui/favicon.svg\" type=\"image/svg+xml\">"+
			"<header><h1>tern</h1></header><p id=\"banner\">%s</p>\n", html.EscapeString(
			"This login code is unknown, used or expired (a code works once, for five minutes). Run tern ui again for a new one."))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: srv.ui.cookie, Value: id, Path: "/", MaxAge: int(uiSessionLife.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode})
	srv.log.Info("a web page session began", "from", r.RemoteAddr)
	http.Redirect(w, r, "/ui/", http.StatusSeeOther) // the code leaves the address bar
}

// LoginURL mints a one-time login code for the web page, as tern ui asks
// for one.
func (srv *Server) LoginURL() LoginCode {
	code, expires := srv.ui.newCode()
	return LoginCode{Code: code, URL: srv.cfg.Info.API + "/ui/login?code=" + code, Expires: expires}
}

// handleUICode is POST /v1/ui/codes, for a holder of the bearer token
// only: a new one-time login code.
func (srv *Server) handleUICode(w http.ResponseWriter, r *http.Request) {
	if !srv.bearerOK(r) {
		writeError(w, http.StatusForbidden, "a login code is minted with the bearer token only (tern ui), never from the page")
		return
	}
	writeJSON(w, srv.LoginURL())
}
