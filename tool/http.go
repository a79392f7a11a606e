package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// HTTPTimeout bounds one http_request call: connecting, sending, and
// reading the whole response.
const HTTPTimeout = 60 * time.Second

// shownHeaders are the response headers http_request shows the model.
var shownHeaders = []string{"Content-Type", "Content-Length", "Location", "Retry-After", "ETag", "Last-Modified"}

var httpParams = []param{
	{name: "method", kind: "string", required: true, enum: []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}, desc: "the HTTP method"},
	{name: "url", kind: "string", required: true, desc: "an http:// or https:// URL"},
	{name: "headers", kind: "headers", desc: "request headers, name to value"},
	{name: "body", kind: "string", desc: "the request body (not for GET or HEAD)"},
}

var httpClient = &http.Client{Timeout: HTTPTimeout, Transport: &http.Transport{
	DialContext:         guardedDial,
	ForceAttemptHTTP2:   true,
	TLSHandshakeTimeout: 10 * time.Second,
	MaxIdleConns:        16,
	IdleConnTimeout:     30 * time.Second,
}}

// approvedKey marks the context of a call a person approved.
type approvedKey struct{}

// cgnat is 100.64.0.0/10 (carrier-grade NAT, and Tailscale's addresses).
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// isLocal reports whether ip is this machine or its network: loopback,
// private, link-local (the cloud metadata service 169.254.169.254),
// unspecified, or shared address space.
func isLocal(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsInterfaceLocalMulticast() || cgnat.Contains(ip)
}

// guardedDial dials like net.Dialer, but refuses an address of this
// machine or its network unless a person approved the call: checked on
// the address actually dialed, so a name that resolves there (or a
// redirect that leads there) is caught too.
func guardedDial(ctx context.Context, network, addr string) (net.Conn, error) {
	approved := ctx.Value(approvedKey{}) != nil
	d := net.Dialer{Timeout: 30 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err == nil && !approved && isLocal(ap.Addr()) {
			return fmt.Errorf("%s is an address of this machine or its network: such a request needs a person's approval (it was not asked for, so the model should name the address in the URL to be asked)", ap.Addr())
		}
		return nil
	}}
	return d.DialContext(ctx, network, addr)
}

// localHost reports whether a URL's host names this machine or its
// network outright: localhost, or a local IP literal.
func localHost(host string) bool {
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && isLocal(ip)
}

func httpRequest() Tool {
	return Tool{
		Name: "http_request",
		Description: "Send an HTTP request and read the response: its status, a few headers and at most 64 KiB of its body. " +
			"A request other than GET or HEAD carries an Idempotency-Key header that stays the same if tern has to send it again.",
		Parameters: schema(httpParams),
		// agent.json holds one class per tool: the strictest. Calls are
		// classed by method (EffectOf).
		Effect:   AtMostOnce,
		Approval: true,
		Classify: classifyHTTP,
		Run:      runHTTP,
	}
}

// safeMethod reports whether a method only reads: GET and HEAD.
func safeMethod(m string) bool {
	m = strings.ToUpper(m)
	return m == http.MethodGet || m == http.MethodHead
}

// classifyHTTP: GET and HEAD are idempotent and not gated, unless the URL
// names this machine or its network (localhost, a private, loopback or
// link-local address): then they need approval too. Any other method (or
// arguments that name none) is at-most-once and needs approval.
func classifyHTTP(args json.RawMessage) (string, bool) {
	var a struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	}
	if json.Unmarshal(args, &a) == nil && safeMethod(a.Method) {
		u, err := url.Parse(a.URL)
		return Idempotent, err != nil || localHost(u.Hostname())
	}
	return AtMostOnce, true
}

func runHTTP(ctx context.Context, call Call) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	var a struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	if msg := parseArgs(call.Arguments, httpParams, &a); msg != "" {
		return failf("http_request: %s", msg)
	}
	method := strings.ToUpper(a.Method)
	u, err := url.Parse(a.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return failf("http_request: field url %q is not an http:// or https:// URL", a.URL)
	}
	safe := safeMethod(method)
	if safe && a.Body != "" {
		return failf("http_request: a %s request has no body: leave field body out", method)
	}
	if !safe && call.OperationID == "" {
		return Result{}, errors.New("tool: http_request: no operation id: a " + method + " call runs only after its operation.intent")
	}
	if call.Approved {
		ctx = context.WithValue(ctx, approvedKey{}, true)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.URL, strings.NewReader(a.Body))
	if err != nil {
		return failf("http_request: %v", err)
	}
	if a.Body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for k, v := range a.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	if !safe {
		req.Header.Set("Idempotency-Key", call.OperationID)
	}

	resp, err := httpClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the method and URL, said below
		}
		msg := fmt.Sprintf("http_request: %s %s failed: %v", method, a.URL, err)
		if !safe {
			msg += fmt.Sprintf(" (the server may or may not have acted on it; its Idempotency-Key was %s)", call.OperationID)
		}
		return failf("%s", msg)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, OutputCap+1))
	if err != nil {
		return failf("http_request: %s %s: reading the response: %v", method, a.URL, err)
	}

	var out strings.Builder
	fmt.Fprintf(&out, "%s %s\n", resp.Proto, resp.Status)
	if final := resp.Request.URL.String(); final != u.String() {
		fmt.Fprintf(&out, "(redirected to %s)\n", final)
	}
	for _, h := range shownHeaders {
		if v := resp.Header.Values(h); len(v) > 0 {
			fmt.Fprintf(&out, "%s: %s\n", h, strings.Join(v, ", "))
		}
	}
	out.WriteString("\n")
	cut := len(body) > OutputCap
	if cut {
		body = trimPartialRune(body[:OutputCap])
	}
	switch {
	case bytes.IndexByte(body, 0) >= 0:
		fmt.Fprintf(&out, "[the body is binary (%s); not shown]", resp.Header.Get("Content-Type"))
		cut = false
	default:
		out.WriteString(strings.ToValidUTF8(string(body), "\uFFFD"))
	}
	if cut {
		fmt.Fprintf(&out, "\n[http_request: the body was cut: its first %d bytes are shown]", len(body))
	}
	return Result{Output: out.String(), IsError: resp.StatusCode >= 400, Cut: cut}, nil
}
