package tool

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tern-dev/tern/session"
)

// seen is what the test server received.
type seen struct {
	method, path, body string
	header             http.Header
}

func server(t *testing.T, handler http.HandlerFunc) (*httptest.Server, chan seen) {
	t.Helper()
	got := make(chan seen, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, string(body), r.Header.Clone()}
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestHTTPGet(t *testing.T) {
	srv, got := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("X-Not-Shown", "x")
		io.WriteString(w, "hello")
	})
	args := map[string]any{"method": "GET", "url": srv.URL + "/page", "headers": map[string]string{"Accept": "text/plain", "X-Test": "1"}}
	raw, _ := json.Marshal(args)
	if effect, approval := EffectOf("http_request", raw); effect != Idempotent || !approval {
		t.Fatalf("a GET of this machine is %s, approval %v; want idempotent, gated", effect, approval)
	}
	// An idempotent GET runs with or without an operation id.
	res := call(t, "http_request", "", args, "")
	want := "HTTP/1.1 200 OK\nContent-Type: text/plain; charset=utf-8\nContent-Length: 5\nETag: \"v1\"\n\nhello"
	if res.Output != want || res.IsError || res.Cut {
		t.Fatalf("got %+v, want %q", res, want)
	}
	s := <-got
	if s.method != "GET" || s.path != "/page" || s.header.Get("X-Test") != "1" || s.header.Get("Accept") != "text/plain" || s.header.Get("Idempotency-Key") != "" {
		t.Fatalf("the server saw %+v", s)
	}
	res = call(t, "http_request", "", map[string]any{"method": "head", "url": srv.URL}, "op1")
	if !strings.HasPrefix(res.Output, "HTTP/1.1 200 OK\n") || res.IsError {
		t.Fatalf("HEAD: %+v", res)
	}
	if s := <-got; s.method != "HEAD" {
		t.Fatalf("HEAD sent as %s", s.method)
	}
}

func TestHTTPPost(t *testing.T) {
	srv, got := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/items/7")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":7}`)
	})
	args := map[string]any{"method": "POST", "url": srv.URL + "/items", "body": `{"name":"x"}`,
		"headers": map[string]string{"Content-Type": "application/json", "Idempotency-Key": "forged"}}
	raw, _ := json.Marshal(args)
	if effect, approval := EffectOf("http_request", raw); effect != AtMostOnce || !approval {
		t.Fatalf("POST is %s, approval %v", effect, approval)
	}
	res := call(t, "http_request", "", args, "op_7")
	if !strings.HasPrefix(res.Output, "HTTP/1.1 201 Created\nContent-Type: text/plain; charset=utf-8\nContent-Length: 8\nLocation: /items/7\n\n{\"id\":7}") || res.IsError {
		t.Fatalf("got %+v", res)
	}
	s := <-got
	if s.method != "POST" || s.body != `{"name":"x"}` || s.header.Get("Content-Type") != "application/json" {
		t.Fatalf("the server saw %+v", s)
	}
	if keys := s.header.Values("Idempotency-Key"); len(keys) != 1 || keys[0] != "op_7" {
		t.Fatalf("Idempotency-Key %v, want the operation id", keys)
	}
	// Without an operation id it cannot run.
	if _, err := callErr(t, context.Background(), "http_request", "", args, ""); err == nil {
		t.Fatal("POST ran without an operation id")
	}
	// No status check: an unfinished POST is a reconcile action.
	tl, _ := Builtin("http_request")
	if c, err := tl.Check(context.Background(), Call{Arguments: raw, OperationID: "op_7"}); c != session.CheckUnknown || err != nil {
		t.Fatalf("status %v, %v", c, err)
	}
}

func TestHTTPBodyCap(t *testing.T) {
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 100_000))
	})
	res := call(t, "http_request", "", map[string]any{"method": "GET", "url": srv.URL}, "")
	note := "\n[http_request: the body was cut: its first 65536 bytes are shown]"
	_, body, _ := strings.Cut(res.Output, "\n\n")
	if !res.Cut || !strings.HasSuffix(body, note) || strings.TrimSuffix(body, note) != strings.Repeat("x", OutputCap) {
		t.Fatalf("cut %v, %d bytes of body ending %q", res.Cut, len(body), body[len(body)-80:])
	}
}

func TestHTTPErrors(t *testing.T) {
	srv, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bin" {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write([]byte{1, 0, 2})
			return
		}
		http.NotFound(w, r)
	})
	res := call(t, "http_request", "", map[string]any{"method": "GET", "url": srv.URL + "/missing"}, "")
	wantError(t, res, "HTTP/1.1 404 Not Found", "404 page not found")
	res = call(t, "http_request", "", map[string]any{"method": "GET", "url": srv.URL + "/bin"}, "")
	if !strings.HasSuffix(res.Output, "\n\n[the body is binary (application/octet-stream); not shown]") || res.IsError {
		t.Fatalf("binary: %+v", res)
	}
	wantError(t, call(t, "http_request", "", map[string]any{"method": "GET", "url": "file:///etc/passwd"}, ""), `field url "file:///etc/passwd" is not an http:// or https:// URL`)
	wantError(t, call(t, "http_request", "", map[string]any{"method": "GET", "url": srv.URL, "body": "x"}, ""), "a GET request has no body")
	srv.Close()
	res = call(t, "http_request", "", map[string]any{"method": "DELETE", "url": srv.URL + "/x"}, "op_9")
	wantError(t, res, "DELETE "+srv.URL+"/x failed", "may or may not have acted on it; its Idempotency-Key was op_9")
}

