package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/sse"
)

// chatStub is an OpenAI-compatible server that streams deltas tokens of
// text, after waiting for hold (if set), and records, per request, when
// it arrived and when its first byte went out.
type chatStub struct {
	*httptest.Server
	deltas   int
	hold     chan struct{}
	pause    time.Duration // after the first delta
	interval time.Duration // after each delta

	mu        sync.Mutex
	firstByte []time.Duration // from the request's arrival to the first byte flushed
}

func newChatStub(tb testing.TB, deltas int) *chatStub {
	s := &chatStub{deltas: deltas}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		io.Copy(io.Discard, r.Body)
		if s.hold != nil {
			<-s.hold
			arrived = time.Now()
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := 0; i < s.deltas; i++ {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d \"},\"finish_reason\":null}]}\n\n", i)
			f.Flush()
			if !pace(r.Context(), s.interval) {
				return
			}
			if i == 0 {
				s.mu.Lock()
				s.firstByte = append(s.firstByte, time.Since(arrived))
				s.mu.Unlock()
				if !pace(r.Context(), s.pause) { // the rest of the answer comes later, as a model's does
					return
				}
			}
		}
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"+
			"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
	}))
	tb.Cleanup(s.Close)
	return s
}

// pace waits d, as a model does between the parts of its answer, and
// reports false if the client went away meanwhile.
func pace(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	// real clock: the stub's pacing is the workload the benchmarks measure
	// the node under, as a model's answer is.
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// requests is how many requests the stub answered.
func (s *chatStub) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.firstByte)
}

// stubAgent is a node running an agent whose model is the stub.
func stubAgent(tb testing.TB, stub *chatStub) (*Node, string) {
	n, err := Start(tb.TempDir(), Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.Close() })
	dir := tb.TempDir() + "/agent"
	c, err := capsule.New(dir, "bench", n.id)
	if err != nil {
		tb.Fatal(err)
	}
	c.Close()
	a := capsule.DefaultAgent("bench")
	a.Provider, a.Model, a.BaseURL = "openai-chat", "stub", stub.URL+"/v1"
	b, _ := a.Encode()
	acceptEdit(tb, n, dir, capsule.AgentFile, string(b))
	id, _, err := n.Import(dir)
	if err != nil {
		tb.Fatal(err)
	}
	eventually(tb, "the node runs the agent", func() bool { return n.runs(id) })
	return n, id
}

// rawSSE is a subscriber on its own TCP connection: one goroutine, one
// reader of frames.
type rawSSE struct {
	conn net.Conn
	body *sse.Reader
}

func subscribe(tb testing.TB, n *Node, sessionID, turnID string) *rawSSE {
	u, _ := url.Parse(n.info.API)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		tb.Fatal(err)
	}
	req, _ := http.NewRequest("GET", n.info.API+"/v1/sessions/"+sessionID+"/turns/"+turnID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+n.info.Token)
	if err := req.Write(conn); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil || resp.StatusCode != 200 {
		tb.Fatalf("subscribe: %v %v", resp, err)
	}
	return &rawSSE{conn: conn, body: sse.NewReader(resp.Body, api.MaxFrame)}
}

// next reads up to the next event and returns its type.
func (s *rawSSE) next() (string, error) {
	for {
		f, err := s.body.Next()
		if err != nil || f.Event != "" {
			return f.Event, err
		}
	}
}

func postJSON(tb testing.TB, n *Node, path, body string) string {
	req, _ := http.NewRequest("POST", n.info.API+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+n.info.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &created); err != nil || resp.StatusCode != 201 || created.ID == "" {
		tb.Fatalf("POST %s: %d %s", path, resp.StatusCode, data)
	}
	return created.ID
}

