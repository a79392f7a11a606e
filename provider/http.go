package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/tern-dev/tern/internal/providerid"
)

// Options tune how a Model talks to its API. The zero value is what tern
// uses.
type Options struct {
	// Client sends the requests; nil is a client whose only deadline is
	// the step's context (answers stream for minutes).
	Client *http.Client
	// Retries is how many times a request refused with 429 or 5xx (also
	// in the stream, before any delta), or that found no connection, is
	// sent again before the step fails; 0 means 3, and a negative value
	// none. Nothing is retried once a delta has gone out.
	Retries int
	// Backoff is the first wait between attempts, doubling each time; 0
	// means 500 ms. A Retry-After (or retry-after-ms) header wins.
	Backoff time.Duration
	// MaxWait is the longest wait a Retry-After may ask for; a longer one
	// fails the step at once, saying when to try again. 0 means 60 s.
	MaxWait time.Duration
	// Retrying, if set, is told before each wait for another attempt: why
	// the last one failed and how long the wait is (a command says so,
	// rather than sit silent).
	Retrying func(e *Error, wait time.Duration)
}

func (o Options) orDefault() Options {
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	switch {
	case o.Retries == 0:
		o.Retries = 3
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.MaxWait <= 0 {
		o.MaxWait = time.Minute
	}
	return o
}

// NewWith is New with options.
func NewWith(s Settings, opt Options) (Model, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	var w wire
	switch providerid.ID(s.Provider) {
	case providerid.Offline:
		return offlineModel{s: s}, nil
	case providerid.OpenAIChat:
		w = chatWire{}
	case providerid.OpenAIResponses:
		w = responsesWire{}
	case providerid.Anthropic:
		w = anthropicWire{}
	case providerid.Gemini:
		w = geminiWire{}
	case providerid.Ollama:
		w = ollamaWire{}
	default:
		return nil, fmt.Errorf("provider %q: %w", s.Provider, errUnknownProvider)
	}
	return &httpModel{s: s, w: w, opt: opt.orDefault()}, nil
}

// wire is what differs between the HTTP APIs.
type wire interface {
	// endpoint is the URL a step is posted to.
	endpoint(s Settings) string
	// auth sets the header that carries the key (none if key is empty)
	// and any header the API always wants.
	auth(h http.Header, key string)
	// read reads the answer's stream into a. It returns m.cut(…) if the
	// stream ends before the step does, or an *Error the stream reported.
	read(m *httpModel, body io.Reader, a *assembler) error
	// message extracts the provider's own message from an error body.
	message(body []byte) string
}

// refiner is a wire whose error bodies say more than their status: that
// a key was refused (Gemini answers 400 for a bad key) or how long to
// wait (in the body, not in Retry-After).
type refiner interface {
	refine(e *Error, body []byte)
}

// httpModel is a Model behind an HTTP API.
type httpModel struct {
	s   Settings
	w   wire
	opt Options
}

func (m *httpModel) Step(ctx context.Context, body []byte, deltas func(Delta)) (*Result, error) {
	wait := m.opt.Backoff
	for attempt := 1; ; attempt++ {
		res, err := m.try(ctx, body, deltas)
		if err == nil {
			return res, nil
		}
		e, ok := err.(*Error)
		if !ok {
			return nil, err
		}
		e.Attempts = attempt
		retry := (e.Kind == ErrRateLimited || e.Kind == ErrUnavailable) && !e.streamed
		if !retry || attempt > m.opt.Retries {
			return nil, e
		}
		d := wait
		if after, ok := e.retryAfter(); ok {
			if after > m.opt.MaxWait {
				e.Message += fmt.Sprintf(" (it asks to wait %v before trying again)", after.Round(time.Second))
				return nil, e
			}
			d = after
		}
		if m.opt.Retrying != nil {
			m.opt.Retrying(e, d)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d):
		}
		wait *= 2
	}
}

