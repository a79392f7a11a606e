package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/providerid"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/render"
	"github.com/tern-dev/tern/tool"
)

func demoCmd(e *env) *cobra.Command {
	var keep string
	var web bool
	c := &cobra.Command{
		Use:   "demo [--keep DIR]",
		Short: "Run the tern story on this machine, with nothing installed",
		Long: "Runs the tern story on this machine, with no network or key, in under a minute: a\n" +
			"capsule is written, rendered for three providers, snapshotted, packed and merged; then a\n" +
			"laptop and a desktop (two real nodes on 127.0.0.1, in two homes) are paired; an agent on\n" +
			"the built-in model runs a turn that pauses for approval and is approved; a stream is cut\n" +
			"and resumed; the desktop receives every event and blob by gossip; the agent migrates to\n" +
			"the desktop (the frozen window is printed) and goes on there, rendered for another\n" +
			"provider; the laptop, restored from an old copy of its home, tries to run the agent and is\n" +
			"refused; notes written on both machines while apart both survive; and a tampered export\n" +
			"is caught by verify. Each step prints what happened and why it matters; a table sums up.\n" +
			"It writes only under a fresh temporary folder ($TMPDIR) and removes it at the end;\n" +
			"--keep DIR writes there instead and leaves it, for tar and jq. --web keeps the two nodes\n" +
			"running after the story and prints their web pages' addresses, each with a one-time\n" +
			"login code, until interrupted.",
		Example: "  tern demo\n  tern demo --keep ./demo && ls ./demo\n  tern demo --web",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := keep
			if dir == "" {
				var err error
				if dir, err = os.MkdirTemp("", "tern-demo-"); err != nil {
					return err
				}
				defer os.RemoveAll(dir)
			} else if err := emptyFolder(dir); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDemo(ctx, e, dir, keep != "", web)
		},
	}
	c.Flags().StringVar(&keep, "keep", "", "write the demo's homes and files to DIR (new or empty) and leave them there")
	c.Flags().BoolVar(&web, "web", false, "keep the nodes running after the story and print their web pages' addresses")
	return c
}

// emptyFolder makes dir if need be and refuses one that holds anything.
func emptyFolder(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return fmt.Errorf("--keep %s: %w", dir, err)
	case len(entries) > 0:
		return &exitError{exitBadInput, fmt.Errorf("--keep %s: the folder is not empty: give a new or empty one", dir)}
	}
	return nil
}

// demoRun is one run of the demo: where it writes, and what each step
// found, for the table at the end.
type demoRun struct {
	e     *env
	dir   string
	web   bool // keep the nodes running at the end, for their web pages
	steps []demoStep
	// laptop and desktop are the two machines' keys: the offline steps
	// sign with them, and the live nodes run with them.
	laptop, desktop *node.Identity
}

type demoStep struct {
	name, result string
	started      time.Time
	took         time.Duration
}

// title starts a step: its name in the table, and what it shows.
func (d *demoRun) title(name, s string) {
	d.finish()
	d.steps = append(d.steps, demoStep{name: name, started: time.Now()})
	fmt.Fprintf(d.e.stdout, "\n%d. %s\n", len(d.steps), s)
}

// say prints a line of the current step.
func (d *demoRun) say(format string, args ...any) {
	fmt.Fprintf(d.e.stdout, "   "+format+"\n", args...)
}

// why says why the current step matters.
func (d *demoRun) why(s string) { fmt.Fprintf(d.e.stdout, "   why it matters: %s\n", s) }

// result records the current step's result for the table.
func (d *demoRun) result(s string) { d.steps[len(d.steps)-1].result = s }

func (d *demoRun) finish() {
	if n := len(d.steps); n > 0 && d.steps[n-1].took == 0 {
		d.steps[n-1].took = time.Since(d.steps[n-1].started)
	}
}

// table prints what each step found.
func (d *demoRun) table() {
	d.finish()
	w := d.e.stdout
	fmt.Fprintf(w, "\n%-3s %-14s %-36s %s\n", "#", "step", "result", "time")
	for i, s := range d.steps {
		fmt.Fprintf(w, "%-3d %-14s %-36s %s\n", i+1, s.name, s.result, s.took.Round(time.Millisecond))
	}
}

