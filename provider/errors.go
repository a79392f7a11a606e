package provider

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// What went wrong with a step, for errors.Is. Every error a Model returns
// for the API or the stream is an *Error wrapping one of these.
var (
	// ErrAuth: the API refused the key (401, 403).
	ErrAuth = errors.New("the key was refused")
	// ErrRateLimited: 429, still after the retries.
	ErrRateLimited = errors.New("rate limited")
	// ErrUnavailable: a server error (5xx) or no connection, still after
	// the retries.
	ErrUnavailable = errors.New("the API is unavailable")
	// ErrContextLength: the request is longer than the model's context
	// window. The caller may fit the window again (render's Target.Window)
	// and retry once.
	ErrContextLength = errors.New("the request is longer than the model's context window")
	// ErrBadRequest: the API refused the request for another reason (an
	// unknown model, a malformed body).
	ErrBadRequest = errors.New("the request was refused")
	// ErrStreamCut: the stream ended, or broke, before the step did.
	// Nothing of the step may be kept.
	ErrStreamCut = errors.New("the stream ended before the step did")
)

// Error is what a Model returns when the API refuses a step or its stream
// breaks. Its message names the provider, the host and, for a refused key,
// the secret the key came from, and quotes the provider's own message. It
// never holds the key.
type Error struct {
	Kind     error  // one of the Err* above
	Provider string // "anthropic"
	Host     string // "api.anthropic.com"
	Model    string
	Secret   string // the name of the key's secret, if any
	Status   int    // the HTTP status; 0 for a broken stream or no connection
	Message  string // the provider's own message (or what broke), key removed
	Attempts int    // how many times the request was sent

	header   http.Header   // the refusal's headers (Retry-After)
	streamed bool          // deltas of the step went out before it failed
	wait     time.Duration // how long the body asked to wait, if it did (refiner)
}

func (e *Error) Unwrap() error { return e.Kind }

func (e *Error) Error() string {
	where := e.Provider + " at " + e.Host
	status := ""
	if e.Status != 0 {
		status = fmt.Sprintf(" (%d)", e.Status)
	}
	msg := e.Message
	if msg == "" {
		msg = "no message"
	}
	retried := ""
	if e.Attempts > 1 {
		retried = fmt.Sprintf(", still after %d attempts", e.Attempts)
	}
	switch e.Kind {
	case ErrAuth:
		if e.Secret == "" {
			return fmt.Sprintf("%s refused the request%s: %s; agent.json names no key_secret, so no key was sent", where, status, msg)
		}
		return fmt.Sprintf("%s refused the key from secret %s%s: %s; set the right key with: tern secret set %s", where, e.Secret, status, msg, e.Secret)
	case ErrRateLimited:
		return fmt.Sprintf("%s is rate limiting%s%s: %s", where, status, retried, msg)
	case ErrUnavailable:
		return fmt.Sprintf("%s is unavailable%s%s: %s", where, status, retried, msg)
	case ErrContextLength:
		return fmt.Sprintf("%s: the request is longer than %s's context window%s: %s", where, e.Model, status, msg)
	case ErrStreamCut:
		return fmt.Sprintf("%s: the stream ended before the step did (%s); nothing of the step was kept", where, msg)
	}
	if e.Status == 0 {
		return fmt.Sprintf("%s: could not send the request: %s", where, msg)
	}
	return fmt.Sprintf("%s refused the request%s: %s", where, status, msg)
}

// contextLength recognises the providers' words for a request that does
// not fit the context window.
var contextLength = regexp.MustCompile(`(?i)context[_ ]length|context window|context limit|maximum context|prompt is too long|too many tokens|input token count.*exceeds|exceeds the maximum number of tokens`)

// classify makes the error of an HTTP status and the provider's message.
func (m *httpModel) classify(status int, msg string) *Error {
	e := &Error{Provider: m.s.Provider, Host: m.s.Host(), Model: m.s.Model, Secret: m.s.KeySecret, Status: status, Message: m.redact(msg)}
	switch {
	case status == 401 || status == 403:
		e.Kind = ErrAuth
	case status == 429:
		e.Kind = ErrRateLimited
	case status >= 500:
		e.Kind = ErrUnavailable
	case contextLength.MatchString(msg):
		e.Kind = ErrContextLength
	default:
		e.Kind = ErrBadRequest
	}
	return e
}

// streamErr is what a broken read of the stream comes to: the *Error an
// adapter returned from inside it, or a cut.
func (m *httpModel) streamErr(err error) error {
	if e, ok := err.(*Error); ok {
		return e
	}
	return m.cut(err.Error())
}

// cut is the error of a stream that ended or broke before the step did.
func (m *httpModel) cut(why string) *Error {
	return &Error{Kind: ErrStreamCut, Provider: m.s.Provider, Host: m.s.Host(), Model: m.s.Model, Secret: m.s.KeySecret, Message: m.redact(why)}
}

// keyLike matches what APIs quote back of a key they refused (OpenAI's
// "sk-proj-****…abcd", a Google "AIza…" key).
// A match ends in a key's character, never in the period that ends a
// sentence.
var keyLike = regexp.MustCompile(`\bsk-[A-Za-z0-9_*.\-]{3,}[A-Za-z0-9_*\-]|\bAIza[A-Za-z0-9_\-]{8,}`)

// redact removes the key, and anything that looks like part of one, from
// a message.
func (m *httpModel) redact(msg string) string {
	if k := m.s.Key; len(k) >= 4 {
		msg = strings.ReplaceAll(msg, k, "[key]")
	}
	return keyLike.ReplaceAllString(msg, "[key]")
}
