package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tern-dev/tern/memory"
)

// embedCase is one embeddings API: where a stub of it listens, where its
// key goes, and how it answers.
type embedCase struct {
	provider, model string
	base            string // appended to the stub's URL: the SDK's base URL
	path            string // where the request must go
	header, value   string // the key's header and value
	// answer writes the API's answer holding vectors.
	answer func(vectors [][]float64) string
	// texts reads the texts out of a request body.
	texts func(t *testing.T, body []byte) []string
}

var embedCases = []embedCase{
	{provider: "openai", model: "text-embedding-3-small", base: "/v1", path: "/v1/embeddings",
		header: "Authorization", value: "Bearer " + testKey,
		answer: func(vs [][]float64) string {
			type item struct {
				Object    string    `json:"object"`
				Index     int       `json:"index"`
				Embedding []float64 `json:"embedding"`
			}
			data := []item{}
			for i, v := range vs {
				data = append(data, item{"embedding", i, v})
			}
			b, _ := json.Marshal(map[string]any{"object": "list", "data": data, "model": "text-embedding-3-small",
				"usage": map[string]int{"prompt_tokens": 8, "total_tokens": 8}})
			return string(b)
		},
		texts: func(t *testing.T, body []byte) []string {
			var r struct{ Input []string }
			mustJSON(t, body, &r)
			return r.Input
		}},
	{provider: "ollama", model: "nomic-embed-text", base: "", path: "/api/embed",
		header: "Authorization", value: "Bearer " + testKey,
		answer: func(vs [][]float64) string {
			if vs == nil {
				vs = [][]float64{}
			}
			b, _ := json.Marshal(map[string]any{"model": "nomic-embed-text", "embeddings": vs, "total_duration": 14143917, "prompt_eval_count": 8})
			return string(b)
		},
		texts: func(t *testing.T, body []byte) []string {
			var r struct{ Input []string }
			mustJSON(t, body, &r)
			return r.Input
		}},
	{provider: "gemini", model: "gemini-embedding-001", base: "", path: "/v1beta/models/gemini-embedding-001:batchEmbedContents",
		header: "x-goog-api-key", value: testKey,
		answer: func(vs [][]float64) string {
			type emb struct {
				Values []float64 `json:"values"`
			}
			es := []emb{}
			for _, v := range vs {
				es = append(es, emb{v})
			}
			b, _ := json.Marshal(map[string]any{"embeddings": es})
			return string(b)
		},
		texts: func(t *testing.T, body []byte) []string {
			var r struct {
				Requests []struct {
					Content struct{ Parts []struct{ Text string } }
				}
			}
			mustJSON(t, body, &r)
			var out []string
			for _, q := range r.Requests {
				if len(q.Content.Parts) != 1 {
					t.Errorf("a request with %d parts, want 1", len(q.Content.Parts))
					continue
				}
				out = append(out, q.Content.Parts[0].Text)
			}
			return out
		}},
}

func mustJSON(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Errorf("the body sent is not JSON: %v\n%s", err, body)
	}
}

// vectorOf is the vector the stubs make of a text: its first value is the
// number in "note N", so that order can be checked; then dim-1 values.
func vectorOf(text string, dim int) []float64 {
	var n int
	fmt.Sscanf(text, "note %d", &n)
	v := make([]float64, dim)
	v[0] = float64(n)
	for i := 1; i < dim; i++ {
		v[i] = 0.25
	}
	return v
}

// notes are n texts "note 0" … "note n-1".
func notes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("note %d", i)
	}
	return out
}

// embedStub is an httptest server speaking one embeddings API: it answers
// its replies first, in order, then with a vector of dim values for each
// text it is sent (vectors, if set, makes them instead).
type embedStub struct {
	*httptest.Server
	t       *testing.T
	c       embedCase
	dim     int
	replies []reply
	vectors func(texts []string) [][]float64

	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	urls    []string
}