// try sends body once and reads the answer.
func (m *httpModel) try(ctx context.Context, body []byte, deltas func(Delta)) (*Result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.w.endpoint(m.s), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream, application/x-ndjson, application/json")
	m.w.auth(req.Header, m.s.Key)
	resp, err := m.opt.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		kind, msg := ErrUnavailable, unreachable(m.s.Host(), err) // no connection: trying again may work
		if !isNetwork(err) {
			kind, msg = ErrBadRequest, err.Error() // a request no attempt can send (a header it cannot carry, a certificate it does not trust)
		}
		return nil, &Error{Kind: kind, Provider: m.s.Provider, Host: m.s.Host(), Model: m.s.Model, Secret: m.s.KeySecret, Message: m.redact(msg)}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		e := m.classify(resp.StatusCode, m.w.message(raw))
		if resp.StatusCode == http.StatusNotFound {
			e.Message += fmt.Sprintf(" (tern posted to %s: check model and base_url in agent.json)", req.URL.EscapedPath())
		}
		e.header = resp.Header
		if r, ok := m.w.(refiner); ok {
			r.refine(e, raw)
		}
		return nil, e
	}
	streamed := false
	a := newAssembler(m.s, body, func(d Delta) {
		streamed = true
		if deltas != nil {
			deltas(d)
		}
	})
	got := &countingReader{r: resp.Body}
	if err := m.w.read(m, got, a); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if e, ok := err.(*Error); ok {
			e.streamed = streamed // deltas went out: sending again would repeat them
			if e.Kind == ErrStreamCut && !streamed && got.n > 0 {
				e.Message += fmt.Sprintf("; nothing in the %d bytes received (Content-Type %q) was part of a %s answer: if the server at %s speaks another API, fix provider or base_url in agent.json",
					got.n, resp.Header.Get("Content-Type"), m.s.Provider, m.s.Host())
			}
		}
		return nil, err
	}
	return a.result()
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// isNetwork reports whether a failed request failed on the network (no
// connection, a name that did not resolve, a reset), which a later
// attempt may not meet, rather than in building or securing it.
// unreachable says, for a person, why no connection to host was made and
// what to check, rather than the dial's own words.
func unreachable(host string, err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return fmt.Sprintf("the name %s does not resolve: no network here, or a wrong base_url in agent.json", host)
	case errors.As(err, &dns):
		return fmt.Sprintf("the name %s could not be looked up (%s): check the network", host, dns.Err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("nothing answers at %s: is the server running? check base_url in agent.json", host)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no answer from %s in time: check the network", host)
	}
	return fmt.Sprintf("could not reach %s: %v", host, err)
}

func isNetwork(err error) bool {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // *url.Error is a net.Error itself, whatever it wraps
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// retryAfter is the wait the answer's Retry-After or retry-after-ms
// header asks for.
func (e *Error) retryAfter() (time.Duration, bool) {
	if e.header == nil {
		return e.wait, e.wait > 0
	}
	if v := e.header.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := e.header.Get("Retry-After")
	if v == "" {
		return e.wait, e.wait > 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// sse calls each with every event of an SSE stream until each returns
// false or the stream ends; it reports whether each asked to stop, and
// the stream's read error.
func sse(body io.Reader, each func(ev ssestream.Event) (more bool, err error)) (stopped bool, err error) {
	dec := ssestream.NewDecoder(&http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(body)})
	for dec.Next() {
		more, err := each(dec.Event())
		if err != nil {
			return true, err
		}
		if !more {
			return true, nil
		}
	}
	return false, dec.Err()
}

// errorMessage reads the usual {"error":{"message":…}} or {"error":"…"}
// or {"message":…} shapes of an error body; else the body itself, cut.
func errorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		var inner struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return s
		case v.Message != "":
			return v.Message
		}
	}
	if len(body) > 300 {
		body = body[:300]
	}
	return string(bytes.TrimSpace(body))
}
