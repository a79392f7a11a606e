package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/render"
	"github.com/tern-dev/tern/tool"
)

func demoCmd(e *env) *cobra.Command {
	var keep bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run the tern story on this machine, with nothing installed",
		Long: "Runs the tern story on this machine, in a temporary folder, with no network or key:\n" +
			"   1. a laptop creates a capsule\n" +
			"   2. it appends a conversation, each event signed and chained\n" +
			"   3. the conversation renders for OpenAI, Anthropic and Gemini\n" +
			"   4. the built-in offline model takes a step (reasoning, two parallel calls)\n" +
			"   5. a workspace is snapshotted into content-addressed blobs\n" +
			"   6. a signed, reproducible tar is packed and verified\n" +
			"   7. one flipped byte in a copy is caught by verify\n" +
			"   8. a laptop and a desktop each unpack it and work offline\n" +
			"   9. they merge, in either order, into the same bytes\n" +
			"  10. two real nodes on 127.0.0.1, paired, sync the capsule live\n" +
			"  11. the laptop node runs an agent: a turn pauses for approval and continues\n" +
			"  12. a stream cut mid-turn resumes, each event once\n" +
			"  13. the agent migrates to the desktop node and the conversation goes on there",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "tern-demo-")
			if err != nil {
				return err
			}
			if keep {
				fmt.Fprintf(e.stdout, "(keeping %s)\n", dir)
			} else {
				defer os.RemoveAll(dir)
			}
			return runDemo(cmd.Context(), e, dir)
		},
	}
	c.Flags().BoolVar(&keep, "keep", false, "keep the demo's folder and print its path")
	return c
}

// demoDraft builds a draft event for the demo conversation.
func demoDraft(typ, session, turn string, body any) journal.Draft {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return journal.Draft{Type: typ, Session: session, Turn: turn, Body: b}
}

func text(role, s string) map[string]any {
	return map[string]any{"role": role, "content": []map[string]string{{"type": "text", "text": s}}}
}

