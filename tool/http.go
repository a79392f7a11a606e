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
	"slices"
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

// cgnat is 100.64.0.0/10 (carrier-grade NAT, and Tailscale's addresses).
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// isLocal reports whether ip is this machine or its network: loopback,
// private, link-local (the cloud metadata service 169.254.169.254),
// unspecified, shared address space, or one of own, the addresses of
// this machine's interfaces (a public address of this machine reaches a
// service listening on all its interfaces).
func isLocal(ip netip.Addr, own []netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsInterfaceLocalMulticast() || cgnat.Contains(ip) || slices.Contains(own, ip)
}

// ownAddrs returns the addresses of this machine's interfaces, IPv4 and
// IPv6, as they are now; none if they cannot be listed.
func ownAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// thisMachineOrNetwork is isLocal with this machine's addresses now.
func thisMachineOrNetwork(ip netip.Addr) bool { return isLocal(ip, ownAddrs()) }

// localHost reports whether a URL's host names this machine or its
// network outright: localhost, or an IP literal that local says is.
func localHost(host string, local func(netip.Addr) bool) bool {
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && local(ip)
}

// endpoint is the host:port a URL connects to, as http.Transport dials
// it: the port given, or the scheme's.
func endpoint(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return strings.ToLower(net.JoinHostPort(u.Hostname(), port))
}

// reach is what one http_request call may connect to: no address of this
// machine or its network (local), except at approved, the host:port of
// the URL a person approved the call with ("" when no one did). A
// redirect elsewhere is checked as if no one had approved the call.
type reach struct {
	approved string
	local    func(netip.Addr) bool
}

// refusal is the error of a connection reach does not allow.
func refusal(ip netip.Addr) error {
	return fmt.Errorf("%s is an address of this machine or its network: such a request needs a person's approval, "+
		"which covers only the host and port of the URL approved (it was not asked for, so the model should name the address in the URL to be asked)", ip)
}

// dial dials like net.Dialer, checking the address actually dialed after
// name resolution: a name that resolves to this machine, or a redirect
// that leads there, is refused like an address written in the URL.
func (r reach) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	mayBeLocal := r.approved != "" && strings.EqualFold(addr, r.approved)
	d := net.Dialer{Timeout: 30 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("dialing %q: not an IP address and port", address)
		}
		if !mayBeLocal && r.local(ap.Addr()) {
			return refusal(ap.Addr())
		}
		return nil
	}}
	return d.DialContext(ctx, network, addr)
}

// checkRedirect follows at most 10 redirects, refusing at once one whose
// URL names this machine or its network outright, unless it stays at the
// approved host and port (the dial checks every other way there).
func (r reach) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if endpoint(req.URL) != r.approved && localHost(req.URL.Hostname(), r.local) {
		return fmt.Errorf("redirected to %s, which is this machine or its network: the call was not approved for it; "+
			"ask for that URL itself to be asked", req.URL.Redacted())
	}
	return nil
}

// client is the HTTP client of one call: a transport of its own, so that
// no connection opened under one call's approval is used by another, and
// every connection is dialed, and checked, under this call's reach. No
// proxy from the environment is used, so the check cannot be bypassed
// through one.
func (r reach) client() *http.Client {
	return &http.Client{Timeout: HTTPTimeout, CheckRedirect: r.checkRedirect, Transport: &http.Transport{
		DialContext:         r.dial,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
	}}
}

func httpRequest() Tool { return httpTool(thisMachineOrNetwork) }

// httpTool is http_request with local deciding which addresses are this
// machine or its network.
func httpTool(local func(netip.Addr) bool) Tool {
	return Tool{
		Name: "http_request",
		Description: "Send an HTTP request and read the response: its status, a few headers and at most 64 KiB of its body. " +
			"A request other than GET or HEAD carries an Idempotency-Key header that stays the same if tern has to send it again.",
		Parameters: schema(httpParams),
		// agent.json holds one class per tool: the strictest. Calls are
		// classed by method (EffectOf).
		Effect:   AtMostOnce,
		Approval: true,
		Classify: func(args json.RawMessage) (string, bool) { return classifyHTTP(args, local) },
		Run: func(ctx context.Context, call Call) (Result, error) {
			return runHTTP(ctx, call, local)
		},
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
func classifyHTTP(args json.RawMessage, local func(netip.Addr) bool) (string, bool) {
	var a struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	}
	if json.Unmarshal(args, &a) == nil && safeMethod(a.Method) {
		u, err := url.Parse(a.URL)
		return Idempotent, err != nil || localHost(u.Hostname(), local)
	}
	return AtMostOnce, true
}

func runHTTP(ctx context.Context, call Call, local func(netip.Addr) bool) (Result, error) {
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
	r := reach{local: local}
	if call.Approved {
		r.approved = endpoint(u)
	}
	client := r.client()
	defer client.CloseIdleConnections()
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

	resp, err := client.Do(req)
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
