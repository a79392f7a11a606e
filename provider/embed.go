package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/providerid"
	"github.com/tern-dev/tern/memory"
)

// EmbedderSettings choose a provider embedder (agent.json's
// memory.embedder), with the key resolved.
type EmbedderSettings struct {
	// Provider is "openai" (OpenAI's /v1/embeddings, and any server that
	// speaks it), "ollama" (/api/embed) or "gemini" (batchEmbedContents).
	Provider string
	// Model is the embedding model (text-embedding-3-small,
	// nomic-embed-text, gemini-embedding-001).
	Model string
	// BaseURL is the API's base URL in its official SDK's convention;
	// empty means DefaultEmbedderBaseURL(Provider): openai
	// "https://api.openai.com/v1" (POST {base}/embeddings), ollama
	// "http://127.0.0.1:11434" (POST {base}/api/embed), gemini
	// "https://generativelanguage.googleapis.com" (POST
	// {base}/v1beta/models/{model}:batchEmbedContents).
	BaseURL string
	// KeySecret is the name of the secret the key came from, for error
	// messages; never the key.
	KeySecret string
	// Key is the API key, or empty (a local Ollama). It goes into one
	// request header and nowhere else: Authorization: Bearer for openai
	// and ollama, x-goog-api-key for gemini.
	Key string
	// Dim is the dimension the vectors must have; 0 means the dimension
	// of the first answer, which every later answer must then have. When
	// Dim > 0 it is also asked for (OpenAI's "dimensions", Gemini's
	// "outputDimensionality"; Ollama is not asked).
	Dim int
}

// DefaultEmbedderBaseURL is the base URL p's official SDK uses by
// default; "" for an unknown provider.
func DefaultEmbedderBaseURL(p string) string {
	return DefaultBaseURL(string(providerid.Embedder(p).Provider()))
}

// EmbedBatch is the most texts one request carries: Embed splits a
// longer list into requests of at most EmbedBatch texts, in order.
const EmbedBatch = 96

// Check says what is wrong with s before anything is sent: an unknown
// provider, a missing model, a base URL that is not http(s), a key no
// header can carry, a negative dimension. Its messages start with
// "memory.embedder: ", the part of agent.json to fix.
func (s EmbedderSettings) Check() error {
	chat := providerid.Embedder(s.Provider).Provider()
	if chat == "" {
		return fmt.Errorf("memory.embedder %q is not one of %s", s.Provider, strings.Join(providerid.Names(providerid.ProviderEmbedders()), ", "))
	}
	if s.Model == "" {
		return fmt.Errorf("memory.model is empty: name the %s embedding model", s.Provider)
	}
	// The model's settings say the rest in the same words.
	if err := (Settings{Provider: string(chat), Model: s.Model, BaseURL: s.BaseURL, KeySecret: s.KeySecret, Key: s.Key}).Check(); err != nil {
		return fmt.Errorf("memory.embedder: %w", err)
	}
	if s.Dim < 0 {
		return fmt.Errorf("memory.embedder: dim %d is negative: set it to the model's dimension, or leave it out to take the dimension of the first answer", s.Dim)
	}
	return nil
}

// NewEmbedder returns the embedder s names. It fails if s does not Check.
//
// Its Spec() is {Name: s.Provider, Model: s.Model, Dim: s.Dim}; when
// s.Dim is 0, Spec().Dim is 0 until a first Embed has succeeded, and the
// dimension of that answer afterwards.
//
// Embed sends the texts EmbedBatch at a time and returns one vector per
// text, in order. It retries as a Model does (Options). It refuses an
// answer with a vector count other than the text count, vectors of
// unequal or unexpected dimension, or a value that is NaN or infinite.
// Its errors start with "memory.embedder: "; those of the API wrap an
// *Error (errors.Is(err, ErrAuth), …). No error holds the key.
func NewEmbedder(s EmbedderSettings) (memory.Embedder, error) {
	return NewEmbedderWith(s, Options{})
}