func runDemo(ctx context.Context, e *env, dir string) error {
	say := func(format string, args ...any) { fmt.Fprintf(e.stdout, format+"\n", args...) }
	step := 0
	title := func(s string) { step++; say("\n%d. %s", step, s) }
	path := func(name string) string { return filepath.Join(dir, name) }

	laptop, err := node.NewIdentity()
	if err != nil {
		return err
	}
	desktop, err := node.NewIdentity()
	if err != nil {
		return err
	}
	say("tern demo: an agent's state as plain files, checked and merged offline")
	say("laptop  = %s", laptop.Machine())
	say("desktop = %s", desktop.Machine())

	title("The laptop creates a capsule")
	c, err := capsule.New(path("agent"), "research-assistant", laptop.Machine())
	if err != nil {
		return err
	}
	c.Close()
	say("   agent id %s, folder %s", c.ID(), path("agent"))

	title("It appends a conversation: a question, a tool call, its result and an answer")
	d, err := e.openDir(ctx, path("agent"))
	if err != nil {
		return err
	}
	evs, err := d.Append(ctx, laptop, 0,
		demoDraft("message", "s1", "t1", text("user", "How big is the notes folder?")),
		demoDraft("tool_call", "s1", "t1", map[string]any{"call_id": "call_1", "name": "du", "arguments": map[string]string{"path": "notes"}}),
		demoDraft("tool_result", "s1", "t1", map[string]any{"call_id": "call_1", "content": []map[string]string{{"type": "text", "text": "12 KiB"}}, "is_error": false}),
		demoDraft("message", "s1", "t1", text("assistant", "The notes folder holds 12 KiB.")),
	)
	if err != nil {
		return err
	}
	say("   %d events, each signed by the laptop and chained to the one before", len(evs))

	title("The same conversation renders for any provider: switch models mid-thread")
	agent, err := d.Agent()
	if err != nil {
		return err
	}
	for _, t := range []render.Target{
		{Provider: render.OpenAIChat, Model: "gpt-4.1"},
		{Provider: render.Anthropic, Model: "claude-sonnet-4-5"},
		{Provider: render.Gemini, Model: "gemini-2.5-pro"},
	} {
		res, err := render.Render(render.Request{Events: evs, Agent: agent, Target: t})
		if err != nil {
			return err
		}
		say("   %-16s request body of %d bytes, about %d tokens", t.Provider, len(res.Body), res.Tokens)
	}

	title("The built-in offline model takes a step: no network, no key, the same every run")
	ask, err := d.Append(ctx, laptop, 0, demoDraft("message", "s1", "t2",
		text("user", "!reason Two folders to measure.\n!call du {\"path\": \"notes\"}\n!call du {\"path\": \"drafts\"}")))
	if err != nil {
		return err
	}
	model := provider.Settings{Provider: provider.Offline, Model: capsule.OfflineModel}
	req, err := render.Render(render.Request{Events: append(evs, ask...), Agent: agent,
		Target: render.Target{Provider: model.Wire(), Model: model.Model, Host: model.Host(), Stream: true}})
	if err != nil {
		return err
	}
	m, err := provider.New(model)
	if err != nil {
		return err
	}
	deltas := 0
	res, err := m.Step(ctx, req.Body, func(provider.Delta) { deltas++ })
	if err != nil {
		return err
	}
	var kinds []string
	for i := range res.Drafts {
		res.Drafts[i].Session, res.Drafts[i].Turn = "s1", "t2"
		kinds = append(kinds, res.Drafts[i].Type)
	}
	if _, err := d.Append(ctx, laptop, 0, res.Drafts...); err != nil {
		return err
	}
	say("   %d deltas streamed; the step appended whole: %s (stop: %s)", deltas, strings.Join(kinds, ", "), res.Stop)
	say("   a hosted model is the same call: agent.json names provider, model and key_secret (tern model test)")

	title("It snapshots a workspace into content-addressed blobs")
	ws := path("workspace")
	if err := writeDemoWorkspace(ws); err != nil {
		return err
	}
	body, err := d.Snapshot(ctx, laptop, ws)
	d.Close()
	if err != nil {
		return err
	}
	say("   %d files, %d bytes, snapshot %s", body.Files, body.Bytes, body.Snapshot)

	title("It packs a signed, reproducible tar and verifies it")
	if c, err = capsule.Open(path("agent")); err != nil {
		return err
	}
	tarPath := path("agent.tar")
	err = capsule.PackFile(c, tarPath, capsule.PackOptions{Signer: laptop})
	c.Close()
	if err != nil {
		return err
	}
	rep, err := capsule.Verify(tarPath, capsule.VerifyOptions{Signer: laptop.Machine()})
	if err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("demo: the fresh tar does not verify: %v", rep.Issues())
	}
	say("   verify: ok, %d files, %d events, signed by %s", rep.Files, rep.Events, rep.Signer)

	title("Someone flips one byte of a workspace file inside a copy of the tar")
	tampered := path("tampered.tar")
	raw, err := os.ReadFile(tarPath)
	if err != nil {
		return err
	}
	i := bytes.Index(raw, []byte("def greet"))
	if i < 0 {
		return fmt.Errorf("demo: workspace file not found in the tar")
	}
	raw = bytes.Clone(raw)
	raw[i] ^= 0x20
	if err := os.WriteFile(tampered, raw, 0o644); err != nil {
		return err
	}
	rep, err = capsule.Verify(tampered, capsule.VerifyOptions{})
	if err != nil {
		return err
	}
	if rep.OK() {
		return fmt.Errorf("demo: verify missed the flipped byte")
	}
	for _, p := range rep.Problems {
		say("   verify caught it: %s", p)
	}

	title("The laptop and the desktop each unpack the tar and work offline")
	if err := capsule.Unpack(tarPath, path("on-laptop"), capsule.Limits{}); err != nil {
		return err
	}
	if err := capsule.Unpack(tarPath, path("on-desktop"), capsule.Limits{}); err != nil {
		return err
	}
	for _, side := range []struct {
		dir  string
		who  *node.Identity
		text string
	}{
		{"on-laptop", laptop, "On the train: summarise chapter 3."},
		{"on-desktop", desktop, "At home: draft the reply to Ana."},
	} {
		d, err := e.openDir(ctx, path(side.dir))
		if err != nil {
			return err
		}
		_, err = d.Append(ctx, side.who, 0, demoDraft("message", "s2", "t-"+side.dir, text("user", side.text)))
		d.Close()
		if err != nil {
			return err
		}
		say("   %s appends: %q", side.dir, side.text)
	}

	title("They merge, in either order, into the same bytes")
	var packs [2][]byte
	for k, pair := range [][2]string{{"on-laptop", "on-desktop"}, {"on-desktop", "on-laptop"}} {
		a, err := capsule.Open(path(pair[0]))
		if err != nil {
			return err
		}
		b, err := capsule.Open(path(pair[1]))
		if err != nil {
			a.Close()
			return err
		}
		out := path(fmt.Sprintf("merged-%d.tar", k))
		res, err := capsule.Merge(a, b, out)
		a.Close()
		b.Close()
		if err != nil {
			return err
		}
		if packs[k], err = os.ReadFile(out); err != nil {
			return err
		}
		say("   merge %s + %s: %d events, %d forks", pair[0], pair[1], res.Events, len(res.Forks))
	}
	if !bytes.Equal(packs[0], packs[1]) {
		return fmt.Errorf("demo: the two merge orders gave different tars")
	}
	say("   both merged tars are byte-identical (%d bytes)", len(packs[0]))
	if rep, err = capsule.Verify(path("merged-0.tar"), capsule.VerifyOptions{}); err != nil || !rep.OK() {
		return fmt.Errorf("demo: merged tar does not verify: %v %v", err, rep)
	}
	say("   and verify: ok, %d events, every chain and signature checked", rep.Events)

	if err := demoLiveSync(ctx, e, dir, path("merged-0.tar"), say, title); err != nil {
		return err
	}
	say("\nDone. Next: tern capsule --help, tern node --help")
	return nil
}