// A GET is not gated, but it must not reach this machine or its network
// (the cloud metadata service, a router, a local admin page) unless a
// person approved the call: a literal local URL asks for approval, and a
// name or a redirect that leads there is refused at the dial.
func TestHTTPRequestKeepsOffThisMachineUnlessApproved(t *testing.T) {
	srv, got := server(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret admin page") })
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	tl, _ := Builtin("http_request")
	for _, u := range []string{srv.URL, "http://localhost" + port, "http://169.254.169.254/latest/meta-data/", "http://[::1]" + port, "http://10.0.0.1/"} {
		raw, _ := json.Marshal(map[string]any{"method": "GET", "url": u})
		if _, approval := EffectOf("http_request", raw); !approval {
			t.Errorf("GET %s is not gated", u)
		}
	}
	// Unapproved anyway (a name that resolves to loopback looks public):
	for _, u := range []string{srv.URL + "/a", "http://localhost" + port + "/b"} {
		raw, _ := json.Marshal(map[string]any{"method": "GET", "url": u})
		res, err := tl.Run(context.Background(), Call{Arguments: raw})
		if err != nil || !res.IsError || !strings.Contains(res.Output, "needs a person's approval") {
			t.Errorf("an unapproved GET %s: %+v %v; want an error result asking for approval", u, res, err)
		}
	}
	select {
	case s := <-got:
		t.Fatalf("the local server was reached: %+v", s)
	default:
	}
	raw, _ := json.Marshal(map[string]any{"method": "GET", "url": "http://example.com/"})
	if effect, approval := EffectOf("http_request", raw); effect != Idempotent || approval {
		t.Fatalf("a GET of a public name is %s, approval %v; want idempotent, not gated", effect, approval)
	}
}

func TestIsLocal(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::7")}
	tests := []struct {
		name string
		ip   string
		want bool
	}{
		{"loopback is this machine", "127.0.0.1", true},
		{"IPv6 loopback is this machine", "::1", true},
		{"the unspecified address reaches what listens on all interfaces", "0.0.0.0", true},
		{"a private address is this network", "192.168.1.1", true},
		{"a unique local IPv6 address is this network", "fd00::2", true},
		{"the metadata service is link-local", "169.254.169.254", true},
		{"shared address space is this network", "100.64.1.1", true},
		{"a public address of this machine's interfaces is this machine", "203.0.113.7", true},
		{"a public IPv6 address of this machine's interfaces is this machine", "2001:db8::7", true},
		{"an IPv4-mapped address of this machine is this machine", "::ffff:203.0.113.7", true},
		{"a public address beside this machine's is not", "203.0.113.8", false},
		{"a public IPv6 address beside this machine's is not", "2001:db8::8", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isLocal(netip.MustParseAddr(tt.ip), own); got != tt.want {
				t.Fatalf("isLocal(%s) = %v, want %v", tt.ip, got, tt.want)
			}
		})
	}
}

