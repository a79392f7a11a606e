package mcptest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// OAuthServer is the test MCP server behind OAuth, with its own
// authorization server, as the MCP specification has it: protected
// resource metadata, authorization server metadata, dynamic client
// registration, the authorization code flow with PKCE (consent given at
// once: /authorize redirects straight back with a code) and refresh
// tokens. Its access tokens live TokenLife.
type OAuthServer struct {
	*httptest.Server
	TokenLife time.Duration

	mu        sync.Mutex
	codes     map[string]codeGrant // code → what it was given for
	access    map[string]time.Time // access token → expiry
	refresh   map[string]bool
	Refreshes int      // refresh grants answered
	Issued    []string // every access and refresh token issued, for greps
}

type codeGrant struct {
	challenge, redirect string
}

// Scopes are the scopes the server asks for.
var Scopes = []string{"tools:read", "tools:call"}

// NewOAuthServer starts the server: its MCP endpoint is URL()+"/mcp".
func NewOAuthServer() *OAuthServer {
	o := &OAuthServer{TokenLife: time.Hour, codes: map[string]codeGrant{}, access: map[string]time.Time{}, refresh: map[string]bool{}}
	mux := http.NewServeMux()
	o.Server = httptest.NewServer(mux)
	base := o.Server.URL
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		exp, ok := o.access[token]
		if !ok || time.Now().After(exp) {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Scopes: Scopes, Expiration: exp}, nil
	}
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: base + "/.well-known/oauth-protected-resource/mcp",
		Scopes:              Scopes,
	})(Handler()))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:             base + "/mcp",
		AuthorizationServers: []string{base},
		ScopesSupported:      Scopes,
	}))
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
			"registration_endpoint": base + "/register", "response_types_supported": []string{"code"},
			"grant_types_supported": []string{"authorization_code", "refresh_token"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none"}, "scopes_supported": append(slices.Clone(Scopes), "offline_access"),
		})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		var meta map[string]any
		json.NewDecoder(r.Body).Decode(&meta)
		meta["client_id"] = "client-" + rand.Text()[:8]
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, meta)
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "PKCE with S256 is required", http.StatusBadRequest)
			return
		}
		code := rand.Text()
		o.mu.Lock()
		o.codes[code] = codeGrant{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
		o.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		bq := back.Query()
		bq.Set("code", code)
		bq.Set("state", q.Get("state"))
		back.RawQuery = bq.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		o.mu.Lock()
		defer o.mu.Unlock()
		switch r.Form.Get("grant_type") {
		case "authorization_code":
			g, ok := o.codes[r.Form.Get("code")]
			delete(o.codes, r.Form.Get("code"))
			sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || r.Form.Get("redirect_uri") != g.redirect {
				oauthError(w, "invalid_grant")
				return
			}
		case "refresh_token":
			if !o.refresh[r.Form.Get("refresh_token")] {
				oauthError(w, "invalid_grant")
				return
			}
			delete(o.refresh, r.Form.Get("refresh_token"))
			o.Refreshes++
		default:
			oauthError(w, "unsupported_grant_type")
			return
		}
		at, rt := "at-"+rand.Text(), "rt-"+rand.Text()
		o.access[at] = time.Now().Add(o.TokenLife)
		o.refresh[rt] = true
		o.Issued = append(o.Issued, at, rt)
		writeJSON(w, map[string]any{"access_token": at, "token_type": "Bearer", "refresh_token": rt, "expires_in": int(o.TokenLife.Seconds())})
	})
	return o
}

// Revoke makes every access and refresh token issued so far invalid.
func (o *OAuthServer) Revoke() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.access)
	clear(o.refresh)
}

// Tokens returns every token the server issued.
func (o *OAuthServer) Tokens() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.Issued)
}

// RefreshCount is how many refresh grants the server answered.
func (o *OAuthServer) RefreshCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.Refreshes
}

// Consent opens authURL as a person's browser would, consenting, and
// returns the address it is sent back to (not followed).
func Consent(authURL string) (string, error) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return "", fmt.Errorf("authorize answered %s", resp.Status)
	}
	return resp.Header.Get("Location"), nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": code})
}