// demoLiveSync runs two real nodes on 127.0.0.1, pairs them, gives both the
// capsule and shows an append on one reaching the other.
func demoLiveSync(ctx context.Context, e *env, dir, tarPath string, say func(string, ...any), title func(string)) error {
	title("Two nodes on this machine, paired, keep the capsule in sync live")
	cfg := node.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, SyncInterval: time.Second}
	var nodes [2]*node.Node
	for i, name := range []string{"laptop-home", "desktop-home"} {
		n, err := node.Start(filepath.Join(dir, name), cfg, nil)
		if err != nil {
			return err
		}
		defer n.Close()
		nodes[i] = n
	}
	laptop, desktop := nodes[0], nodes[1]
	for _, pair := range [][2]*node.Node{{laptop, desktop}, {desktop, laptop}} {
		info := pair[1].Info()
		if err := pair[0].Pair(node.Peer{ID: info.PeerID, Addrs: hostOnly(info.Addrs)}); err != nil {
			return err
		}
	}
	say("   laptop node %s and desktop node %s, each allowing only the other", short(laptop.Info().PeerID), short(desktop.Info().PeerID))
	agent, _, err := laptop.Import(tarPath)
	if err != nil {
		return err
	}
	start := time.Now()
	for !desktop.Store().Holds(agent) {
		if time.Since(start) > 20*time.Second {
			return fmt.Errorf("demo: the desktop node did not take the capsule")
		}
		time.Sleep(20 * time.Millisecond)
	}
	say("   the capsule, imported on the laptop node only, reached the desktop node in %s, verified", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	evs, err := laptop.Append(ctx, agent, []journal.Draft{demoDraft("message", "s3", "t1", text("user", "Written on the laptop, read on the desktop."))})
	if err != nil {
		return err
	}
	for {
		held, err := desktop.Store().Events(agent, "")
		if err != nil {
			return err
		}
		if hasEvent(held, evs[0].ID) {
			break
		}
		if time.Since(start) > 20*time.Second {
			return fmt.Errorf("demo: the desktop node did not receive the event")
		}
		time.Sleep(20 * time.Millisecond)
	}
	say("   an event appended on the laptop node reached the desktop node by gossip in %s, signature checked", time.Since(start).Round(100*time.Microsecond))
	return demoTurns(ctx, dir, laptop, desktop, say, title)
}