// NewEmbedderWith is NewEmbedder with options.
func NewEmbedderWith(s EmbedderSettings, opt Options) (memory.Embedder, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	var w embedWire
	switch providerid.Embedder(s.Provider) {
	case providerid.EmbedOpenAI:
		w = openaiEmbed{}
	case providerid.EmbedOllama:
		w = ollamaEmbed{}
	case providerid.EmbedGemini:
		w = geminiEmbed{}
	}
	base := s.BaseURL
	if base == "" {
		base = DefaultEmbedderBaseURL(s.Provider)
	}
	base = strings.TrimRight(base, "/")
	e := &embedder{
		s:   s,
		w:   w,
		url: base + w.path(s.Model),
		opt: opt.orDefault(),
		// classify and redact as a Model does, with the provider's name.
		m: httpModel{s: Settings{Provider: s.Provider, Model: s.Model, BaseURL: base, KeySecret: s.KeySecret, Key: s.Key}},
	}
	e.dim.Store(int64(s.Dim))
	return e, nil
}

// embedWire is what differs between the embeddings APIs.
type embedWire interface {
	// path is the endpoint's path after the base URL.
	path(model string) string
	// request is the body that asks for texts' vectors.
	request(model string, texts []string, dim int) any
	// auth sets the header that carries the key (none if key is empty).
	auth(h http.Header, key string)
	// vectors reads an answer to n texts: its vectors in the texts'
	// order, or what is wrong with it.
	vectors(body []byte, n int) ([][]float64, error)
	// message extracts the provider's own message from an error body.
	message(body []byte) string
}

// embedder is a memory.Embedder behind an HTTP API.
type embedder struct {
	s   EmbedderSettings
	w   embedWire
	url string
	opt Options
	m   httpModel
	dim atomic.Int64 // s.Dim, or the first answer's dimension; 0 until known
}

func (e *embedder) Spec() memory.EmbedderSpec {
	return memory.EmbedderSpec{Name: e.s.Provider, Model: e.s.Model, Dim: int(e.dim.Load())}
}

func (e *embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += EmbedBatch {
		vs, err := e.batch(ctx, texts[start:min(start+EmbedBatch, len(texts))])
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// batch embeds at most EmbedBatch texts with one request (and its
// retries).
func (e *embedder) batch(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(e.w.request(e.s.Model, texts, e.s.Dim))
	if err != nil {
		return nil, err
	}
	raw, ctype, err := e.send(ctx, body)
	if err != nil {
		return nil, err
	}
	vs, err := e.w.vectors(raw, len(texts))
	if err != nil {
		return nil, e.fail("gave an answer that is not the %s embeddings API's (Content-Type %q: %s; it said: %s): if the server at %s speaks another API, fix memory.embedder or memory.base_url in agent.json",
			e.s.Provider, ctype, err, e.m.redact(errorMessage(raw)), e.m.s.Host())
	}
	return e.check(vs, len(texts))
}

// send posts body, again after a 429, a 5xx or no connection as Options
// say, and returns the answer's body and Content-Type.
func (e *embedder) send(ctx context.Context, body []byte) ([]byte, string, error) {
	wait := e.opt.Backoff
	for attempt := 1; ; attempt++ {
		raw, ctype, err := e.try(ctx, body)
		if err == nil {
			return raw, ctype, nil
		}
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		x, ok := err.(*Error)
		if !ok {
			return nil, "", err
		}
		x.Attempts = attempt
		retry := x.Kind == ErrRateLimited || x.Kind == ErrUnavailable
		if !retry || attempt > e.opt.Retries {
			return nil, "", fmt.Errorf("memory.embedder: %w", x)
		}
		d := wait
		if after, ok := x.retryAfter(); ok {
			if after > e.opt.MaxWait {
				x.Message += fmt.Sprintf(" (it asks to wait %v before trying again)", after.Round(time.Second))
				return nil, "", fmt.Errorf("memory.embedder: %w", x)
			}
			d = after
		}
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(d):
		}
		wait *= 2
	}
}

// try posts body once.
func (e *embedder) try(ctx context.Context, body []byte) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	e.w.auth(req.Header, e.s.Key)
	resp, err := e.opt.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		kind := ErrUnavailable // no connection: trying again may work
		if !isNetwork(err) {
			kind = ErrBadRequest // a request no attempt can send
		}
		return nil, "", e.apiError(kind, 0, err.Error())
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		x := e.m.classify(resp.StatusCode, e.w.message(raw))
		x.header = resp.Header
		if providerid.Embedder(e.s.Provider) == providerid.EmbedGemini {
			geminiWire{}.refine(x, raw)
		}
		switch x.Kind {
		case ErrAuth, ErrRateLimited, ErrUnavailable:
		case ErrContextLength:
			x.Message += fmt.Sprintf(" (tern posted to %s: a text is longer than model %s takes)", req.URL.EscapedPath(), e.s.Model)
		default:
			what := "model and dim"
			if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
				what = "model and base_url"
			}
			x.Message += fmt.Sprintf(" (tern posted to %s: check %s under memory in agent.json)", req.URL.EscapedPath(), what)
		}
		return nil, "", x
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		// A whole answer or none: asking again repeats nothing.
		return nil, "", e.apiError(ErrUnavailable, 0, fmt.Sprintf("the answer broke off after %d bytes: %v", len(raw), err))
	}
	return raw, resp.Header.Get("Content-Type"), nil
}

