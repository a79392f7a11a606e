package node

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/tool"
	"github.com/tern-dev/tern/tool/mcptest"
)

// A turn paused for approval on a moves with the agent to b: b lists the
// action, a refuses the answer naming b, and b continues the turn.
func TestAPausedTurnContinuesOnTheNodeTheAgentMovedTo(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		connectAll(t, a, b)
		agent := heldBy(t, a, withTools(t, a))
		sessionID := newSession(t, a, agent)
		_, turn := startTurn(t, a, sessionID, map[string]any{"text": "!call write_file {\"path\": \"moved.txt\", \"content\": \"after the move\"}"})
		follow(t, a, sessionID, turn["id"].(string), -1, nil)
		ti := getTurn(t, a, sessionID, turn["id"].(string))
		if ti.Status != "paused" || len(ti.RequiredActions) != 1 {
			t.Fatalf("turn %+v", ti)
		}
		mustMigrate(t, a, b, agent)

		var pending []api.PendingAction
		callAPI(t, b, "GET", "/v1/actions", nil, &pending)
		if len(pending) != 1 || pending[0].ID != ti.RequiredActions[0].ID {
			t.Fatalf("b's pending actions %+v", pending)
		}
		answer := map[string]any{"responses": []any{map[string]any{"action_id": pending[0].ID, "approve": true}}}
		code, refused := startTurn(t, a, sessionID, answer)
		if code != http.StatusConflict || refused["peer"] != b.info.PeerID {
			t.Fatalf("answering on the old node: %d %v; want 409 naming b", code, refused)
		}
		code, next := startTurn(t, b, sessionID, answer)
		if code != 201 {
			t.Fatalf("answering on b: %d %v", code, next)
		}
		follow(t, b, sessionID, next["id"].(string), -1, nil)
		if ti := getTurn(t, b, sessionID, next["id"].(string)); ti.Status != "completed" {
			t.Fatalf("the continuing turn on b: %+v", ti)
		}
		if data, err := os.ReadFile(filepath.Join(b.home, WorkspacesDir, agent, "moved.txt")); err != nil || string(data) != "after the move" {
			t.Fatalf("b's workspace: %q %v", data, err)
		}
	})
}

// A turn running on a when the agent moves continues on b, and a client
// that followed it on a gets every remaining event once, either way:
// relayed by a from b over libp2p (the default: the client notices
// nothing), or, with ?relay=0, told where the turn went and reconnecting
// there with Last-Event-ID.
func TestARunningTurnContinuesOnTheTargetAndItsStreamLosesNothing(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		for _, relay := range []bool{true, false} {
			t.Run(map[bool]string{true: "relayed", false: "moved"}[relay], func(t *testing.T) {
				a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
				connectAll(t, a, b)
				agent := heldBy(t, a, withTools(t, a))
				gate := gatedModels(a) // a's model step hangs: the move comes in the middle of it
				defer gate.release()
				sessionID := newSession(t, a, agent)
				_, turn := startTurn(t, a, sessionID, map[string]any{"text": "!call list_files {}"})
				turnID := turn["id"].(string)
				<-gate.started

				query := ""
				if !relay {
					query = "?relay=0"
				}
				moved := make(chan Outcome, 1)
				items := followQuery(t, a, sessionID, turnID, query, -1, func(items []sseItem) bool {
					if len(items) == 2 {
						go func() {
							ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
							defer cancel()
							out, err := a.Migrate(ctx, agent, b.host.ID())
							if err != nil {
								out.Reason = err.Error()
							}
							moved <- out
						}()
					}
					return false
				})
				if out := <-moved; out.Outcome != "committed" {
					t.Fatalf("the move: %+v", out)
				}
				// The old node's GET says where a turn it still sees running went.
				if ti := getTurn(t, a, sessionID, turnID); ti.Status == "running" && ti.MovedTo != b.info.PeerID {
					t.Fatalf("a shows the moved turn as %+v, without moved_to naming b", ti)
				}
				all := durable(items)
				last := items[len(items)-1]
				if relay {
					if last.event != "turn.ended" {
						t.Fatalf("the relayed stream on a ended with %+v, want the turn's end", last)
					}
				} else {
					if last.event != "moved" || !strings.Contains(last.data, b.info.PeerID) {
						t.Fatalf("the stream on a ended with %+v, want moved naming b", last)
					}
					all = append(all, durable(follow(t, b, sessionID, turnID, len(all), nil))...)
				}
				for i, it := range all {
					if it.id != strconv.Itoa(i+1) {
						t.Fatalf("item %d has id %s: %v", i+1, it.id, all)
					}
				}
				var types []string
				for _, it := range all {
					types = append(types, it.event)
				}
				if got := strings.Join(types, " "); !strings.HasPrefix(got, "turn.started message tool_call") || !strings.HasSuffix(got, "turn.ended") {
					t.Fatalf("the turn's events across the move: %s", got)
				}
				var ended struct {
					Machine string `json:"machine"`
					Body    struct {
						Status string `json:"status"`
					} `json:"body"`
				}
				json.Unmarshal([]byte(all[len(all)-1].data), &ended)
				if ended.Body.Status != "completed" || ended.Machine != b.info.PeerID {
					t.Fatalf("the turn ended %+v; want completed by b", ended)
				}
			})
		}
	})
}

