package provider

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tern-dev/tern/render"
)

// wireCase describes one HTTP adapter for the tests every adapter must
// pass. Each adapter's test file registers its case in an init function.
type wireCase struct {
	provider    string
	model       string
	base        string                              // appended to the stub's URL to make the base URL
	path        string                              // where steps are posted
	header      string                              // the header that carries the key
	headerValue string                              // its value
	errBody     func(status int, msg string) string // the provider's error body
	stream      string                              // a whole answer: "@file" under testdata
	cut         string                              // the same answer cut short (no end event)
}

var wireCases []wireCase

func (c wireCase) settings(s *stub) Settings { return s.settings(c.provider, c.model, c.base) }

func TestEveryWireSendsRendersBytesWithTheKeyInItsHeaderOnly(t *testing.T) {
	for _, c := range wireCases {
		t.Run(c.provider, func(t *testing.T) {
			s := newStub(t, c.path, reply{body: c.stream})
			m, err := NewWith(c.settings(s), fast)
			if err != nil {
				t.Fatal(err)
			}
			b := body(t, render.Provider(c.provider), c.model)
			res, err := m.Step(context.Background(), b, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.checkSent(t, b, c.header, c.headerValue)
			if strings.Contains(lines(res), testKey) {
				t.Fatal("a draft carries the key")
			}
			rendersEverywhere(t, res)
		})
	}
}

func TestEveryWireSaysWhatWentWrongInWordsAPersonCanActOn(t *testing.T) {
	for _, c := range wireCases {
		t.Run(c.provider, func(t *testing.T) {
			b := body(t, render.Provider(c.provider), c.model)
			step := func(s *stub) (*stub, error) {
				m, err := NewWith(c.settings(s), fast)
				if err != nil {
					t.Fatal(err)
				}
				_, err = m.Step(context.Background(), b, nil)
				if err != nil && strings.Contains(err.Error(), testKey) {
					t.Errorf("the error carries the key: %v", err)
				}
				return s, err
			}
			json := map[string]string{"Content-Type": "application/json"}

			s, err := step(newStub(t, c.path, reply{status: 401, header: json, body: c.errBody(401, "Incorrect API key provided: "+testKey)}))
			if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "TEST_KEY") || !strings.Contains(err.Error(), "tern secret set TEST_KEY") || s.requests() != 1 {
				t.Errorf("401: %v after %d requests; want ErrAuth naming the secret and how to set it, at once", err, s.requests())
			}
			if host := strings.TrimPrefix(s.URL, "http://"); !strings.Contains(err.Error(), host) {
				t.Errorf("401: %v does not name the host %s", err, host)
			}

			s, err = step(newStub(t, c.path,
				reply{status: 429, header: map[string]string{"Content-Type": "application/json", "Retry-After": "0.01"}, body: c.errBody(429, "slow down")},
				reply{status: 503, header: json, body: c.errBody(503, "overloaded")},
				reply{body: c.stream}))
			if err != nil || s.requests() != 3 {
				t.Errorf("429, 503, then the answer: %v after %d requests; want the answer on the third", err, s.requests())
			}

			s, err = step(newStub(t, c.path, reply{status: 500, header: json, body: c.errBody(500, "the server had an error")}))
			if !errors.Is(err, ErrUnavailable) || s.requests() != 4 || !strings.Contains(err.Error(), "the server had an error") {
				t.Errorf("500 four times: %v after %d requests; want ErrUnavailable with the provider's message after 4", err, s.requests())
			}

			s, err = step(newStub(t, c.path, reply{status: 429, header: map[string]string{"Content-Type": "application/json", "Retry-After": "3600"}, body: c.errBody(429, "quota exceeded")}))
			if !errors.Is(err, ErrRateLimited) || s.requests() != 1 || !strings.Contains(err.Error(), "1h0m0s") {
				t.Errorf("429 asking for an hour: %v after %d requests; want ErrRateLimited at once, saying how long", err, s.requests())
			}

			_, err = step(newStub(t, c.path, reply{status: 400, header: json, body: c.errBody(400, "This model's maximum context length is 128000 tokens. However, your messages resulted in 200000 tokens.")}))
			if !errors.Is(err, ErrContextLength) {
				t.Errorf("context length: %v; want ErrContextLength", err)
			}

			_, err = step(newStub(t, c.path, reply{status: 404, header: json, body: c.errBody(404, "The model `no-such-model` does not exist")}))
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "no-such-model") {
				t.Errorf("unknown model: %v; want ErrBadRequest quoting the provider", err)
			}

			_, err = step(newStub(t, c.path, reply{body: c.cut, cut: true}))
			if !errors.Is(err, ErrStreamCut) {
				t.Errorf("a stream cut short: %v; want ErrStreamCut", err)
			}
			if strings.Contains(err.Error(), "another API") {
				t.Errorf("a stream cut short after deltas: %v; it blames the settings", err)
			}

			// A server that speaks another API: a 404 for the path, or
			// an answer of another shape.
			_, err = step(newStub(t, "/somewhere/else", reply{}))
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "check model and base_url in agent.json") {
				t.Errorf("a 404 for the path: %v; want it to say to check base_url", err)
			}
			_, err = step(newStub(t, c.path, reply{header: json, body: `{"object":"list","data":[{"id":"m"}]}` + "\n"}))
			if !errors.Is(err, ErrStreamCut) || !strings.Contains(err.Error(), "speaks another API, fix provider or base_url") {
				t.Errorf("an answer of another API's shape: %v; want it to say to check provider and base_url", err)
			}
		})
	}
}

func TestARequestNoAttemptCanSendFailsAtOnceSayingWhy(t *testing.T) {
	s := newStub(t, "/v1/chat/completions", reply{})
	sent := 0
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		return http.DefaultTransport.RoundTrip(r)
	})}
	settings := s.settings("openai-chat", "m", "/v1")
	settings.BaseURL = strings.Replace(settings.BaseURL, "http://", "https://", 1) // TLS to a plain HTTP server
	m, err := NewWith(settings, Options{Client: client, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Step(context.Background(), body(t, render.OpenAIChat, "m"), nil)
	if !errors.Is(err, ErrBadRequest) || sent != 1 || !strings.Contains(err.Error(), "could not send the request") {
		t.Fatalf("https to an http server: %v after %d attempts; want ErrBadRequest at once", err, sent)
	}

	// A key with a line break (a file piped into TERN_SECRET_X) is
	// refused before anything is sent, naming its secret, not showing it.
	settings = s.settings("openai-chat", "m", "/v1")
	settings.Key = testKey + "\n"
	_, err = NewWith(settings, fast)
	if err == nil || !strings.Contains(err.Error(), "secret TEST_KEY holds a line break") || strings.Contains(err.Error(), testKey) {
		t.Fatalf("a key with a line break: %v", err)
	}
	if s.requests() != 0 {
		t.Fatalf("%d requests reached the server", s.requests())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRedactRemovesKeysAndKeepsTheSentence(t *testing.T) {
	m := &httpModel{s: Settings{Key: testKey}}
	for msg, want := range map[string]string{
		"Incorrect API key provided: " + testKey + ".":                  "Incorrect API key provided: [key].",
		"Incorrect API key provided: sk-proj-****************abcd.":     "Incorrect API key provided: [key].",
		"API key not valid: AIzaSyA1234567890abcdefghij. Please renew.": "API key not valid: [key]. Please renew.",
		"no key here.": "no key here.",
	} {
		if got := m.redact(msg); got != want {
			t.Errorf("redact(%q) = %q, want %q", msg, got, want)
		}
	}
}