// counted is a server on addr that counts the requests it answers, each
// with body.
func counted(t *testing.T, addr string, handler http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s here: %v", addr, err)
	}
	n := new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		handler(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, n
}

func runWith(t *testing.T, tl Tool, approved bool, args map[string]any) Result {
	t.Helper()
	raw, _ := json.Marshal(args)
	res, err := tl.Run(context.Background(), Call{Arguments: raw, Approved: approved})
	if err != nil {
		t.Fatalf("http_request: Go error %v", err)
	}
	return res
}

// A person's approval of one request to this machine lets that request
// through, and nothing after it: a later, unapproved request to an
// outside server that redirects to the approved address does not reach
// it, not even over a connection the approved request left open.
func TestAnApprovalOfALocalRequestIsThatRequestsOnly(t *testing.T) {
	admin, reached := counted(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "admin page "+r.URL.Path) })
	outside, _ := counted(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, admin.URL+"/NOT-APPROVED-via-pool", http.StatusFound)
	})
	// 127.0.0.2 stands for a server elsewhere on the internet.
	outsideIP := netip.MustParseAddr("127.0.0.2")
	tl := httpTool(func(ip netip.Addr) bool { return ip != outsideIP && thisMachineOrNetwork(ip) })

	if res := runWith(t, tl, true, map[string]any{"method": "GET", "url": admin.URL + "/approved"}); res.IsError || !strings.HasSuffix(res.Output, "admin page /approved") {
		t.Fatalf("the approved request: %+v", res)
	}
	// The same address again, unapproved: the connection the approved
	// request opened is not used, and a new one is refused.
	wantError(t, runWith(t, tl, false, map[string]any{"method": "GET", "url": admin.URL + "/NOT-APPROVED-again"}), "needs a person's approval")
	res := runWith(t, tl, false, map[string]any{"method": "GET", "url": outside.URL + "/"})
	wantError(t, res, "redirected to "+admin.URL+"/NOT-APPROVED-via-pool", "not approved")
	if n := reached.Load(); n != 1 {
		t.Fatalf("the local server answered %d requests, want 1: the approved one only", n)
	}
}

// This machine's own addresses are this machine, public ones too: a GET
// to one asks for approval, and one that was not approved does not reach
// a server listening on all interfaces.
func TestHTTPRequestKeepsOffThisMachinesOwnPublicAddresses(t *testing.T) {
	var public netip.Addr
	for _, a := range ownAddrs() {
		if !isLocal(a, nil) && !a.IsMulticast() {
			public = a
			break
		}
	}
	if !public.IsValid() {
		t.Skip("this machine has no address outside the loopback, private and link-local ranges, which are refused anyway: nothing of its own left to check")
	}
	srv, reached := counted(t, ":0", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a service on all interfaces") })
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	u := "http://" + net.JoinHostPort(public.String(), port) + "/"
	raw, _ := json.Marshal(map[string]any{"method": "GET", "url": u})
	if _, approval := EffectOf("http_request", raw); !approval {
		t.Errorf("GET %s, an address of this machine, is not gated", u)
	}
	tl, _ := Builtin("http_request")
	wantError(t, runWith(t, tl, false, map[string]any{"method": "GET", "url": u}), "is an address of this machine or its network", "needs a person's approval")
	if n := reached.Load(); n != 0 {
		t.Fatalf("the service was reached %d times without approval", n)
	}
	if res := runWith(t, tl, true, map[string]any{"method": "GET", "url": u}); res.IsError || reached.Load() != 1 {
		t.Fatalf("approved, it is reached: %+v, %d requests", res, reached.Load())
	}
}
