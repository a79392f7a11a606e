package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// An MCP server over HTTP may answer 401: it wants an OAuth token. tern
// then runs the authorization code flow of the MCP specification (the
// official SDK's: discovery, dynamic client registration, PKCE) up to the
// point where a person must open the authorization URL; the server's
// connection waits there, and the runtime pauses the turn with an
// mcp_auth action carrying the URL and scopes (AuthorizationNeeded).
// Authorize gives the answer — the address the browser was sent back to,
// or an access token — and the connection goes on. The token is kept in
// this machine's keyring under MCPTokenSecret(server) with what refreshing
// it needs, refreshed there, and used by the next connection; it is never
// in the capsule, the journal, a log line or an API answer.

// authWait is how long a connection waits for a person to authorize it.
const authWait = time.Hour

// AuthorizationNeeded says a server waits for a person to authorize tern:
// open URL, then give the result to Authorize.
type AuthorizationNeeded struct {
	Server string
	URL    string
	Scopes []string
}

func (e *AuthorizationNeeded) Error() string {
	return fmt.Sprintf("mcp server %s needs authorization: open %s and give tern the address it sends you back to", e.Server, e.URL)
}

// ErrNoAuthorizationWaiting: Authorize was given a code, and no
// authorization of that server waits here.
var ErrNoAuthorizationWaiting = errors.New("no authorization of that server waits on this machine")

// errAuthorizeAgain: a server refused the token of an open session; the
// request was not served, and the next connection asks the person.
var errAuthorizeAgain = errors.New("the server asks for authorization again; the next turn asks for it")

// ErrNotAuthorized: Authorize was told "done", and the server is not
// connected.
var ErrNotAuthorized = errors.New("it is not authorized yet")

// AuthorizedAlready is the answer that says the person authorized the
// server already (through the node's callback).
const AuthorizedAlready = "done"

// MCPTokenSecret is the secret this machine keeps server's OAuth token
// under: MCP_<SERVER>_TOKEN (tern secret list shows it; tern secret rm
// forgets it).
func MCPTokenSecret(server string) string {
	return "MCP_" + strings.ToUpper(strings.ReplaceAll(server, "-", "_")) + "_TOKEN"
}

// pendingAuth is an authorization a server's connection waits for.
type pendingAuth struct {
	url    string
	state  string
	scopes []string
	answer chan authAnswer // buffered: one answer
}

type authAnswer struct {
	res *auth.AuthorizationResult
	err error
}

// oauth is the OAuth handler of server name's connection d: it starts
// with the token this machine keeps, if any.
func (m *MCP) oauth(name string, d *dialing) (auth.OAuthHandler, error) {
	cfg := &auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs:            []string{m.env.RedirectURL},
			ClientName:              "tern",
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			ResponseTypes:           []string{"code"},
			TokenEndpointAuthMethod: "none",
		}},
		RedirectURL:              m.env.RedirectURL,
		RequestRefreshToken:      true,
		AuthorizationCodeFetcher: m.fetcher(name, d),
		NewTokenSource: func(ctx context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
			k := &keptToken{m: m, server: name, cfg: c, base: c.TokenSource(ctx, t)}
			return k, k.keep(t)
		},
	}
	if st, ok := m.keptTokenOf(name); ok {
		cfg.InitialTokenSource = &keptToken{m: m, server: name, cfg: st.config(), base: st.source(), last: st.AccessToken}
	}
	return auth.NewAuthorizationCodeHandler(cfg)
}