func newEmbedStub(t *testing.T, c embedCase, dim int, replies ...reply) *embedStub {
	t.Helper()
	s := &embedStub{t: t, c: c, dim: dim, replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *embedStub) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, r.Header.Clone())
	s.urls = append(s.urls, r.URL.String())
	n, dim := len(s.bodies), s.dim
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != s.c.path {
		http.Error(w, fmt.Sprintf("stub: %s %s, want POST %s", r.Method, r.URL.Path, s.c.path), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if n <= len(s.replies) {
		rep := s.replies[n-1]
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(max(rep.status, http.StatusOK))
		io.WriteString(w, rep.body)
		return
	}
	texts := s.c.texts(s.t, body)
	var vs [][]float64
	if s.vectors != nil {
		vs = s.vectors(texts)
	} else {
		for _, t := range texts {
			vs = append(vs, vectorOf(t, dim))
		}
	}
	io.WriteString(w, s.c.answer(vs))
}

// settings are settings for the stub's provider, with the test key from
// secret TEST_KEY.
func (s *embedStub) settings(dim int) EmbedderSettings {
	return EmbedderSettings{Provider: s.c.provider, Model: s.c.model, BaseURL: s.URL + s.c.base, KeySecret: "TEST_KEY", Key: testKey, Dim: dim}
}

func (s *embedStub) embedder(t *testing.T, dim int) memory.Embedder {
	t.Helper()
	e, err := NewEmbedderWith(s.settings(dim), fast)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// body is request i's body as JSON.
func (s *embedStub) body(t *testing.T, i int) map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var v map[string]any
	mustJSON(t, s.bodies[i], &v)
	return v
}

// raw is request i's body; header its headers.
func (s *embedStub) raw(i int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[i]
}

func (s *embedStub) header(i int) http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[i]
}

func (s *embedStub) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// checkKey checks that every request carried the key in the API's header
// and nowhere else.
func (s *embedStub) checkKey(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, h := range s.headers {
		if got := h.Get(s.c.header); got != s.c.value {
			t.Errorf("request %d: %s is %q, want %q", i, s.c.header, got, s.c.value)
		}
		for k, vs := range h {
			if strings.EqualFold(k, s.c.header) {
				continue
			}
			for _, v := range vs {
				if strings.Contains(v, testKey) {
					t.Errorf("request %d: header %s carries the key", i, k)
				}
			}
		}
		if strings.Contains(s.urls[i], testKey) || strings.Contains(string(s.bodies[i]), testKey) {
			t.Errorf("request %d: the URL or the body carries the key", i)
		}
		if ct := h.Get("Content-Type"); ct != "application/json" {
			t.Errorf("request %d: Content-Type %q", i, ct)
		}
	}
}

func embedCaseOf(t *testing.T, provider string) embedCase {
	for _, c := range embedCases {
		if c.provider == provider {
			return c
		}
	}
	t.Fatalf("no case for %s", provider)
	return embedCase{}
}

// checkVectors checks that vs are the stub's vectors of texts, in order.
func checkVectors(t *testing.T, vs [][]float32, texts []string, dim int) {
	t.Helper()
	if len(vs) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(vs), len(texts))
	}
	for i, v := range vs {
		want := vectorOf(texts[i], dim)
		if len(v) != dim || float64(v[0]) != want[0] || float64(v[dim-1]) != want[dim-1] {
			t.Fatalf("vector %d is %v…, want %v…", i, v[:min(len(v), 3)], want[:min(dim, 3)])
		}
	}
}

func TestOpenAIEmbedderPostsToEmbeddingsAskingForFloatsWithTheKeyAsBearer(t *testing.T) {
	s := newEmbedStub(t, embedCaseOf(t, "openai"), 8)
	vs, err := s.embedder(t, 0).Embed(context.Background(), []string{"note 1", "note 2"})
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, vs, []string{"note 1", "note 2"}, 8)
	s.checkKey(t)
	got := s.body(t, 0)
	if got["model"] != "text-embedding-3-small" || got["encoding_format"] != "float" || fmt.Sprint(got["input"]) != "[note 1 note 2]" {
		t.Fatalf("body %v", got)
	}
	if _, ok := got["dimensions"]; ok {
		t.Fatalf("dimensions sent with no dim: %v", got)
	}
}