func (d *demoRun) path(name string) string { return filepath.Join(d.dir, name) }

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

func runDemo(ctx context.Context, e *env, dir string, kept, web bool) error {
	run := &demoRun{e: e, dir: dir, web: web}
	say, title, why, result, path := run.say, run.title, run.why, run.result, run.path

	laptop, err := node.NewIdentity()
	if err != nil {
		return err
	}
	desktop, err := node.NewIdentity()
	if err != nil {
		return err
	}
	run.laptop, run.desktop = laptop, desktop
	fmt.Fprintln(e.stdout, "tern demo: an agent's state as plain files, on two machines of yours, with no network or key")
	if kept {
		fmt.Fprintf(e.stdout, "writing under %s, which stays\n", dir)
	} else {
		fmt.Fprintf(e.stdout, "writing under %s, removed at the end (--keep DIR to look at it)\n", dir)
	}
	fmt.Fprintf(e.stdout, "laptop  = %s\ndesktop = %s\n(the offline steps 1-9 sign as these; from step 10 they are the keys of two live nodes)\n", laptop.Machine(), desktop.Machine())

	title("capsule", "The laptop creates a capsule and makes the desktop a member")
	c, err := capsule.New(path("agent"), "research-assistant", laptop)
	if err != nil {
		return err
	}
	c.Close()
	d, err := e.openDir(ctx, path("agent"))
	if err != nil {
		return err
	}
	if _, err := d.AddMember(ctx, laptop, desktop.Machine()); err != nil {
		return err
	}
	say("agent id %s, folder %s", c.ID(), path("agent"))
	say("members: the laptop (it created the agent) and the desktop (added by the laptop, a signed member.added event)")
	why("the agent is a folder of plain files you own, and only its members' machines write its history")
	result("agent " + c.ID()[:8])

	title("journal", "It appends a conversation: a question, a tool call, its result and an answer")
	evs, err := d.Append(ctx, laptop, 0,
		demoDraft("message", "s1", "t1", text("user", "How big is the notes folder?")),
		demoDraft("tool_call", "s1", "t1", map[string]any{"call_id": "call_1", "name": "du", "arguments": map[string]string{"path": "notes"}}),
		demoDraft("tool_result", "s1", "t1", map[string]any{"call_id": "call_1", "content": []map[string]string{{"type": "text", "text": "12 KiB"}}, "is_error": false}),
		demoDraft("message", "s1", "t1", text("assistant", "The notes folder holds 12 KiB.")),
	)
	if err != nil {
		return err
	}
	say("%d events, each signed by the laptop and chained to the one before", len(evs))
	why("a cut, an edit or a forged event shows, offline")
	result(fmt.Sprintf("%d signed events", len(evs)))

	title("render", "The same conversation renders for any provider: switch models mid-thread")
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
		say("%-16s request body of %d bytes, about %d tokens", t.Provider, len(res.Body), res.Tokens)
	}
	why("the journal is neutral: switch providers mid-thread, each one's format is derived")
	result("3 providers")

	title("offline model", "The built-in offline model takes a step: no network, no key, the same every run")
	ask, err := d.Append(ctx, laptop, 0, demoDraft("message", "s1", "t2",
		text("user", "!reason Two folders to measure.\n!call du {\"path\": \"notes\"}\n!call du {\"path\": \"drafts\"}")))
	if err != nil {
		return err
	}
	model := provider.Settings{Provider: string(providerid.Offline), Model: providerid.OfflineModel}
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
	say("%d deltas streamed; the step appended whole: %s (stop: %s)", deltas, strings.Join(kinds, ", "), res.Stop)
	why("a hosted model is the same call (agent.json names provider, model and key_secret); this one needs no key")
	result(strings.Join(kinds[:len(kinds)-1], ", "))

	title("snapshot", "It snapshots a workspace into content-addressed blobs")
	ws := path("workspace")
	if err := writeDemoWorkspace(ws); err != nil {
		return err
	}
	body, err := d.Snapshot(ctx, laptop, ws)
	d.Close()
	if err != nil {
		return err
	}
	say("%d files, %d bytes, snapshot %s", body.Files, body.Bytes, body.Snapshot)
	why("the workspace travels with the agent, each file stored once by its hash")
	result(fmt.Sprintf("%d files", body.Files))

	title("pack", "It packs a signed, reproducible tar and verifies it")
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
	say("verify: ok, %d files, %d events, signed by %s", rep.Files, rep.Events, rep.Signer)
	why("a copy you can mail or back up: the same bytes every time, checked before it is trusted")
	result("verify: ok")

	title("tamper", "Someone flips one byte of a workspace file inside a copy of the tar")
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
		say("verify caught it: %s", p)
	}
	why("damage or tampering is found offline, file by file, before anything is used")
	result("caught")

	title("apart", "The laptop and the desktop each unpack the tar and, apart, each writes a note")
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
		{"on-laptop", laptop, "Maya prefers tabs to spaces."},
		{"on-desktop", desktop, "The reply to Ana is due Friday."},
	} {
		d, err := e.openDir(ctx, path(side.dir))
		if err != nil {
			return err
		}
		note, _, err := memory.AddDraft(side.text, []string{"demo"})
		if err == nil {
			_, err = d.Append(ctx, side.who, 0, note)
		}
		d.Close()
		if err != nil {
			return err
		}
		say("%s notes: %q", side.dir, side.text)
	}
	why("work goes on without a network: nothing waits for the other machine")
	result("a note on each")

	title("merge", "They merge, in either order, into the same bytes")
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
		say("merge %s + %s: %d events, %d forks", pair[0], pair[1], res.Events, len(res.Forks))
	}
	if !bytes.Equal(packs[0], packs[1]) {
		return fmt.Errorf("demo: the two merge orders gave different tars")
	}
	say("both merged tars are byte-identical (%d bytes)", len(packs[0]))
	if rep, err = capsule.Verify(path("merged-0.tar"), capsule.VerifyOptions{}); err != nil || !rep.OK() {
		return fmt.Errorf("demo: merged tar does not verify: %v %v", err, rep)
	}
	notes, err := notesOf(path("merged-0.tar"))
	if err != nil {
		return err
	}
	say("verify: ok, %d events; the notes written apart both survive: %s", rep.Events, strings.Join(notes, " + "))
	why("copies that met merge as a set union: nothing lost, nothing silently chosen")
	result(fmt.Sprintf("identical; %d notes kept", len(notes)))

	if err := demoLiveSync(ctx, run, path("merged-0.tar")); err != nil {
		return err
	}
	if !run.web {
		run.table()
		if kept {
			fmt.Fprintf(e.stdout, "\nKept in %s: agent/ and on-*/ are the offline capsules (jq . agent/manifest.json;\n"+
				"tern journal log agent); laptop-home/ and desktop-home/ are the nodes' homes, their capsules\n"+
				"under capsules/<agent id>/ (tern journal log desktop-home/capsules/<id>); *.tar are packed copies.\n", dir)
		}
		fmt.Fprintln(e.stdout, "\nDone. Next: tern demo --web, the README's tour on two terminals; tern node --help")
	}
	return nil
}