// demoTurns runs an agent on the laptop node through its HTTP API: a turn
// that pauses for approval and is continued, a stream cut and resumed,
// and a move to the desktop node, where the conversation goes on.
func demoTurns(ctx context.Context, dir string, laptop, desktop *node.Node, say func(string, ...any), title func(string)) error {
	title("The laptop node runs an agent: a turn pauses for approval, is approved, and finishes")
	a := capsule.DefaultAgent("planner")
	a.Tools = tool.Defaults()
	c, err := capsule.NewWithAgent(filepath.Join(dir, "live-agent"), a, laptop.Info().PeerID)
	if err != nil {
		return err
	}
	c.Close()
	agent, _, err := laptop.Import(filepath.Join(dir, "live-agent"))
	if err != nil {
		return err
	}
	lc, err := node.Dial(filepath.Join(dir, "laptop-home"))
	if err != nil {
		return err
	}
	var sess struct{ ID string }
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) { // until the laptop node runs it
		if err = lc.Do(ctx, "POST", "/v1/agents/"+agent+"/sessions", nil, &sess); err == nil {
			break
		}
		if time.Since(start) > 20*time.Second {
			return fmt.Errorf("demo: the laptop node does not run the agent: %w", err)
		}
	}
	turn := func(cl *node.Client, req string, after int, each func(node.TurnItem) error) (node.TurnInfo, error) {
		var t node.TurnInfo
		if err := cl.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/turns", strings.NewReader(req), &t); err != nil {
			return t, err
		}
		if each == nil {
			each = func(node.TurnItem) error { return nil }
		}
		if _, err := cl.FollowTurn(ctx, sess.ID, t.ID, after, each); err != nil {
			return t, err
		}
		err := cl.Do(ctx, "GET", "/v1/sessions/"+sess.ID+"/turns/"+t.ID, nil, &t)
		return t, err
	}
	t, err := turn(lc, `{"text":"!call write_file {\"path\": \"plan.md\", \"content\": \"1. sync 2. move 3. continue\"}"}`, 0, nil)
	if err != nil {
		return err
	}
	if t.Status != "paused" || len(t.RequiredActions) != 1 {
		return fmt.Errorf("demo: the turn did not pause for approval: %+v", t)
	}
	act := t.RequiredActions[0]
	say("   the model called %s %s; write_file needs approval, so the turn paused: %s", act.Tool, act.Arguments, act.ID)
	var reply string
	replyOf := func(it node.TurnItem) error {
		var ev struct {
			Body struct {
				Role    string `json:"role"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"body"`
		}
		if it.Event == "message" && json.Unmarshal(it.Data, &ev) == nil && ev.Body.Role == "assistant" && len(ev.Body.Content) > 0 {
			reply = ev.Body.Content[0].Text
		}
		return nil
	}
	t, err = turn(lc, `{"responses":[{"action_id":"`+act.ID+`","approve":true}]}`, 0, replyOf)
	if err != nil || t.Status != "completed" {
		return fmt.Errorf("demo: the continuing turn: %+v %v", t, err)
	}
	say("   approved: the next turn ran it between an operation.intent and its outcome, then %s: %q", t.Status, reply)
	say("   why it matters: a side effect runs once, after a person said yes, and a crash between the two records is reconciled, never retried blind")

	title("A stream cut in the middle of a turn resumes where it stopped, nothing twice")
	var t2 node.TurnInfo
	if err := lc.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/turns", strings.NewReader(`{"text":"!reason Check the plan first.\n!call read_file {\"path\": \"plan.md\"}"}`), &t2); err != nil {
		return err
	}
	var seqs []int
	cut := errors.New("cut")
	_, err = lc.FollowTurn(ctx, sess.ID, t2.ID, 0, func(it node.TurnItem) error {
		if it.Seq > 0 {
			seqs = append(seqs, it.Seq)
		}
		if len(seqs) == 3 {
			return cut // the connection drops after three events
		}
		return nil
	})
	if !errors.Is(err, cut) {
		return fmt.Errorf("demo: following the turn: %v", err)
	}
	first := len(seqs)
	if _, err := lc.FollowTurn(ctx, sess.ID, t2.ID, seqs[len(seqs)-1], func(it node.TurnItem) error {
		if it.Seq > 0 {
			seqs = append(seqs, it.Seq)
		}
		return nil
	}); err != nil {
		return err
	}
	for i, s := range seqs {
		if s != i+1 {
			return fmt.Errorf("demo: the resumed stream gave events %v", seqs)
		}
	}
	say("   events 1-%d, cut, then %d-%d after reconnecting from event %d (Last-Event-ID): each once, the turn never restarted", first, first+1, len(seqs), first)

	title("The agent migrates to the desktop node, and the conversation continues there")
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		held, err := desktop.Store().Events(agent, "")
		local, err2 := laptop.Store().Events(agent, "")
		if err == nil && err2 == nil && len(held) == len(local) {
			break
		}
		if time.Since(start) > 20*time.Second {
			return fmt.Errorf("demo: the desktop node did not take the running agent")
		}
	}
	out, err := laptop.Migrate(ctx, agent, desktop.Host().ID())
	if err != nil || out.Outcome != "committed" {
		return fmt.Errorf("demo: the migration: %+v %v", out, err)
	}
	var refused *node.APIError
	if err := lc.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/turns", strings.NewReader(`{"text":"still here?"}`), nil); !errors.As(err, &refused) || refused.Status != 409 {
		return fmt.Errorf("demo: the laptop node took a turn after the move: %v", err)
	}
	say("   committed at epoch %d, frozen for %d ms; the laptop node refuses to run it now (409: %s)", out.Epoch, out.FrozenMS, oneLine(refused.Message, 60))
	dc, err := node.Dial(filepath.Join(dir, "desktop-home"))
	if err != nil {
		return err
	}
	t, err = turn(dc, `{"text":"!call read_file {\"path\": \"plan.md\"}"}`, 0, replyOf)
	if err != nil || t.Status != "completed" {
		return fmt.Errorf("demo: the turn on the desktop: %+v %v", t, err)
	}
	say("   same session, next turn, on the desktop with the workspace it brought: %q", reply)
	return nil
}

func hasEvent(evs []*journal.Event, id string) bool {
	for _, e := range evs {
		if e.ID == id {
			return true
		}
	}
	return false
}

// hostOnly strips the /p2p/ID suffix node.Info adds to each address.
func hostOnly(addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		if k := strings.Index(a, "/p2p/"); k >= 0 {
			a = a[:k]
		}
		out[i] = a
	}
	return out
}

func short(peerID string) string { return "…" + peerID[len(peerID)-6:] }

func writeDemoWorkspace(ws string) error {
	files := map[string]string{
		"README.md":         "# notes\nA tiny workspace for the demo.\n",
		"src/greet.py":      "def greet(name):\n    return f\"hello, {name}\"\n",
		"notes/ch3.md":      "Chapter 3: the journal is a set of signed events.\n",
		"notes/empty/.keep": "",
	}
	for name, body := range files {
		p := filepath.Join(ws, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return os.Chmod(filepath.Join(ws, "src/greet.py"), 0o755)
}