// apiError is an *Error of kind for what happened to a request.
func (e *embedder) apiError(kind error, status int, msg string) *Error {
	s := e.m.s
	return &Error{Kind: kind, Provider: s.Provider, Host: s.Host(), Model: s.Model, Secret: s.KeySecret, Status: status, Message: e.m.redact(msg)}
}

// fail is the error of an answer tern cannot use.
func (e *embedder) fail(format string, args ...any) error {
	return fmt.Errorf("memory.embedder: %s at %s (model %s) %s", e.s.Provider, e.m.s.Host(), e.s.Model, e.m.redact(fmt.Sprintf(format, args...)))
}

// check turns an answer's vectors for n texts into float32s: one per
// text, all of the one expected dimension, every value finite.
func (e *embedder) check(vs [][]float64, n int) ([][]float32, error) {
	if len(vs) != n {
		return nil, e.fail("answered %d vectors for %d texts: the server does not answer as the %s embeddings API does; check memory.embedder and memory.base_url in agent.json",
			len(vs), n, e.s.Provider)
	}
	if n == 0 {
		return [][]float32{}, nil
	}
	got := len(vs[0])
	out := make([][]float32, n)
	for i, v := range vs {
		if len(v) == 0 {
			return nil, e.fail("answered an empty vector for text %d of %d", i+1, n)
		}
		if len(v) != got {
			return nil, e.fail("answered vectors of unequal dimension in one answer: %d values for text 1, %d for text %d", got, len(v), i+1)
		}
		f := make([]float32, len(v))
		for j, x := range v {
			if math.IsNaN(x) || math.Abs(x) > math.MaxFloat32 {
				return nil, e.fail("answered a vector holding %v (value %d for text %d), which is not a finite float32", x, j+1, i+1)
			}
			f[j] = float32(x)
		}
		out[i] = f
	}
	if want := e.s.Dim; want > 0 {
		if got != want {
			return nil, e.fail("answered vectors of %d values, and memory.dim is %d: set memory.dim in agent.json to %d, or pick a model that makes %d-value vectors",
				got, want, got, want)
		}
		return out, nil
	}
	if e.dim.CompareAndSwap(0, int64(got)) {
		return out, nil
	}
	if want := int(e.dim.Load()); got != want {
		return nil, e.fail("answered vectors of %d values, and its first answer had %d: the model behind it changed; set memory.dim in agent.json to the dimension you want, or pick the model that made the first vectors",
			got, want)
	}
	return out, nil
}

// openaiEmbed is OpenAI's embeddings API, and every server that speaks it
// (vLLM, llama.cpp's server, LM Studio, …): POST {base}/embeddings with
// the key as a bearer token, {"data":[{"index":i,"embedding":[…]}]}
// back, in any order of index. Float vectors are asked for, so base64
// ones are not read.
type openaiEmbed struct{}

func (openaiEmbed) path(string) string { return "/embeddings" }

func (openaiEmbed) request(model string, texts []string, dim int) any {
	return struct {
		Model          string   `json:"model"`
		Input          []string `json:"input"`
		EncodingFormat string   `json:"encoding_format"`
		Dimensions     int      `json:"dimensions,omitempty"`
	}{model, texts, "float", dim}
}

func (openaiEmbed) auth(h http.Header, key string) { chatWire{}.auth(h, key) }

func (openaiEmbed) message(body []byte) string { return errorMessage(body) }

