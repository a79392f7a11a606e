package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/render"
)

// testKey is the key the stub servers expect; no other header, no error
// and no draft may carry it.
const testKey = "sk-test-5ecret-key-0123456789abcdef"

// reply is one answer of a stub server.
type reply struct {
	status int               // 0 means 200
	header map[string]string // extra headers
	body   string            // the body, or a file under testdata/ if it starts with "@"
	cut    bool              // close the connection after the body (a stream cut short)
}

// stub is an httptest server speaking one provider's wire format: it
// answers with its replies in order (the last one again and again) and
// keeps what it was sent.
type stub struct {
	*httptest.Server
	t       *testing.T
	path    string
	mu      sync.Mutex
	replies []reply
	bodies  [][]byte
	headers []http.Header
	urls    []string
}

func newStub(t *testing.T, path string, replies ...reply) *stub {
	t.Helper()
	s := &stub{t: t, path: path, replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *stub) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, r.Header.Clone())
	s.urls = append(s.urls, r.URL.String())
	rep := s.replies[min(len(s.bodies), len(s.replies))-1]
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != s.path {
		http.Error(w, fmt.Sprintf("stub: %s %s, want POST %s", r.Method, r.URL.Path, s.path), http.StatusNotFound)
		return
	}
	data := []byte(rep.body)
	if strings.HasPrefix(rep.body, "@") {
		var err error
		if data, err = os.ReadFile(filepath.Join("testdata", rep.body[1:])); err != nil {
			s.t.Error(err)
		}
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	if rep.cut {
		w.Write(data)
		w.(http.Flusher).Flush()
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.Close()
		}
		return
	}
	// Several writes, flushed, as a real stream arrives.
	for len(data) > 0 {
		n := min(len(data), 97)
		w.Write(data[:n])
		w.(http.Flusher).Flush()
		data = data[n:]
	}
}

// requests returns how many requests the stub got.
func (s *stub) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// settings are Settings for provider p talking to the stub, with the
// test key from secret TEST_KEY. base is appended to the stub's URL.
func (s *stub) settings(p, model, base string) Settings {
	return Settings{Provider: p, Model: model, BaseURL: s.URL + base, KeySecret: "TEST_KEY", Key: testKey}
}

// fast are Options for tests: quick retries.
var fast = Options{Backoff: time.Millisecond, MaxWait: 2 * time.Second}

// checkSent checks that every request the stub got carried body byte for
// byte, the key in header (and only there), and no key anywhere else.
func (s *stub) checkSent(t *testing.T, body []byte, header, want string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, got := range s.bodies {
		if !bytes.Equal(got, body) {
			t.Errorf("request %d: the body sent is not render's:\n%s\nwant\n%s", i, got, body)
		}
		h := s.headers[i]
		if h.Get(header) != want {
			t.Errorf("request %d: %s is %q, want %q", i, header, h.Get(header), want)
		}
		for k, vs := range h {
			if strings.EqualFold(k, header) {
				continue
			}
			for _, v := range vs {
				if strings.Contains(v, testKey) {
					t.Errorf("request %d: header %s carries the key", i, k)
				}
			}
		}
		if strings.Contains(s.urls[i], testKey) {
			t.Errorf("request %d: the URL carries the key", i)
		}
	}
}

// deltas collects what a step streams.
type deltas struct{ got []Delta }

func (d *deltas) add(x Delta) { d.got = append(d.got, x) }

// text joins the deltas of kind k.
func (d *deltas) text(k DeltaKind) string {
	var b strings.Builder
	for _, x := range d.got {
		if x.Kind == k {
			b.WriteString(x.Text)
		}
	}
	return b.String()
}

// count counts the deltas of kind k.
func (d *deltas) count(k DeltaKind) int {
	n := 0
	for _, x := range d.got {
		if x.Kind == k {
			n++
		}
	}
	return n
}

// lines are a result's drafts as "type body" lines, for comparing.
func lines(res *Result) string {
	var b strings.Builder
	for _, d := range res.Drafts {
		body, err := journal.Canonical(d.Body)
		if err != nil {
			body = d.Body
		}
		fmt.Fprintf(&b, "%s %s\n", d.Type, body)
	}
	return b.String()
}

// signed turns a step's drafts into signed events (NewEvent checks every
// core body, as an append does), followed by a user message before them
// and a result for each call after them.
func signed(t *testing.T, res *Result) []*journal.Event {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := journal.NewKeySigner(k)
	if err != nil {
		t.Fatal(err)
	}
	drafts := []journal.Draft{{Type: "message", Body: json.RawMessage(`{"role":"user","content":[{"type":"text","text":"Weather in Paris and Rome?"}]}`)}}
	drafts = append(drafts, res.Drafts...)
	for _, d := range res.Drafts {
		if d.Type != "tool_call" {
			continue
		}
		var c struct {
			CallID string `json:"call_id"`
		}
		json.Unmarshal(d.Body, &c)
		id, _ := json.Marshal(c.CallID)
		drafts = append(drafts, journal.Draft{Type: "tool_result", Body: json.RawMessage(`{"call_id":` + string(id) + `,"content":[{"type":"text","text":"{\"temp_c\":18}"}],"is_error":false}`)})
	}
	var out []*journal.Event
	prev := ""
	for i, d := range drafts {
		d.Session = "s"
		e, err := journal.NewEvent(signer, journal.Stamp{Seq: uint64(i + 1), Prev: prev, Clock: uint64(i + 1), Time: time.Unix(1, 0)}, d)
		if err != nil {
			t.Fatalf("draft %d (%s %s) is not a valid event: %v", i, d.Type, d.Body, err)
		}
		prev = e.ID
		out = append(out, e)
	}
	return out
}

// weather is the agent of the tests: one tool.
var weather = capsule.Agent{Name: "weather", Instructions: "You are terse.",
	Tools: []capsule.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}}

// rendersEverywhere renders the step (with its results) for every provider
// and fails on an error or a note: the events a provider's answer became
// are fit for any other.
func rendersEverywhere(t *testing.T, res *Result) {
	t.Helper()
	evs := signed(t, res)
	for _, p := range render.Providers() {
		r, err := render.Render(render.Request{Events: evs, Agent: weather, Target: render.Target{Provider: p, Model: "other-model"}})
		if err != nil {
			t.Errorf("render for %s: %v", p, err)
			continue
		}
		for _, n := range r.Notes {
			t.Errorf("render for %s: %s", p, n)
		}
	}
}

// body renders the request the tests send: a user message, for p, streamed.
func body(t *testing.T, p render.Provider, model string) []byte {
	t.Helper()
	evs := signed(t, &Result{})
	r, err := render.Render(render.Request{Events: evs[:1], Agent: weather, Target: render.Target{Provider: p, Model: model, Stream: true}})
	if err != nil {
		t.Fatal(err)
	}
	return r.Body
}

// hostRE matches the stub's host where drafts record it.
var hostRE = regexp.MustCompile(`"host":"127\.0\.0\.1:[0-9]+"`)

// hostless replaces the stub's host (a random port) in drafts by HOST.
func hostless(s string) string { return hostRE.ReplaceAllString(s, `"host":"HOST"`) }