func TestOpenAIEmbedderAsksForTheDimWhenOneIsSet(t *testing.T) {
	s := newEmbedStub(t, embedCaseOf(t, "openai"), 256)
	if _, err := s.embedder(t, 256).Embed(context.Background(), []string{"note 1"}); err != nil {
		t.Fatal(err)
	}
	if got := s.body(t, 0)["dimensions"]; got != 256.0 {
		t.Fatalf("dimensions %v, want 256", got)
	}
}

func TestOpenAIEmbedderPutsVectorsInTheOrderOfTheirIndex(t *testing.T) {
	s := newEmbedStub(t, embedCaseOf(t, "openai"), 4, reply{body: `{"object":"list","data":[
		{"object":"embedding","index":2,"embedding":[2,0.25,0.25,0.25]},
		{"object":"embedding","index":0,"embedding":[0,0.25,0.25,0.25]},
		{"object":"embedding","index":1,"embedding":[1,0.25,0.25,0.25]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":6,"total_tokens":6}}`})
	vs, err := s.embedder(t, 0).Embed(context.Background(), notes(3))
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, vs, notes(3), 4)
}

func TestOpenAIEmbedderRefusesAnswersWhoseIndexesDoNotMatchTheTexts(t *testing.T) {
	s := newEmbedStub(t, embedCaseOf(t, "openai"), 2, reply{body: `{"data":[{"index":0,"embedding":[0,1]},{"index":0,"embedding":[1,1]}]}`})
	_, err := s.embedder(t, 0).Embed(context.Background(), notes(2))
	if err == nil || !strings.Contains(err.Error(), "indexes are not 0 to 1") {
		t.Fatalf("got %v", err)
	}
}

func TestOllamaEmbedderPostsToApiEmbedAndSendsNoKeyUnlessGiven(t *testing.T) {
	s := newEmbedStub(t, embedCaseOf(t, "ollama"), 768)
	vs, err := s.embedder(t, 0).Embed(context.Background(), notes(3))
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, vs, notes(3), 768)
	s.checkKey(t)
	got := s.body(t, 0)
	if len(got) != 2 || got["model"] != "nomic-embed-text" || fmt.Sprint(got["input"]) != "[note 0 note 1 note 2]" {
		t.Fatalf("body %v, want model and input only", got)
	}

	set := s.settings(0)
	set.Key, set.KeySecret = "", ""
	e, err := NewEmbedderWith(set, fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Embed(context.Background(), notes(1)); err != nil {
		t.Fatal(err)
	}
	if h := s.header(1).Get("Authorization"); h != "" {
		t.Fatalf("Authorization %q sent without a key", h)
	}
}

func TestGeminiEmbedderPostsBatchEmbedContentsWithTheKeyInGoogHeader(t *testing.T) {
	s := newEmbedStub(t, embedCaseOf(t, "gemini"), 3072)
	vs, err := s.embedder(t, 0).Embed(context.Background(), notes(2))
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, vs, notes(2), 3072)
	s.checkKey(t)
	if h := s.header(0).Get("Authorization"); h != "" {
		t.Fatalf("Authorization %q sent to Gemini", h)
	}
	want := `{"requests":[{"content":{"parts":[{"text":"note 0"}]},"model":"models/gemini-embedding-001"},{"content":{"parts":[{"text":"note 1"}]},"model":"models/gemini-embedding-001"}]}`
	if got, _ := json.Marshal(s.body(t, 0)); string(got) != want {
		t.Fatalf("body %s\nwant %s", got, want)
	}
}

