package tool

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
