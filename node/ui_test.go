package node

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/tern-dev/tern/api"
)

// browser is an HTTP client with a cookie jar that does not follow
// redirects, as a test's stand-in for a person's browser.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func send(t *testing.T, c *http.Client, method, u string, header map[string]string, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// loginCode mints a login code with the bearer token, as tern ui does.
func loginCode(t *testing.T, n *Node) api.LoginCode {
	t.Helper()
	var code api.LoginCode
	if status := callAPI(t, n, "POST", "/v1/ui/codes", nil, &code); status != 200 || !strings.HasPrefix(code.URL, n.info.API+"/ui/login?code=") {
		t.Fatalf("POST /v1/ui/codes: %d %+v", status, code)
	}
	return code
}

// The page is no way around the API's protection: without a session it
// shows a login hint and the API refuses it; a one-time code becomes an
// HttpOnly, SameSite=Strict cookie once; with it the page reads the API,
// and changes state only with the session's CSRF token; the bearer token
// never appears; foreign Hosts and Origins are refused.
func TestTheWebPageNeedsAOneTimeLoginAndACSRFToken(t *testing.T) {
	n := startNode(t, t.TempDir())
	base := n.info.API
	b := browser(t)

	status, page, _ := send(t, b, "GET", base+"/ui/", nil, "")
	if status != 200 || !strings.Contains(page, "tern ui") || strings.Contains(page, n.info.Token) {
		t.Fatalf("the page without a session: %d %q", status, page)
	}
	if status, _, _ := send(t, b, "GET", base+"/ui/session", nil, ""); status != http.StatusUnauthorized {
		t.Fatalf("the session without a cookie: %d", status)
	}
	if status, _, _ := send(t, b, "GET", base+"/v1/status", nil, ""); status != http.StatusUnauthorized {
		t.Fatalf("the API without a cookie: %d", status)
	}
	if status, _, _ := send(t, b, "POST", base+"/v1/ui/codes", nil, ""); status != http.StatusUnauthorized {
		t.Fatalf("a code without the token: %d", status)
	}

	code := loginCode(t, n)
	status, _, header := send(t, b, "GET", code.URL, nil, "")
	cookie := header.Get("Set-Cookie")
	u, _ := url.Parse(base)
	if !strings.HasPrefix(cookie, "tern_ui_"+u.Port()+"=") { // two nodes' pages in one browser keep their own
		t.Fatalf("the cookie's name: %s", cookie)
	}
	if status != http.StatusSeeOther || header.Get("Location") != "/ui/" ||
		!strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Strict") || strings.Contains(cookie, code.Code) {
		t.Fatalf("the login: %d %v", status, header)
	}
	if status, page, _ := send(t, browser(t), "GET", code.URL, nil, ""); status != http.StatusUnauthorized || !strings.Contains(page, `href="/ui/style.css"`) {
		t.Fatalf("the code used again: %d %q (styled as the page is)", status, page)
	}
	// The icon a browser asks for at the root is there, not a 404.
	status, icon, _ := send(t, &http.Client{}, "GET", base+"/favicon.ico", nil, "")
	if status != 200 || !strings.HasPrefix(icon, "<svg") {
		t.Fatalf("favicon: %d %q", status, icon)
	}

	var session struct{ CSRF string }
	status, body, _ := send(t, b, "GET", base+"/ui/session", nil, "")
	if status != 200 || !strings.Contains(body, `"csrf"`) || strings.Contains(body, n.info.Token) {
		t.Fatalf("the session: %d %s", status, body)
	}
	session.CSRF = body[strings.Index(body, `"csrf":"`)+8:]
	session.CSRF = session.CSRF[:strings.Index(session.CSRF, `"`)]
	if status, _, _ := send(t, b, "GET", base+"/v1/status", nil, ""); status != 200 {
		t.Fatalf("the API with the cookie: %d", status)
	}
	agent := heldBy(t, n, nil)
	path := base + "/v1/agents/" + agent + "/sessions"
	if status, body, _ := send(t, b, "POST", path, nil, ""); status != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Fatalf("a change without the CSRF token: %d %s", status, body)
	}
	if status, body, _ := send(t, b, "POST", path, map[string]string{"X-CSRF-Token": "wrong"}, ""); status != http.StatusForbidden {
		t.Fatalf("a change with a wrong CSRF token: %d %s", status, body)
	}
	if status, body, _ := send(t, b, "POST", path, map[string]string{"X-CSRF-Token": session.CSRF}, ""); status != http.StatusCreated {
		t.Fatalf("a change with the CSRF token: %d %s", status, body)
	}
	if status, _, _ := send(t, b, "POST", base+"/v1/ui/codes", map[string]string{"X-CSRF-Token": session.CSRF}, ""); status != http.StatusForbidden {
		t.Fatalf("the page minting a code: %d", status)
	}

	// DNS rebinding and other sites.
	if status, _, _ := send(t, b, "GET", base+"/ui/", map[string]string{"Host": "evil.example:" + u.Port()}, ""); status != http.StatusForbidden {
		t.Fatalf("a foreign Host: %d", status)
	}
	if status, _, _ := send(t, b, "POST", path, map[string]string{"X-CSRF-Token": session.CSRF, "Origin": "http://evil.example"}, ""); status != http.StatusForbidden {
		t.Fatalf("a foreign Origin: %d", status)
	}

	// A code expires (api's TestALoginCodeWorksOnceAndNotOnceExpired).

	// Logging out needs the CSRF token too, and ends the session.
	if status, _, _ := send(t, b, "POST", base+"/ui/logout", nil, ""); status != http.StatusForbidden {
		t.Fatalf("a logout without the CSRF token: %d", status)
	}
	if status, _, _ := send(t, b, "GET", base+"/v1/status", nil, ""); status != 200 {
		t.Fatalf("after a refused logout: %d", status)
	}
	send(t, b, "POST", base+"/ui/logout", map[string]string{"X-CSRF-Token": session.CSRF}, "")
	if status, _, _ := send(t, b, "GET", base+"/v1/status", nil, ""); status != http.StatusUnauthorized {
		t.Fatalf("after logging out: %d", status)
	}
}