func TestGeminiEmbedderAsksForTheDimAndTakesEitherSpellingOfTheModel(t *testing.T) {
	s := newEmbedStub(t, embedCaseOf(t, "gemini"), 768)
	set := s.settings(768)
	set.Model = "models/gemini-embedding-001"
	e, err := NewEmbedderWith(set, fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Embed(context.Background(), notes(1)); err != nil {
		t.Fatal(err)
	}
	want := `{"requests":[{"content":{"parts":[{"text":"note 0"}]},"model":"models/gemini-embedding-001","outputDimensionality":768}]}`
	if got, _ := json.Marshal(s.body(t, 0)); string(got) != want {
		t.Fatalf("body %s\nwant %s", got, want)
	}
}

func TestEmbedderDefaultBaseURLsAreTheSDKs(t *testing.T) {
	for p, want := range map[string]string{
		"openai": "https://api.openai.com/v1/embeddings",
		"ollama": "http://127.0.0.1:11434/api/embed",
		"gemini": "https://generativelanguage.googleapis.com/v1beta/models/gemini-embedding-001:batchEmbedContents",
	} {
		e, err := NewEmbedder(EmbedderSettings{Provider: p, Model: "gemini-embedding-001"})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.(*embedder).url; got != want {
			t.Errorf("%s posts to %s, want %s", p, got, want)
		}
	}
	// A trailing slash on a base URL is not doubled.
	e, _ := NewEmbedder(EmbedderSettings{Provider: "openai", Model: "m", BaseURL: "http://localhost:8000/v1/"})
	if got := e.(*embedder).url; got != "http://localhost:8000/v1/embeddings" {
		t.Errorf("posts to %s", got)
	}
}

func TestEmbedderSendsAtMost96TextsARequestAndKeepsTheirOrder(t *testing.T) {
	for _, c := range embedCases {
		t.Run(c.provider, func(t *testing.T) {
			s := newEmbedStub(t, c, 4)
			texts := notes(2*EmbedBatch + 8)
			vs, err := s.embedder(t, 0).Embed(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			checkVectors(t, vs, texts, 4)
			if s.requests() != 3 {
				t.Fatalf("%d requests, want 3", s.requests())
			}
			for i, want := range []int{96, 96, 8} {
				if got := c.texts(t, s.raw(i)); len(got) != want || got[0] != texts[i*96] {
					t.Fatalf("request %d carried %d texts from %q, want %d from %q", i, len(got), got[0], want, texts[i*96])
				}
			}
			s.checkKey(t)
		})
	}
}

func TestEmbeddingNoTextsSendsNothing(t *testing.T) {
	s := newEmbedStub(t, embedCaseOf(t, "openai"), 4)
	vs, err := s.embedder(t, 0).Embed(context.Background(), nil)
	if err != nil || len(vs) != 0 || s.requests() != 0 {
		t.Fatalf("%v, %v, %d requests", vs, err, s.requests())
	}
}

func TestEmbedderRetriesA429AfterItsRetryAfterThenSucceeds(t *testing.T) {
	for _, c := range embedCases {
		t.Run(c.provider, func(t *testing.T) {
			t.Parallel()
			s := newEmbedStub(t, c, 4, reply{status: 429, header: map[string]string{"Retry-After": "1"},
				body: `{"error":{"code":429,"message":"Rate limit reached","status":"RESOURCE_EXHAUSTED"}}`})
			start := time.Now()
			vs, err := s.embedder(t, 0).Embed(context.Background(), notes(2))
			if err != nil {
				t.Fatal(err)
			}
			checkVectors(t, vs, notes(2), 4)
			if s.requests() != 2 {
				t.Fatalf("%d requests, want 2", s.requests())
			}
			if waited := time.Since(start); waited < 900*time.Millisecond {
				t.Fatalf("retried after %v, not the second Retry-After asks", waited)
			}
			s.checkKey(t)
		})
	}
}

func TestEmbedderGivesUpOnA5xxAfterTheRetriesSayingHowManyAttempts(t *testing.T) {
	s := newEmbedStub(t, embedCaseOf(t, "ollama"), 4, reply{status: 503, body: `{"error":"server busy"}`},
		reply{status: 503, body: `{"error":"server busy"}`}, reply{status: 503, body: `{"error":"server busy"}`}, reply{status: 503, body: `{"error":"server busy"}`})
	_, err := s.embedder(t, 0).Embed(context.Background(), notes(1))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "still after 4 attempts") || !strings.Contains(err.Error(), "server busy") {
		t.Fatalf("got %v", err)
	}
}

func TestEmbedderRefusedKeyNamesTheSecretAndNeverTheKey(t *testing.T) {
	bodies := map[string]reply{
		"openai": {status: 401, body: `{"error":{"message":"Incorrect API key provided: ` + testKey + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		"ollama": {status: 401, body: `{"error":"unauthorized: ` + testKey + `"}`},
		// Gemini refuses a bad key with 400 API_KEY_INVALID.
		"gemini": {status: 400, body: `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`},
	}
	for _, c := range embedCases {
		t.Run(c.provider, func(t *testing.T) {
			s := newEmbedStub(t, c, 4, bodies[c.provider])
			_, err := s.embedder(t, 0).Embed(context.Background(), notes(1))
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("got %v, want ErrAuth", err)
			}
			msg := err.Error()
			for _, want := range []string{"memory.embedder", c.provider, "secret TEST_KEY", "tern secret set TEST_KEY"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, testKey) || strings.Contains(msg, "sk-test") {
				t.Errorf("%q holds the key", msg)
			}
			if s.requests() != 1 {
				t.Errorf("a refused key was sent %d times", s.requests())
			}
		})
	}
}

func TestEmbedderNotFoundNamesThePathPostedToAndWhatToCheck(t *testing.T) {
	s := newEmbedStub(t, embedCaseOf(t, "openai"), 4, reply{status: 404,
		body: `{"error":{"message":"The model 'text-embedding-4' does not exist","type":"invalid_request_error","code":"model_not_found"}}`})
	_, err := s.embedder(t, 0).Embed(context.Background(), notes(1))
	if !errors.Is(err, ErrBadRequest) {
		t.Fatalf("got %v, want ErrBadRequest", err)
	}
	for _, want := range []string{"(404)", "does not exist", "tern posted to /v1/embeddings", "check model and base_url under memory in agent.json"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

func TestEmbedderRefusesVectorsOfAnotherDimensionThanDim(t *testing.T) {
	for _, c := range embedCases {
		t.Run(c.provider, func(t *testing.T) {
			s := newEmbedStub(t, c, 1536)
			e := s.embedder(t, 256)
			_, err := e.Embed(context.Background(), notes(2))
			if err == nil {
				t.Fatal("vectors of 1536 values taken for dim 256")
			}
			for _, want := range []string{"memory.embedder: " + c.provider, c.model, "vectors of 1536 values", "memory.dim is 256", "set memory.dim in agent.json to 1536", "pick a model"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
			if d := e.Spec().Dim; d != 256 {
				t.Errorf("Spec().Dim %d, want the 256 asked for", d)
			}
		})
	}
}

func TestEmbedderLearnsDimFromItsFirstAnswerAndHoldsLaterOnesToIt(t *testing.T) {
	s := newEmbedStub(t, embedCaseOf(t, "ollama"), 8)
	e := s.embedder(t, 0)
	if got := e.Spec(); got != (memory.EmbedderSpec{Name: "ollama", Model: "nomic-embed-text", Dim: 0}) {
		t.Fatalf("spec before any answer %+v", got)
	}
	if _, err := e.Embed(context.Background(), notes(1)); err != nil {
		t.Fatal(err)
	}
	if got := e.Spec(); got != (memory.EmbedderSpec{Name: "ollama", Model: "nomic-embed-text", Dim: 8}) {
		t.Fatalf("spec after the first answer %+v", got)
	}
	s.mu.Lock()
	s.dim = 16 // the model behind the server changed
	s.mu.Unlock()
	_, err := e.Embed(context.Background(), notes(1))
	if err == nil || !strings.Contains(err.Error(), "vectors of 16 values, and its first answer had 8") || !strings.Contains(err.Error(), "memory.dim") {
		t.Fatalf("got %v", err)
	}
	if d := e.Spec().Dim; d != 8 {
		t.Fatalf("Spec().Dim %d after a refused answer", d)
	}
}

func TestEmbedderSpecNamesProviderModelAndDim(t *testing.T) {
	e, err := NewEmbedder(EmbedderSettings{Provider: "gemini", Model: "gemini-embedding-001", Dim: 768})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Spec(); got != (memory.EmbedderSpec{Name: "gemini", Model: "gemini-embedding-001", Dim: 768}) {
		t.Fatalf("spec %+v", got)
	}
}

func TestEmbedderRefusesAWrongNumberOfVectors(t *testing.T) {
	for _, c := range embedCases {
		t.Run(c.provider, func(t *testing.T) {
			s := newEmbedStub(t, c, 4)
			s.vectors = func(texts []string) [][]float64 {
				var vs [][]float64
				for _, t := range texts[1:] {
					vs = append(vs, vectorOf(t, 4))
				}
				return vs
			}
			_, err := s.embedder(t, 0).Embed(context.Background(), notes(3))
			if err == nil || !strings.Contains(err.Error(), "answered 2 vectors for 3 texts") || !strings.Contains(err.Error(), "check memory.embedder and memory.base_url in agent.json") {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func TestEmbedderRefusesVectorsOfUnequalLengthOrNotFiniteValues(t *testing.T) {
	for answer, want := range map[string]string{
		`{"embeddings":[[1,2,3],[1,2]]}`:      "3 values for text 1, 2 for text 2",
		`{"embeddings":[[1,2,3],[]]}`:         "an empty vector for text 2",
		`{"embeddings":[[1,2,3],[1,2,1e39]]}`: "holding 1e+39 (value 3 for text 2), which is not a finite float32",
	} {
		s := newEmbedStub(t, embedCaseOf(t, "ollama"), 3, reply{body: answer})
		_, err := s.embedder(t, 0).Embed(context.Background(), notes(2))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", answer, err, want)
		}
	}
}

func TestEmbedderSaysWhenTheServerSpeaksAnotherAPI(t *testing.T) {
	// An OpenAI-compatible base_url that points at an Ollama server.
	s := newEmbedStub(t, embedCaseOf(t, "openai"), 3, reply{body: `{"model":"m","embeddings":[[1,2,3]]}`})
	_, err := s.embedder(t, 0).Embed(context.Background(), notes(1))
	if err == nil || !strings.Contains(err.Error(), "gave an answer that is not the openai embeddings API's") || !strings.Contains(err.Error(), "fix memory.embedder or memory.base_url in agent.json") {
		t.Fatalf("got %v", err)
	}
}

func TestNewEmbedderRefusesSettingsItCannotUse(t *testing.T) {
	ok := EmbedderSettings{Provider: "openai", Model: "text-embedding-3-small", KeySecret: "OPENAI_KEY", Key: testKey}
	for _, c := range []struct {
		change func(*EmbedderSettings)
		want   string
	}{
		{func(s *EmbedderSettings) { s.Provider = "openai-chat" }, `memory.embedder "openai-chat" is not one of openai, ollama, gemini`},
		{func(s *EmbedderSettings) { s.Provider = "" }, `memory.embedder "" is not one of openai, ollama, gemini`},
		{func(s *EmbedderSettings) { s.Model = "" }, "memory.model is empty: name the openai embedding model"},
		{func(s *EmbedderSettings) { s.BaseURL = "ftp://example.com/v1" }, `memory.embedder: base_url "ftp://example.com/v1" is not an http or https URL`},
		{func(s *EmbedderSettings) { s.BaseURL = "localhost:11434" }, `is not an http or https URL`},
		{func(s *EmbedderSettings) { s.Key = testKey + "\n" }, "memory.embedder: the key from secret OPENAI_KEY holds a line break or control character"},
		{func(s *EmbedderSettings) { s.Dim = -1 }, "memory.embedder: dim -1 is negative"},
	} {
		s := ok
		c.change(&s)
		_, err := NewEmbedder(s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", s, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), testKey) {
			t.Errorf("%q holds the key", err)
		}
	}
	if _, err := NewEmbedder(ok); err != nil {
		t.Fatal(err)
	}
}