// fetcher is the SDK's step where a person authorizes: it publishes the
// URL for conn to report, and waits for Authorize.
func (m *MCP) fetcher(name string, d *dialing) auth.AuthorizationCodeFetcher {
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		select {
		case <-d.done: // an open session was refused: its next connection asks
			m.forget(name)
			return nil, errAuthorizeAgain
		default:
		}
		if d.abandoned.Load() { // the SDK retries: the person answered otherwise
			return nil, fmt.Errorf("mcp server %s: its authorization flow was abandoned", name)
		}
		u, err := url.Parse(args.URL)
		if err != nil {
			return nil, fmt.Errorf("mcp server %s: its authorization URL: %w", name, err)
		}
		q := u.Query()
		p := &pendingAuth{url: args.URL, state: q.Get("state"), scopes: strings.Fields(q.Get("scope")), answer: make(chan authAnswer, 1)}
		m.mu.Lock()
		m.pending[name] = p
		m.mu.Unlock()
		defer func() {
			m.mu.Lock()
			if m.pending[name] == p {
				delete(m.pending, name)
			}
			m.mu.Unlock()
		}()
		d.waiting.Store(true)
		d.askOnce.Do(func() { close(d.asked) })
		timer := time.NewTimer(authWait)
		defer timer.Stop()
		select {
		case a := <-p.answer:
			return a.res, a.err
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, fmt.Errorf("mcp server %s: no authorization came within %v; the next turn asks again", name, authWait)
		}
	}
}

// forget drops server name's open session, so that the next use connects
// again.
func (m *MCP) forget(name string) {
	m.mu.Lock()
	c := m.conns[name]
	delete(m.conns, name)
	m.mu.Unlock()
	if c != nil {
		go c.session.Close()
	}
}