// serveWeb prints the table and the nodes' web pages, and keeps them
// running until ctx ends (Ctrl-C).
func (d *demoRun) serveWeb(ctx context.Context, nodes map[string]*node.Node) {
	d.table()
	fmt.Fprintln(d.e.stdout, "\nThe nodes keep running; open their pages (each address works once, for five minutes):")
	for _, name := range []string{"desktop", "laptop"} {
		fmt.Fprintf(d.e.stdout, "  %-8s %s\n", name, nodes[name].LoginURL().URL)
	}
	fmt.Fprintf(d.e.stdout, "New codes: TERN_HOME=%s tern ui (or laptop-home-backup for the laptop). Ctrl-C stops them.\n", d.path("desktop-home"))
	<-ctx.Done()
	fmt.Fprintln(d.e.stdout, "Stopping the nodes.")
}

// notesOf returns the texts of the notes a capsule holds, sorted.
func notesOf(path string) ([]string, error) {
	c, err := capsule.Open(path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	evs, err := c.Journal()
	if err != nil {
		return nil, err
	}
	view, _ := journal.Readable(evs)
	var out []string
	for _, n := range memory.Fold(view) {
		if !n.Removed() {
			out = append(out, fmt.Sprintf("%q", n.Heads[0].Text))
		}
	}
	slices.Sort(out)
	return out, nil
}

// demoLiveSync runs two real nodes on 127.0.0.1, pairs them, gives both the
// capsule and shows an append on one reaching the other.
func demoLiveSync(ctx context.Context, run *demoRun, tarPath string) error {
	say, title, why, result := run.say, run.title, run.why, run.result
	title("pair and sync", "A laptop and a desktop node on this machine, paired, keep the capsule in sync live")
	var nodes [2]*node.Node
	for i, name := range []string{"laptop-home", "desktop-home"} {
		if err := node.SaveIdentity(run.path(name), []*node.Identity{run.laptop, run.desktop}[i]); err != nil {
			return err
		}
		n, err := startDemoNode(run.path(name))
		if err != nil {
			return err
		}
		nodes[i] = n
	}
	laptop, desktop := nodes[0], nodes[1]
	defer func() { laptop.Close(); desktop.Close() }() // laptop is replaced below
	for _, pair := range [][2]*node.Node{{laptop, desktop}, {desktop, laptop}} {
		info := pair[1].Info()
		if err := pair[0].Pair(node.Peer{ID: info.PeerID, Addrs: hostOnly(info.Addrs)}); err != nil {
			return err
		}
	}
	say("laptop node %s and desktop node %s, each allowing only the other", short(laptop.Info().PeerID), short(desktop.Info().PeerID))
	agent, _, err := laptop.Import(tarPath)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := waitFor(20*time.Second, func() bool { return desktop.Store().Holds(agent) }); err != nil {
		return fmt.Errorf("demo: the desktop node did not take the capsule")
	}
	say("the capsule, imported on the laptop node only, reached the desktop node in %s, verified", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	evs, err := laptop.Append(ctx, agent, []journal.Draft{demoDraft("message", "s3", "t1", text("user", "Written on the laptop, read on the desktop."))})
	if err != nil {
		return err
	}
	if err := waitFor(20*time.Second, func() bool {
		held, err := desktop.Store().Events(agent, "")
		return err == nil && hasEvent(held, evs[0].ID)
	}); err != nil {
		return fmt.Errorf("demo: the desktop node did not receive the event")
	}
	took := time.Since(start).Round(100 * time.Microsecond)
	say("an event appended on the laptop node reached the desktop node by gossip in %s, signature checked", took)
	why("only machines you paired can connect; events travel by gossip, blobs by their hash, nothing through a cloud")
	result(fmt.Sprintf("paired; gossip in %s", took))
	return demoTurns(ctx, run, laptop, desktop, &laptop)
}

// startDemoNode starts a node of the demo on 127.0.0.1.
func startDemoNode(home string) (*node.Node, error) {
	return node.Start(home, node.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, SyncInterval: 200 * time.Millisecond}, nil)
}

// waitFor polls ok every 20 ms until it holds or limit passes.
func waitFor(limit time.Duration, ok func() bool) error {
	for start := time.Now(); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > limit {
			return errors.New("timed out")
		}
	}
	return nil
}