// A move that freezes the agent while a tool call runs waits for the call
// (intent to outcome), and a client following the turn on the old node
// still gets the rest of it, relayed.
func TestAMoveDuringAToolCallWaitsForItAndTheStreamGoesOn(t *testing.T) {
	overBoth(t, func(t *testing.T, tr transport) {
		a, b := tr.start(t, t.TempDir()), tr.start(t, t.TempDir())
		connectAll(t, a, b)
		agent := heldBy(t, a, func(dir string) {
			ag := capsule.DefaultAgent("mover")
			ag.Tools = tool.Defaults()
			for i := range ag.Tools {
				if ag.Tools[i].Name == "shell" {
					no := false
					ag.Tools[i].Approval = &no
				}
			}
			data, _ := ag.Encode()
			acceptEdit(t, a, dir, capsule.AgentFile, string(data))
		})
		sessionID := newSession(t, a, agent)
		_, turn := startTurn(t, a, sessionID, map[string]any{"text": "!call shell {\"command\": \"touch started; sleep 1; echo slept | tee slept.txt\"}"})
		turnID := turn["id"].(string)
		followed := make(chan []sseItem)
		go func() { followed <- follow(t, a, sessionID, turnID, -1, nil) }()
		eventually(t, "the command starts", func() bool {
			_, err := os.Stat(filepath.Join(a.home, WorkspacesDir, agent, "started"))
			return err == nil
		})
		mustMigrate(t, a, b, agent)
		var items []sseItem
		select {
		case items = <-followed:
		case <-time.After(20 * time.Second):
			t.Fatal("the follower on the old node never got the turn's end")
		}
		all := durable(items)
		for i, it := range all {
			if it.id != strconv.Itoa(i+1) {
				t.Fatalf("item %d has id %s", i+1, it.id)
			}
		}
		var types []string
		for _, it := range all {
			types = append(types, it.event)
		}
		got := strings.Join(types, " ")
		if !strings.Contains(got, "operation.intent operation.outcome tool_result") || !strings.HasSuffix(got, "turn.ended") {
			t.Fatalf("the turn across the move: %s", got)
		}
		// What the call wrote moved with the agent: its snapshot was taken
		// before the freeze went on.
		if data, err := os.ReadFile(filepath.Join(b.home, WorkspacesDir, agent, "slept.txt")); err != nil || string(data) != "slept\n" {
			t.Fatalf("the file the call wrote, on the target: %q %v", data, err)
		}
	})
}

// After a move the target connects to the agent's MCP servers itself,
// with its own secrets, and the source lets go of its connections.
func TestAfterAMoveTheTargetReconnectsToTheAgentsMCPServersWithItsOwnSecrets(t *testing.T) {
	var mu sync.Mutex
	keys := map[string]bool{} // the X-Key values the server saw
	handler := mcptest.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys[r.Header.Get("X-Key")] = true
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	start := func(key string) *Node {
		home := t.TempDir()
		n, err := Start(home, Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, SyncInterval: 100 * time.Millisecond,
			Secrets: mapSecrets{"MCP_KEY": key}}, testLog(home))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	a, b := start("laptop"), start("desktop")
	connectAll(t, a, b)
	agent := heldBy(t, a, func(dir string) {
		ag := capsule.DefaultAgent("mover")
		ag.MCPServers = map[string]capsule.MCPServer{"web": {URL: srv.URL, Headers: map[string]string{"X-Key": "${MCP_KEY}"}, Secrets: []string{"MCP_KEY"}}}
		data, err := ag.Encode()
		if err != nil {
			t.Fatal(err)
		}
		acceptEdit(t, a, dir, capsule.AgentFile, string(data))
	})
	echo := func(n *Node, text string) {
		t.Helper()
		sessionID := newSession(t, n, agent)
		_, turn := startTurn(t, n, sessionID, map[string]any{"text": `!call mcp__web__echo {"text": "` + text + `"}`})
		follow(t, n, sessionID, turn["id"].(string), -1, nil)
		if ti := getTurn(t, n, sessionID, turn["id"].(string)); ti.Status != "completed" {
			t.Fatalf("the turn on %s: %+v", text, ti)
		}
	}
	echo(a, "on the laptop")
	mustMigrate(t, a, b, agent)
	if a.rt.MCPConnected(agent) {
		t.Fatal("the source keeps its MCP connections after the move")
	}
	echo(b, "on the desktop")
	mu.Lock()
	defer mu.Unlock()
	if !keys["laptop"] || !keys["desktop"] {
		t.Fatalf("the server saw the keys %v; want each machine's own", keys)
	}
}