// BenchmarkTurnFirstDelta: the time from POST /turns to the first delta
// at an SSE client, less the stub's own time from the request to its
// first byte: what the node adds (two durable appends, reading the
// session, rendering, the provider's parsing, the fan-out).
func BenchmarkTurnFirstDelta(b *testing.B) {
	stub := newChatStub(b, 8)
	stub.pause = 20 * time.Millisecond // so the client, subscribing after its POST, sees the step live
	n, agent := stubAgent(b, stub)
	var total []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sessionID := postJSON(b, n, "/v1/agents/"+agent+"/sessions", "")
		began := time.Now()
		turnID := postJSON(b, n, "/v1/sessions/"+sessionID+"/turns", `{"text":"hi"}`)
		sub := subscribe(b, n, sessionID, turnID)
		for seen := false; ; {
			ev, err := sub.next()
			if err != nil {
				b.Fatal(err)
			}
			if ev == "delta" && !seen {
				total, seen = append(total, time.Since(began)), true
			}
			if ev == "turn.ended" {
				if !seen {
					b.Fatal("the subscriber saw no delta")
				}
				break
			}
		}
		sub.conn.Close()
	}
	b.StopTimer()
	stub.mu.Lock()
	first := slices.Clone(stub.firstByte)
	stub.mu.Unlock()
	added := make([]time.Duration, len(total))
	for i := range total {
		added[i] = total[i] - first[i]
	}
	slices.Sort(added)
	slices.Sort(first)
	pct := func(d []time.Duration, p float64) float64 {
		return float64(d[min(len(d)-1, int(float64(len(d))*p))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(added, 0.5), "added-p50-ms")
	b.ReportMetric(pct(added, 0.99), "added-p99-ms")
	b.ReportMetric(pct(first, 0.5), "stub-first-byte-p50-ms")
	appends, _ := n.rt.Writes()
	b.ReportMetric(float64(appends)/float64(b.N), "appends/turn")
}

// BenchmarkTurnFanOut1000: 1,000 SSE subscribers, each on its own TCP
// connection, follow one turn whose model streams 500 deltas, one per
// millisecond (faster than models write); items (events and deltas)
// delivered per second over all subscribers, the share of deltas that
// reached them (a subscriber that falls behind a step gets the step's
// events instead of its remaining deltas), and the memory each
// subscriber costs (node and this minimal client together, measured with
// the turn waiting for its model).
func BenchmarkTurnFanOut1000(b *testing.B) {
	const subscribers, deltas = 1000, 500
	stub := newChatStub(b, deltas)
	stub.interval = time.Millisecond
	n, agent := stubAgent(b, stub)
	var itemsPerSec, bytesPerSub, delivered float64
	for i := 0; i < b.N; i++ {
		stub.hold = make(chan struct{})
		sessionID := postJSON(b, n, "/v1/agents/"+agent+"/sessions", "")
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		turnID := postJSON(b, n, "/v1/sessions/"+sessionID+"/turns", `{"text":"hi"}`)
		subs := make([]*rawSSE, subscribers)
		for j := range subs {
			subs[j] = subscribe(b, n, sessionID, turnID)
			if ev, err := subs[j].next(); err != nil || ev != "turn.started" {
				b.Fatalf("subscriber %d: %s %v", j, ev, err)
			}
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		bytesPerSub = float64((after.HeapInuse+after.StackInuse)-(before.HeapInuse+before.StackInuse)) / subscribers

		var wg sync.WaitGroup
		counts := make([]int, subscribers)
		b.StartTimer()
		began := time.Now()
		close(stub.hold)
		for j, s := range subs {
			wg.Go(func() {
				for {
					ev, err := s.next()
					if err != nil {
						return
					}
					counts[j]++
					if ev == "turn.ended" {
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(began)
		b.StopTimer()
		items := 0
		for _, c := range counts {
			items += c
		}
		itemsPerSec = float64(items) / elapsed.Seconds()
		delivered = float64(items-subscribers*4) / float64(subscribers*deltas) // less turn.started … turn.ended
		for _, s := range subs {
			s.conn.Close()
		}
	}
	b.ReportMetric(itemsPerSec, "items/s")
	b.ReportMetric(100*delivered, "%deltas-delivered")
	b.ReportMetric(bytesPerSub/1024, "KiB/subscriber")
}

// BenchmarkTurnDurableOverhead: durable appends (journal group commits)
// per model step and per tool call, counted by the runtime, for a turn of
// the offline model that calls a pure tool and, approved, an idempotent
// one (which also snapshots the workspace).
func BenchmarkTurnDurableOverhead(b *testing.B) {
	n := startNode(b, b.TempDir())
	agent := heldBy(b, n, withTools(b, n))
	var appends, snapshots int64
	for i := 0; i < b.N; i++ {
		sessionID := postJSON(b, n, "/v1/agents/"+agent+"/sessions", "")
		before, snapsBefore := n.rt.Writes()
		turnID := postJSON(b, n, "/v1/sessions/"+sessionID+"/turns", `{"text":"!call read_file {\"path\": \"x\"}\n!call write_file {\"path\": \"x\", \"content\": \"y\"}"}`)
		drain(b, n, sessionID, turnID)
		pending := []api.PendingAction{}
		_, data := call(b, n, "GET", "/v1/agents/"+agent+"/actions", nil)
		if err := json.Unmarshal(data, &pending); err != nil || len(pending) != 1 {
			b.Fatalf("pending %s", data)
		}
		next := postJSON(b, n, "/v1/sessions/"+sessionID+"/turns", fmt.Sprintf(`{"responses":[{"action_id":%q,"approve":true}]}`, pending[0].ID))
		drain(b, n, sessionID, next)
		after, snapsAfter := n.rt.Writes()
		appends += after - before
		snapshots += snapsAfter - snapsBefore
	}
	// Per iteration: two turns (2 × turn.started + 2 × turn.ended, the
	// answers with the second turn.started), two model steps, one pure call
	// (its result) and one non-pure call (intent; outcome with result).
	b.ReportMetric(float64(appends)/float64(b.N), "appends/iteration")
	b.ReportMetric(float64(snapshots)/float64(b.N), "snapshots/iteration")
}

func drain(tb testing.TB, n *Node, sessionID, turnID string) {
	s := subscribe(tb, n, sessionID, turnID)
	defer s.conn.Close()
	for {
		ev, err := s.next()
		if err != nil {
			tb.Fatal(err)
		}
		if ev == "turn.ended" {
			return
		}
	}
}
