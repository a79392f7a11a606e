package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// longStream is a long answer (about size bytes on the wire) in provider
// p's stream format: many small text deltas, as a model writes.
func longStream(p string, size int) string {
	var b strings.Builder
	piece := "lorem ipsum "
	switch p {
	case "openai-chat":
		for b.Len() < size {
			fmt.Fprintf(&b, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", piece)
		}
		b.WriteString("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	case "anthropic":
		b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n")
		b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		for b.Len() < size {
			fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", piece)
		}
		b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
		b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n")
		b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	case "gemini":
		for b.Len() < size {
			fmt.Fprintf(&b, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":%q}],\"role\":\"model\"},\"index\":0}],\"modelVersion\":\"m\"}\n\n", piece)
		}
		b.WriteString("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"end\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":1,\"candidatesTokenCount\":9,\"totalTokenCount\":10}}\n\n")
	case "ollama":
		for b.Len() < size {
			fmt.Fprintf(&b, "{\"model\":\"m\",\"created_at\":\"2026-01-01T00:00:00Z\",\"message\":{\"role\":\"assistant\",\"content\":%q},\"done\":false}\n", piece)
		}
		b.WriteString("{\"model\":\"m\",\"created_at\":\"2026-01-01T00:00:00Z\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\",\"prompt_eval_count\":1,\"eval_count\":9}\n")
	case "openai-responses":
		b.WriteString("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"},\"output_index\":0,\"sequence_number\":1}\n\n")
		for n := 2; b.Len() < size; n++ {
			fmt.Fprintf(&b, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":%q,\"sequence_number\":%d}\n\n", piece, n)
		}
		b.WriteString("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":9}},\"sequence_number\":999999}\n\n")
	}
	return b.String()
}

// streamServer serves stream to every POST, writing its first event at
// once and recording when (firstWrite, in Unix nanoseconds).
func streamServer(b *testing.B, stream string, firstWrite *atomic.Int64) *httptest.Server {
	first := strings.Index(stream, "\n\n") + 2 // the first SSE event
	if stream[0] == '{' {
		first = strings.IndexByte(stream, '\n') + 1 // the first NDJSON line
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		firstWrite.Store(time.Now().UnixNano())
		w.Write([]byte(stream[:first]))
		w.(http.Flusher).Flush()
		w.Write([]byte(stream[first:]))
	}))
	b.Cleanup(s.Close)
	return s
}

var benchProviders = []struct{ name, base, path string }{
	{"openai-chat", "/v1", "/v1/chat/completions"},
	{"openai-responses", "/v1", "/v1/responses"},
	{"anthropic", "", "/v1/messages"},
	{"gemini", "", "/v1beta/models/m:streamGenerateContent"},
	{"ollama", "", "/api/chat"},
}

// BenchmarkFirstDelta measures, on loopback, the time from the stub
// server writing its first event to tern's first delta, and the same for
// a plain HTTP client's first byte of the body, in one run. added-µs is
// the difference of their medians: what tern adds.
func BenchmarkFirstDelta(b *testing.B) {
	for _, p := range benchProviders {
		b.Run(p.name, func(b *testing.B) {
			var first atomic.Int64
			stream := longStream(p.name, 4<<10)
			s := streamServer(b, stream, &first)
			m, err := NewWith(Settings{Provider: p.name, Model: "m", BaseURL: s.URL + p.base}, Options{})
			if err != nil {
				b.Fatal(err)
			}
			req := []byte(`{"model":"m"}`)
			var tern, raw []float64
			for b.Loop() {
				var at int64
				if _, err := m.Step(context.Background(), req, func(Delta) {
					if at == 0 {
						at = time.Now().UnixNano()
					}
				}); err != nil {
					b.Fatal(err)
				}
				tern = append(tern, float64(at-first.Load())/1e3)

				resp, err := http.Post(s.URL+p.path, "application/json", strings.NewReader(string(req)))
				if err != nil {
					b.Fatal(err)
				}
				one := make([]byte, 1)
				io.ReadFull(resp.Body, one)
				raw = append(raw, float64(time.Now().UnixNano()-first.Load())/1e3)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			slices.Sort(tern)
			slices.Sort(raw)
			q := func(xs []float64, f float64) float64 { return xs[min(len(xs)-1, int(f*float64(len(xs))))] }
			b.ReportMetric(q(tern, 0.5), "tern-p50-µs")
			b.ReportMetric(q(tern, 0.99), "tern-p99-µs")
			b.ReportMetric(q(raw, 0.5), "raw-p50-µs")
			b.ReportMetric(q(raw, 0.99), "raw-p99-µs")
			b.ReportMetric(q(tern, 0.5)-q(raw, 0.5), "added-p50-µs")
		})
	}
}

// BenchmarkStreamParse reads a 4 MiB answer of small text deltas through
// tern (decoding, assembling, a delta per piece) and, in the same run,
// the same bytes with a plain HTTP client into io.Discard; ratio is
// tern's throughput over the plain read's.
func BenchmarkStreamParse(b *testing.B) {
	for _, p := range benchProviders {
		b.Run(p.name, func(b *testing.B) {
			var first atomic.Int64
			stream := longStream(p.name, 4<<20)
			s := streamServer(b, stream, &first)
			m, err := NewWith(Settings{Provider: p.name, Model: "m", BaseURL: s.URL + p.base}, Options{})
			if err != nil {
				b.Fatal(err)
			}
			req := []byte(`{"model":"m"}`)
			var ternTime, rawTime time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := m.Step(context.Background(), req, func(Delta) {}); err != nil {
					b.Fatal(err)
				}
				ternTime += time.Since(t0)
				t0 = time.Now()
				resp, err := http.Post(s.URL+p.path, "application/json", strings.NewReader(string(req)))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				rawTime += time.Since(t0)
			}
			mb := float64(len(stream)) * float64(b.N) / 1e6
			b.ReportMetric(mb/ternTime.Seconds(), "tern-MB/s")
			b.ReportMetric(mb/rawTime.Seconds(), "raw-MB/s")
			b.ReportMetric(rawTime.Seconds()/ternTime.Seconds(), "ratio")
		})
	}
}