// Authorize answers the authorization server waits for. value is the
// address the person's browser was sent back to (or its query,
// code=…&state=…), an access token the person got otherwise, or
// AuthorizedAlready. On a nil return the server is connected and its
// token kept in this machine's keyring. A code for a server already
// connected is taken as answered (the node's callback came first).
func (m *MCP) Authorize(ctx context.Context, server, value string) error {
	if _, ok := m.servers[server]; !ok {
		return fmt.Errorf("agent.json declares no MCP server %q", server)
	}
	value = strings.TrimSpace(value)
	if value == "" {
		return errors.New("the authorization is empty: give the address the browser was sent back to, or an access token")
	}
	m.mu.Lock()
	p, d, c := m.pending[server], m.dialing[server], m.conns[server]
	m.mu.Unlock()
	if value == AuthorizedAlready {
		if c == nil {
			return fmt.Errorf("mcp server %s: %w: open its authorization URL first", server, ErrNotAuthorized)
		}
		return nil
	}
	if q, ok := redirectQuery(value); ok {
		if p == nil && c != nil {
			return nil
		}
		if p == nil || d == nil {
			return fmt.Errorf("mcp server %s: %w (the node restarted or the agent moved since it was asked): decline this action; the next turn asks again", server, ErrNoAuthorizationWaiting)
		}
		if e := q.Get("error"); e != "" {
			d.abandoned.Store(true)
			p.answer <- authAnswer{err: fmt.Errorf("the authorization server answered %s", e)}
			return fmt.Errorf("mcp server %s: the authorization server refused: %s %s", server, e, q.Get("error_description"))
		}
		state := q.Get("state")
		if state == "" {
			state = p.state // a bare code
		}
		if state != p.state {
			return fmt.Errorf("mcp server %s: that address answers an older authorization (its state differs): use the one the newest authorization URL sent you back to", server)
		}
		select {
		case p.answer <- authAnswer{res: &auth.AuthorizationResult{Code: q.Get("code"), State: state, Iss: q.Get("iss")}}:
		default:
			return fmt.Errorf("mcp server %s: its authorization is being answered already", server)
		}
		select {
		case <-d.done:
			return d.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := m.keep(server, storedToken{AccessToken: value, TokenType: "Bearer"}); err != nil {
		return err
	}
	if d != nil {
		d.abandoned.Store(true)
	}
	if p != nil {
		select {
		case p.answer <- authAnswer{err: errors.New("an access token was given instead")}:
		default:
		}
	}
	if d != nil {
		select {
		case <-d.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.forget(server)
	_, err := m.conn(ctx, server)
	var need *AuthorizationNeeded
	if errors.As(err, &need) {
		return fmt.Errorf("mcp server %s refused the token given: it asks for authorization again", server)
	}
	return err
}

// redirectQuery returns the query of value if it is an authorization
// response: a URL or a query with a code or an error.
func redirectQuery(value string) (url.Values, bool) {
	raw := value
	if u, err := url.Parse(value); err == nil && u.Scheme != "" {
		raw = u.RawQuery
	}
	q, err := url.ParseQuery(raw)
	if err != nil || (q.Get("code") == "" && q.Get("error") == "") {
		return nil, false
	}
	return q, true
}

// storedToken is a token as the keyring keeps it, with what refreshing it
// needs.
type storedToken struct {
	AccessToken  string    `json:"access_token"`
	TokenType    string    `json:"token_type,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	ClientID     string    `json:"client_id,omitempty"`
	ClientSecret string    `json:"client_secret,omitempty"`
	TokenURL     string    `json:"token_url,omitempty"`
	AuthStyle    int       `json:"auth_style,omitempty"`
}

func (st storedToken) config() *oauth2.Config {
	return &oauth2.Config{ClientID: st.ClientID, ClientSecret: st.ClientSecret,
		Endpoint: oauth2.Endpoint{TokenURL: st.TokenURL, AuthStyle: oauth2.AuthStyle(st.AuthStyle)}}
}

// source is a token source that starts from st and refreshes it.
func (st storedToken) source() oauth2.TokenSource {
	tok := &oauth2.Token{AccessToken: st.AccessToken, TokenType: st.TokenType, RefreshToken: st.RefreshToken, Expiry: st.Expiry}
	return st.config().TokenSource(context.Background(), tok)
}

// keptTokenOf is the token this machine keeps for server, if any.
func (m *MCP) keptTokenOf(server string) (storedToken, bool) {
	var st storedToken
	if m.env.Secrets == nil {
		return st, false
	}
	v, err := m.env.Secrets.Get(MCPTokenSecret(server))
	if err != nil || json.Unmarshal([]byte(v), &st) != nil || st.AccessToken == "" {
		return st, false
	}
	return st, true
}

// keep puts server's token in this machine's keyring.
func (m *MCP) keep(server string, st storedToken) error {
	k, ok := m.env.Secrets.(interface {
		Set(name, value string) error
	})
	if !ok {
		return fmt.Errorf("mcp server %s: there is no keyring here to keep its token in", server)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := k.Set(MCPTokenSecret(server), string(b)); err != nil {
		return fmt.Errorf("mcp server %s: keeping its token in this machine's keyring: %w", server, err)
	}
	return nil
}

// keptToken is a server's token source that keeps each new token (the
// first, and every refresh) in the keyring. The keyring is shared by the
// processes of this machine (the node, tern mcp list): when a refresh
// fails because another one refreshed first and spent the refresh token,
// it goes on from the token that one kept.
type keptToken struct {
	m      *MCP
	server string
	cfg    *oauth2.Config

	mu   sync.Mutex
	base oauth2.TokenSource
	last string // the access token kept last
}

func (k *keptToken) Token() (*oauth2.Token, error) {
	k.mu.Lock()
	base := k.base
	k.mu.Unlock()
	t, err := base.Token()
	if err != nil {
		if st, ok := k.m.keptTokenOf(k.server); ok {
			k.mu.Lock()
			newer := st.AccessToken != k.last
			if newer {
				k.base, k.last = st.source(), st.AccessToken
			}
			base = k.base
			k.mu.Unlock()
			if newer {
				t, err = base.Token()
			}
		}
	}
	if err != nil {
		// Sent without a token, the request is answered 401 and the
		// person is asked to authorize again.
		return nil, &oauth2.RetrieveError{ErrorCode: "invalid_grant", ErrorDescription: err.Error()}
	}
	k.mu.Lock()
	changed := t.AccessToken != k.last
	k.mu.Unlock()
	if changed {
		k.keep(t) // a refresh not kept is asked for again after a restart
	}
	return t, nil
}

func (k *keptToken) keep(t *oauth2.Token) error {
	err := k.m.keep(k.server, storedToken{AccessToken: t.AccessToken, TokenType: t.TokenType, RefreshToken: t.RefreshToken, Expiry: t.Expiry,
		ClientID: k.cfg.ClientID, ClientSecret: k.cfg.ClientSecret, TokenURL: k.cfg.Endpoint.TokenURL, AuthStyle: int(k.cfg.Endpoint.AuthStyle)})
	if err == nil {
		k.mu.Lock()
		k.last = t.AccessToken
		k.mu.Unlock()
	}
	return err
}