// demoTurns runs an agent on the laptop node through its HTTP API: a turn
// that pauses for approval and is continued, a stream cut and resumed,
// every event and blob on the desktop by gossip, a move to the desktop
// node, where the conversation goes on, and the laptop restored from an
// old copy of its home, refused. *current is the laptop node running now.
func demoTurns(ctx context.Context, run *demoRun, laptop, desktop *node.Node, current **node.Node) error {
	say, title, why, result := run.say, run.title, run.why, run.result
	title("approval", "The laptop node runs an agent: a turn calls a tool that needs approval, and pauses")
	a := capsule.DefaultAgent("planner")
	a.Tools = tool.Defaults()
	c, err := capsule.NewWithAgent(run.path("live-agent"), a, laptop.Identity())
	if err != nil {
		return err
	}
	c.Close()
	agent, _, err := laptop.Import(run.path("live-agent"))
	if err != nil {
		return err
	}
	lc, err := api.Dial(run.path("laptop-home"))
	if err != nil {
		return err
	}
	var sess struct{ ID string }
	if err := waitFor(20*time.Second, func() bool { // until the laptop node runs it
		return lc.Do(ctx, "POST", "/v1/agents/"+agent+"/sessions", nil, &sess) == nil
	}); err != nil {
		return fmt.Errorf("demo: the laptop node does not run the agent")
	}
	turn := func(cl *api.Client, req string, after int, each func(api.TurnItem) error) (api.TurnInfo, error) {
		var t api.TurnInfo
		if err := cl.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/turns", strings.NewReader(req), &t); err != nil {
			return t, err
		}
		if each == nil {
			each = func(api.TurnItem) error { return nil }
		}
		if _, err := cl.FollowTurn(ctx, sess.ID, t.ID, after, each); err != nil {
			return t, err
		}
		err := cl.Do(ctx, "GET", "/v1/sessions/"+sess.ID+"/turns/"+t.ID, nil, &t)
		return t, err
	}
	t, err := turn(lc, `{"text":"!reason The plan goes in a file.\n!call write_file {\"path\": \"plan.md\", \"content\": \"1. sync 2. move 3. continue\"}"}`, 0, nil)
	if err != nil {
		return err
	}
	if t.Status != "paused" || len(t.RequiredActions) != 1 {
		return fmt.Errorf("demo: the turn did not pause for approval: %+v", t)
	}
	act := t.RequiredActions[0]
	say("a second agent, planner (agent id %s), made on the laptop node with the built-in tools; the first one (steps 1-10) has none", agent)
	say("the model called %s %s; write_file needs approval, so the turn paused: %s", act.Tool, act.Arguments, act.ID)
	why("nothing with an effect runs before a person says yes")
	result("paused for approval")

	title("approve", "The demo approves; the continuing turn runs the call once and finishes")
	var reply string
	replyOf := func(it api.TurnItem) error {
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
	say("approved: the next turn ran it between an operation.intent and its outcome, then %s: %q", t.Status, reply)
	why("a side effect runs once; a crash between its two records is reconciled, never retried blind")
	result("ran once, completed")

	title("stream", "A stream cut in the middle of a turn resumes where it stopped, nothing twice")
	var t2 api.TurnInfo
	if err := lc.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/turns", strings.NewReader(`{"text":"!reason Check the plan first.\n!call read_file {\"path\": \"plan.md\"}"}`), &t2); err != nil {
		return err
	}
	var seqs []int
	cut := errors.New("cut")
	_, err = lc.FollowTurn(ctx, sess.ID, t2.ID, 0, func(it api.TurnItem) error {
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
	if _, err := lc.FollowTurn(ctx, sess.ID, t2.ID, seqs[len(seqs)-1], func(it api.TurnItem) error {
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
	say("events 1-%d, cut, then %d-%d after reconnecting from event %d (Last-Event-ID): each once, the turn never restarted", first, first+1, len(seqs), first)
	why("a client that loses its connection misses nothing and sees nothing twice")
	result(fmt.Sprintf("%d events, each once", len(seqs)))

	title("gossip", "The desktop node receives every event and blob of the agent by gossip")
	var events, blobs int
	if err := waitFor(20*time.Second, func() bool {
		held, err := desktop.Store().Events(agent, "")
		local, err2 := laptop.Store().Events(agent, "")
		wanted, err3 := desktop.Store().Wanted(agent)
		hb, err4 := desktop.Store().Blobs(agent)
		events, blobs = len(held), len(hb)
		return err == nil && err2 == nil && err3 == nil && err4 == nil && len(held) == len(local) && len(wanted) == 0
	}); err != nil {
		return fmt.Errorf("demo: the desktop node did not take the running agent whole")
	}
	say("the desktop holds all %d events and all %d blobs (the workspace's files and snapshots), each verified", events, blobs)
	why("the other machine is ready to take over at any moment, with nothing to copy at the last minute")
	result(fmt.Sprintf("%d events, %d blobs", events, blobs))

	// An old copy of the laptop's home, as a backup would have it: taken
	// with its node stopped, before the move.
	laptop.Close()
	if err := node.CopyHome(run.path("laptop-home"), run.path("laptop-home-backup")); err != nil {
		return err
	}
	if laptop, err = startDemoNode(run.path("laptop-home")); err != nil {
		return err
	}
	*current = laptop
	if lc, err = api.Dial(run.path("laptop-home")); err != nil {
		return err
	}
	if err := waitFor(20*time.Second, func() bool { // it runs the agent once its peer answered
		var s struct{ ID string }
		return lc.Do(ctx, "POST", "/v1/agents/"+agent+"/sessions", nil, &s) == nil
	}); err != nil {
		return fmt.Errorf("demo: the restarted laptop node does not run the agent again")
	}

	title("migrate", "The agent migrates to the desktop node")
	held, err := laptop.HolderState(agent) // the epoch the backup holds it at too
	if err != nil {
		return err
	}
	out, err := laptop.Migrate(ctx, agent, desktop.Host().ID())
	if err != nil || out.Outcome != "committed" {
		return fmt.Errorf("demo: the migration: %+v %v", out, err)
	}
	var refused *api.APIError
	if err := lc.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/turns", strings.NewReader(`{"text":"still here?"}`), nil); !errors.As(err, &refused) || refused.Status != 409 {
		return fmt.Errorf("demo: the laptop node took a turn after the move: %v", err)
	}
	say("committed at epoch %d; the agent was frozen for %d ms; the laptop node refuses to run it now (409: %s)", out.Epoch, out.FrozenMS, oneLine(refused.Message, 60))
	why("at most one machine ever runs the agent, and moving it costs a frozen window of milliseconds")
	result(fmt.Sprintf("epoch %d, frozen %d ms", out.Epoch, out.FrozenMS))

	title("continue", "The conversation continues on the desktop, and renders for another provider")
	dc, err := api.Dial(run.path("desktop-home"))
	if err != nil {
		return err
	}
	t, err = turn(dc, `{"text":"!call read_file {\"path\": \"plan.md\"}"}`, 0, replyOf)
	if err != nil || t.Status != "completed" {
		return fmt.Errorf("demo: the turn on the desktop: %+v %v", t, err)
	}
	say("same session, next turn, on the desktop with the workspace it brought: %q", reply)
	evs, err := desktop.Store().Events(agent, "")
	if err != nil {
		return err
	}
	view, _ := journal.Readable(evs)
	journal.Sort(view)
	var conversation []*journal.Event
	for _, e := range view {
		if e.Session == sess.ID {
			conversation = append(conversation, e)
		}
	}
	res, err := render.Render(render.Request{Events: conversation, Agent: a,
		Target: render.Target{Provider: render.Anthropic, Model: "claude-sonnet-4-5"}})
	if err != nil {
		return err
	}
	reasoning := 0
	for _, e := range conversation {
		if e.Type == "reasoning" {
			reasoning++
		}
	}
	if reasoning == 0 || bytes.Contains(res.Body, []byte(`"type":"thinking"`)) {
		return fmt.Errorf("demo: the render for Anthropic kept the offline model's reasoning (%d reasoning events)", reasoning)
	}
	say("for Anthropic: a request body of %d bytes, with every message, call and result; the offline model's %d reasoning events are left out (reasoning goes back only to the model that wrote it)", len(res.Body), reasoning)
	why("the conversation belongs to the journal, not to a provider: another model can take it over")
	result("went on; reasoning left out")

	title("fencing", "The laptop, restored from an old copy of its home, tries to run the agent")
	laptop.Close()
	old, err := startDemoNode(run.path("laptop-home-backup"))
	if err != nil {
		return err
	}
	*current = old
	oc, err := api.Dial(run.path("laptop-home-backup"))
	if err != nil {
		return err
	}
	var why409 string
	if err := waitFor(20*time.Second, func() bool {
		err := oc.Do(ctx, "POST", "/v1/sessions/"+sess.ID+"/turns", strings.NewReader(`{"text":"I am the laptop, back from a backup"}`), nil)
		var refused *api.APIError
		if errors.As(err, &refused) && refused.Status == 409 {
			why409 = refused.Message
			return true
		}
		return false // 503 while it checks with its peers, then 409
	}); err != nil {
		return fmt.Errorf("demo: the restored laptop was not refused")
	}
	say("its backup says it holds the agent at epoch %d; its peer knows epoch %d: refused (409: %s)", held.Epoch, out.Epoch, oneLine(why409, 60))
	why("a machine restored from a backup, or woken after weeks, can never run the agent a second time")
	result("refused")
	if run.web {
		run.serveWeb(ctx, map[string]*node.Node{"laptop": old, "desktop": desktop})
	}
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