func (openaiEmbed) vectors(body []byte, n int) ([][]float64, error) {
	var a struct {
		Data *[]struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("not an embeddings list: %v", err)
	}
	if a.Data == nil {
		return nil, fmt.Errorf("no data")
	}
	data := *a.Data
	out := make([][]float64, len(data))
	if len(data) != n {
		for i, d := range data {
			out[i] = d.Embedding // check says how many are missing
		}
		return out, nil
	}
	seen := make([]bool, n)
	for _, d := range data {
		if d.Index < 0 || d.Index >= n || seen[d.Index] {
			return nil, fmt.Errorf("its indexes are not 0 to %d, each once (index %d)", n-1, d.Index)
		}
		seen[d.Index] = true
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// ollamaEmbed is Ollama's /api/embed: POST {base}/api/embed, with the key
// as a bearer token when there is one (Ollama's hosted API) and no header
// for a local server; {"embeddings":[[…],…]} back, in the inputs' order.
type ollamaEmbed struct{}

func (ollamaEmbed) path(string) string { return "/api/embed" }

func (ollamaEmbed) request(model string, texts []string, _ int) any {
	return struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}{model, texts}
}

func (ollamaEmbed) auth(h http.Header, key string) { chatWire{}.auth(h, key) }

func (ollamaEmbed) message(body []byte) string { return errorMessage(body) }

func (ollamaEmbed) vectors(body []byte, _ int) ([][]float64, error) {
	var a struct {
		Embeddings *[][]float64 `json:"embeddings"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("not an embed response: %v", err)
	}
	if a.Embeddings == nil {
		return nil, fmt.Errorf("no embeddings")
	}
	return *a.Embeddings, nil
}

// geminiEmbed is the Gemini API's batchEmbedContents: POST
// {base}/v1beta/models/{model}:batchEmbedContents with the key in
// x-goog-api-key (never in the URL), one request per text naming
// "models/{model}"; {"embeddings":[{"values":[…]},…]} back, in the
// requests' order.
type geminiEmbed struct{}

func (geminiEmbed) path(model string) string {
	model = strings.TrimPrefix(model, "models/") // the SDKs accept both spellings
	return "/v1beta/models/" + url.PathEscape(model) + ":batchEmbedContents"
}

type geminiEmbedRequest struct {
	Model   string `json:"model"`
	Content struct {
		Parts []geminiEmbedPart `json:"parts"`
	} `json:"content"`
	OutputDimensionality int `json:"outputDimensionality,omitempty"`
}

type geminiEmbedPart struct {
	Text string `json:"text"`
}

func (geminiEmbed) request(model string, texts []string, dim int) any {
	name := "models/" + strings.TrimPrefix(model, "models/")
	reqs := make([]geminiEmbedRequest, len(texts))
	for i, t := range texts {
		reqs[i].Model = name
		reqs[i].Content.Parts = []geminiEmbedPart{{Text: t}}
		reqs[i].OutputDimensionality = dim
	}
	return struct {
		Requests []geminiEmbedRequest `json:"requests"`
	}{reqs}
}

func (geminiEmbed) auth(h http.Header, key string) { geminiWire{}.auth(h, key) }

func (geminiEmbed) message(body []byte) string { return geminiWire{}.message(body) }

func (geminiEmbed) vectors(body []byte, _ int) ([][]float64, error) {
	var a struct {
		Embeddings *[]struct {
			Values []float64 `json:"values"`
		} `json:"embeddings"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("not a batchEmbedContents response: %v", err)
	}
	if a.Embeddings == nil {
		return nil, fmt.Errorf("no embeddings")
	}
	out := make([][]float64, len(*a.Embeddings))
	for i, x := range *a.Embeddings {
		out[i] = x.Values
	}
	return out, nil
}

// EmbedderFor returns the embedder agent.json's memory settings choose:
// the built-in one by default, or a provider's with its key read from
// secrets when memory.key_secret names one.
func EmbedderFor(a capsule.Agent, secrets Secrets) (memory.Embedder, error) {
	m := a.Memory
	if a.EmbedderSpec() == memory.BuiltinSpec {
		return memory.Builtin{}, nil
	}
	s := EmbedderSettings{Provider: m.Embedder, Model: m.Model, BaseURL: m.BaseURL, KeySecret: m.KeySecret, Dim: m.Dim}
	if m.KeySecret != "" {
		if secrets == nil {
			return nil, fmt.Errorf("agent.json's memory names the secret %s, and no secret store is open", m.KeySecret)
		}
		key, err := secrets.Get(m.KeySecret)
		if err != nil {
			return nil, err
		}
		s.Key = key
	}
	return NewEmbedder(s)
}
