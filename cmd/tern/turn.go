package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/internal/providerid"
	"github.com/tern-dev/tern/session"
)

// The session commands talk to the node that runs the agent
// (docs/SESSIONS.md, docs/API.md "Sessions and turns").

func sessionCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "session", Short: "Start and list an agent's conversations (sessions)", Args: groupArgs, RunE: showHelp}
	c.AddCommand(&cobra.Command{
		Use:     "new AGENT",
		Example: "  S=$(tern session new $AGENT)",
		Short:   "Start a session with an agent the node runs; prints its id",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := newSession(cmd.Context(), e, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, id)
			return nil
		},
	})
	var asJSON bool
	list := &cobra.Command{
		Use:   "list AGENT [--json]",
		Short: "List the agent's sessions with their last turn",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkAgentArg(args[0]); err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			var out []struct {
				ID       string `json:"id"`
				Turns    int    `json:"turns"`
				LastTurn string `json:"last_turn"`
				Status   string `json:"status"`
			}
			if err := cl.Do(cmd.Context(), http.MethodGet, "/v1/agents/"+args[0]+"/sessions", nil, &out); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(out)
			}
			for _, s := range out {
				fmt.Fprintf(e.stdout, "%s  %s  %s (%s)\n", s.ID, plural(s.Turns, "turn"), s.LastTurn, s.Status)
			}
			return nil
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print one JSON list")
	c.AddCommand(list)
	return c
}

// checkAgentArg refuses what is not an agent id, with exit 2.
func checkAgentArg(s string) error {
	if !capsule.ValidAgentID(s) {
		return fmt.Errorf("%q is not an agent id, a prefix of one (%d characters at least) or an agent's name (tern capsule list shows the agents the node holds)", s, minAgentPrefix)
	}
	return nil
}

func newSession(ctx context.Context, e *env, agent string) (string, error) {
	if err := checkAgentArg(agent); err != nil {
		return "", err
	}
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	var s struct {
		ID string `json:"id"`
	}
	err = cl.Do(ctx, http.MethodPost, "/v1/agents/"+agent+"/sessions", nil, &s)
	return s.ID, err
}

func turnCmd(e *env) *cobra.Command {
	var sessionID, providerName, model string
	var cancelActive, asJSON bool
	c := &cobra.Command{
		Use:     "turn AGENT MESSAGE [--session S] [--provider P --model M] [--json]",
		Example: "  tern turn $AGENT \"hello\"\n  tern turn $AGENT \"and now?\" --session ses_…\n  tern turn $AGENT \"try Claude\" --session ses_… --provider anthropic --model claude-sonnet-4-5",
		Short:   "Send the agent a message and stream its answer",
		Long: "Starts a turn: sends MESSAGE in session S (a new session without --session, its id on\n" +
			"stderr), streams the model's answer to stdout and its tool calls to stderr, and resumes\n" +
			"the stream by itself if it breaks. A turn that pauses lists the actions it waits for\n" +
			"(tern approve, tern deny, tern respond answer them). --provider and --model switch the\n" +
			"model for this turn only. --json prints the finished turn as JSON instead.\n" +
			"Exit 0 when the turn completes or pauses, 1 when it fails or is cancelled, 3 when the\n" +
			"model API could not be reached. Ctrl-C stops following, not the turn (exit 130): tern\n" +
			"turn follow TURN follows it again, tern turn cancel TURN cancels it.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			agent, text := args[0], args[1]
			if err := checkAgentArg(agent); err != nil {
				return err
			}
			if strings.TrimSpace(text) == "" {
				return errors.New("turn: the message is empty")
			}
			if (providerName == "") != (model == "") {
				return errors.New("turn: give --provider and --model together")
			}
			if providerName != "" && !providerid.ID(providerName).Known() {
				return fmt.Errorf("turn: --provider %q is not one of %s", providerName, strings.Join(providerid.Names(providerid.All()), ", "))
			}
			ctx := cmd.Context()
			if sessionID != "" {
				if err := e.checkSessionOf(ctx, agent, sessionID); err != nil {
					return err
				}
			}
			if sessionID == "" {
				id, err := newSession(ctx, e, agent)
				if err != nil {
					return err
				}
				sessionID = id
				fmt.Fprintf(e.stderr, "session %s\n", sessionID)
			}
			req := map[string]any{"text": text}
			if cancelActive {
				req["cancel_active"] = true
			}
			if providerName != "" {
				req["model"] = map[string]string{"provider": providerName, "name": model}
			}
			return e.runTurn(ctx, sessionID, req, asJSON)
		},
	}
	c.Flags().StringVar(&sessionID, "session", "", "continue this session (default: a new one)")
	c.Flags().StringVar(&providerName, "provider", "", "the provider for this turn only")
	c.Flags().StringVar(&model, "model", "", "the model for this turn only")
	c.Flags().BoolVar(&cancelActive, "cancel-active", false, "cancel the session's running turn instead of being refused")
	c.Flags().BoolVar(&asJSON, "json", false, "print the finished turn as JSON")
	c.AddCommand(turnFollowCmd(e), turnCancelCmd(e))
	return c
}

// turnByID asks the node for a turn by its id alone.
func (e *env) turnByID(ctx context.Context, turnID string) (*api.Client, api.TurnInfo, error) {
	cl, err := e.client()
	if err != nil {
		return nil, api.TurnInfo{}, err
	}
	var t api.TurnInfo
	err = cl.Do(ctx, http.MethodGet, "/v1/turns/"+url.PathEscape(turnID), nil, &t)
	return cl, t, err
}

func turnFollowCmd(e *env) *cobra.Command {
	var after int
	var asJSON bool
	c := &cobra.Command{
		Use:     "follow TURN [--after N] [--json]",
		Example: "  tern turn follow turn_…\n  tern turn follow turn_… --after 12",
		Short:   "Stream a turn from its start (or after its event N) until it ends",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if after < 0 {
				return fmt.Errorf("turn follow: --after %d: give an event's sequence number, 0 or more", after)
			}
			cl, t, err := e.turnByID(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if t.Status != session.Running && after >= t.Events {
				after = t.Events - 1 // past its end: its end only, to report it
			}
			return e.followTurn(cmd.Context(), cl, t.Session, t.ID, after, asJSON)
		},
	}
	c.Flags().IntVar(&after, "after", 0, "start after the turn's event with this sequence number")
	c.Flags().BoolVar(&asJSON, "json", false, "print the finished turn as JSON")
	return c
}

func turnCancelCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "cancel TURN",
		Example: "  tern turn cancel turn_…",
		Short:   "Cancel a running or paused turn (a turn that ended already stays as it ended)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, t, err := e.turnByID(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var after api.TurnInfo
			path := "/v1/sessions/" + url.PathEscape(t.Session) + "/turns/" + url.PathEscape(t.ID) + "/cancel"
			if err := cl.Do(cmd.Context(), http.MethodPost, path, nil, &after); err != nil {
				return err
			}
			if after.Status == session.Cancelled {
				e.done("cancelled turn %s", after.ID)
			} else {
				e.done("turn %s had ended already: %s", after.ID, after.Status)
			}
			return nil
		},
	}
}

// checkSessionOf refuses a session that is not the agent's.
func (e *env) checkSessionOf(ctx context.Context, agent, sessionID string) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	var sessions []struct {
		ID string `json:"id"`
	}
	if err := cl.Do(ctx, http.MethodGet, "/v1/agents/"+agent+"/sessions", nil, &sessions); err != nil {
		return err
	}
	for _, s := range sessions {
		if s.ID == sessionID {
			return nil
		}
	}
	return fmt.Errorf("turn: %s is not a session of agent %s (tern session list %s shows its sessions)", sessionID, agent, agent)
}

// runTurn starts a turn in the session with req, follows it to its end
// and reports it.
func (e *env) runTurn(ctx context.Context, sessionID string, req map[string]any, asJSON bool) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	body, _ := json.Marshal(req)
	var started struct {
		ID string `json:"id"`
	}
	if err := cl.Do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(sessionID)+"/turns", strings.NewReader(string(body)), &started); err != nil {
		return err
	}
	return e.followTurn(ctx, cl, sessionID, started.ID, 0, asJSON)
}

// followTurn streams a turn from after its event after to its end, and
// reports it. Ctrl-C stops following, not the turn: it says how to follow
// or cancel it, and exits 130.
func (e *env) followTurn(parent context.Context, cl *api.Client, sessionID, turnID string, after int, asJSON bool) error {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt)
	defer stop()
	started := struct{ ID string }{turnID}
	out := e.stdout
	if asJSON {
		out = io.Discard
	}
	p := &turnPrinter{out: out, log: e.stderr}
	if asJSON {
		p.log = io.Discard
	}
	moved, err := cl.FollowTurn(ctx, sessionID, started.ID, after, p.item)
	if err != nil && ctx.Err() != nil && parent.Err() == nil { // Ctrl-C
		p.endLine()
		return &exitError{code: exitInterrupted, err: fmt.Errorf("stopped following; turn %s goes on in the node: tern turn follow %s follows it again, tern turn cancel %s cancels it", started.ID, started.ID, started.ID)}
	}
	if err != nil {
		return &exitError{exitFailed, err}
	}
	p.endLine()
	if moved != "" {
		fmt.Fprintf(e.stderr, "the agent moved to %s; turn %s continues there (follow it on that machine)\n", moved, started.ID)
		return nil
	}
	var t api.TurnInfo
	if err := cl.Do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(sessionID)+"/turns/"+started.ID, nil, &t); err != nil {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(e.stdout).Encode(t); err != nil {
			return err
		}
	}
	switch t.Status {
	case session.Paused:
		if !asJSON {
			fmt.Fprintf(e.stderr, "turn %s paused: it waits for %s\n", t.ID, plural(len(t.RequiredActions), "action"))
			printActions(e.stderr, t.RequiredActions)
			fmt.Fprintln(e.stderr, "answer them all at once: tern approve ID… [--deny ID…], tern deny ID… [--approve ID…], tern respond ID --output JSON [--approve ID…] [--deny ID…]")
		}
	case session.Failed:
		if t.Retryable { // the model API could not be reached: trying again may work
			return &exitError{code: exitFailed, err: fmt.Errorf("turn %s failed: %s", t.ID, t.Error)}
		}
		return checkFailed("turn %s failed: %s", t.ID, t.Error)
	case session.Cancelled:
		return checkFailed("turn %s was cancelled", t.ID)
	}
	return nil
}

// turnPrinter shows a turn's stream to a person: the answer as it
// streams on out, tool calls and their results on log.
type turnPrinter struct {
	out, log io.Writer
	streamed bool // text deltas of the current step were printed
	midLine  bool // out is in the middle of a line
}

func (p *turnPrinter) endLine() {
	if p.midLine {
		fmt.Fprintln(p.out)
		p.midLine = false
	}
}

func (p *turnPrinter) item(it api.TurnItem) error {
	if it.Event == "delta" {
		var d struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		}
		json.Unmarshal(it.Data, &d)
		if d.Kind == "text" && d.Text != "" {
			fmt.Fprint(p.out, d.Text)
			p.streamed, p.midLine = true, !strings.HasSuffix(d.Text, "\n")
		}
		return nil
	}
	var ev struct {
		Body json.RawMessage `json:"body"`
	}
	json.Unmarshal(it.Data, &ev)
	switch it.Event {
	case "message":
		var m struct {
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		json.Unmarshal(ev.Body, &m)
		if m.Role == "assistant" && !p.streamed {
			for _, c := range m.Content {
				fmt.Fprint(p.out, c.Text)
				p.midLine = !strings.HasSuffix(c.Text, "\n")
			}
		}
		p.endLine()
		p.streamed = false
	case "reasoning":
		var r struct {
			Text string `json:"text"`
		}
		json.Unmarshal(ev.Body, &r)
		if r.Text != "" {
			fmt.Fprintf(p.log, "(thinking) %s\n", oneLine(r.Text, 200))
		}
	case "tool_call":
		var c struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		json.Unmarshal(ev.Body, &c)
		p.endLine()
		fmt.Fprintf(p.log, "-> %s %s\n", c.Name, oneLine(string(c.Arguments), 200))
		p.streamed = false
	case "tool_result":
		var r struct {
			IsError bool `json:"is_error"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		json.Unmarshal(ev.Body, &r)
		var text strings.Builder
		for _, c := range r.Content {
			text.WriteString(c.Text)
		}
		what := "ok"
		if r.IsError {
			what = "error"
		}
		fmt.Fprintf(p.log, "<- %s: %s\n", what, oneLine(text.String(), 200))
	}
	return nil
}

// oneLine is s on one line, cut to at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func printActions(w io.Writer, actions []session.Action) {
	for _, a := range actions {
		fmt.Fprintf(w, "  %s  %s\n", a.ID, actionLine(a))
	}
}

// actionLine says what an action asks: the tool and its arguments, or
// where to authorize an MCP server.
func actionLine(a session.Action) string {
	if a.Kind == session.KindMCPAuth {
		scopes := ""
		if len(a.Scopes) > 0 {
			scopes = " (scopes: " + strings.Join(a.Scopes, " ") + ")"
		}
		return fmt.Sprintf("%s %s: open %s%s, then tern respond %s --authorization ADDRESS-YOU-CAME-BACK-TO", a.Kind, a.Server, a.URL, scopes, a.ID)
	}
	line := fmt.Sprintf("%s %s %s", a.Kind, a.Tool, oneLine(string(a.Arguments), 120))
	if a.Kind == session.KindReconcile {
		line += " (did it take effect? approve: yes; deny: no)"
	}
	return line
}

func actionsCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "actions [AGENT] [--json]",
		Example: "  tern actions\n  tern actions $AGENT --json | jq -r '.[].id'",
		Short:   "List the required actions turns wait for (approvals, outputs, reconciliations)",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			agent := ""
			if len(args) == 1 {
				if err := checkAgentArg(args[0]); err != nil {
					return err
				}
				agent = args[0]
			}
			pending, err := pendingActions(cmd.Context(), e, agent)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(pending)
			}
			if len(pending) == 0 {
				fmt.Fprintln(e.stderr, "no turn waits for an action")
			}
			for _, a := range pending {
				fmt.Fprintf(e.stdout, "%s  %s  (session %s)\n", a.ID, actionLine(a.Action), a.Session)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON list")
	return c
}

func pendingActions(ctx context.Context, e *env, agent string) ([]api.PendingAction, error) {
	cl, err := e.client()
	if err != nil {
		return nil, err
	}
	path := "/v1/actions"
	if agent != "" {
		path = "/v1/agents/" + agent + "/actions"
	}
	var out []api.PendingAction
	err = cl.Do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// answerCmd is tern approve and tern deny: approve (or deny) the actions
// named, and deny (or approve) those of the other flag, in one continuing
// turn per session.
func answerCmd(e *env, verb string, approve bool) *cobra.Command {
	other, otherVerb := "deny", "denies"
	if !approve {
		other, otherVerb = "approve", "approves"
	}
	var others []string
	var asJSON bool
	c := &cobra.Command{
		Use:   verb + " ACTION_ID... [--" + other + " ACTION_ID...]",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " required actions, continuing the turns that wait for them",
		Long: "Answers the pending actions named (tern actions lists them) in one continuing turn per\n" +
			"session, and follows that turn like tern turn. A paused turn is continued only by\n" +
			"answering all its actions at once: --" + other + " " + otherVerb + " the rest in the same turn.\n" +
			"An approval of a reconcile action says the uncertain effect happened; a denial, that\n" +
			"it did not.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			answers := answerSet{}
			if err := answers.approve(args, approve); err != nil {
				return fmt.Errorf("%s: %w", verb, err)
			}
			if err := answers.approve(others, !approve); err != nil {
				return fmt.Errorf("%s: %w", verb, err)
			}
			return e.answer(cmd.Context(), answers, asJSON)
		},
	}
	c.Flags().StringSliceVar(&others, other, nil, "actions to "+other+" in the same turn")
	c.Flags().BoolVar(&asJSON, "json", false, "print the continuing turn as JSON when it ends")
	return c
}

func respondCmd(e *env) *cobra.Command {
	var outputs, authorizations []string
	var approve, deny []string
	var asJSON bool
	c := &cobra.Command{
		Use: "respond ACTION_ID... (--output JSON... | --authorization VALUE...) [--approve ID...] [--deny ID...]",
		Example: "  tern respond act_client_output_… --output '{\"temp_c\": 18}'\n" +
			"  tern respond act_mcp_auth_… --authorization 'http://127.0.0.1:7777/v1/mcp/callback?code=…&state=…'",
		Short: "Give the output of client-side tool calls, or an MCP server's authorization, a turn waits for",
		Long: "Answers client_output actions with the tools' outputs (JSON, one --output per action, in\n" +
			"the same order), or mcp_auth actions with --authorization: the address your browser was\n" +
			"sent back to after you opened the action's URL (or its code=…&state=… part), an access\n" +
			"token the server's owner gave you, or \"done\" when the node's own callback page said the\n" +
			"server is authorized. The token goes to this node's keyring, never to the journal. The\n" +
			"continuing turn is followed like tern turn. Other actions of the same turn are answered\n" +
			"in the same request with --approve and --deny: a paused turn takes all its answers at\n" +
			"once. (tern deny declines any action: a client_output call gets an error result; an\n" +
			"mcp_auth, the turn goes on without that server's tools.)",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			answers := answerSet{}
			switch {
			case len(authorizations) > 0 && len(outputs) > 0:
				return fmt.Errorf("respond: give --output or --authorization, not both (answer the other actions in the next command)")
			case len(authorizations) > 0:
				if len(authorizations) != len(args) {
					return fmt.Errorf("respond: %d actions and %d --authorization values: give one per action, in order", len(args), len(authorizations))
				}
				for i, id := range args {
					if err := answers.add(id, "authorization", authorizations[i]); err != nil {
						return fmt.Errorf("respond: %w", err)
					}
				}
			case len(outputs) != len(args):
				return fmt.Errorf("respond: %d actions and %d --output values: give one --output per action, in order", len(args), len(outputs))
			}
			for i, id := range args[:len(outputs)] {
				if !json.Valid([]byte(outputs[i])) {
					return fmt.Errorf("respond: --output %q (for %s) is not JSON (a string is written with quotes: '\"done\"')", outputs[i], id)
				}
				if err := answers.add(id, "output", json.RawMessage(outputs[i])); err != nil {
					return fmt.Errorf("respond: %w", err)
				}
			}
			if err := answers.approve(approve, true); err != nil {
				return fmt.Errorf("respond: %w", err)
			}
			if err := answers.approve(deny, false); err != nil {
				return fmt.Errorf("respond: %w", err)
			}
			return e.answer(cmd.Context(), answers, asJSON)
		},
	}
	c.Flags().StringArrayVar(&outputs, "output", nil, "a tool's output, as JSON (once per action, in order)")
	c.Flags().StringArrayVar(&authorizations, "authorization", nil, "an MCP server's authorization: the address the browser came back to, a token, or done (once per action, in order)")
	c.Flags().StringSliceVar(&approve, "approve", nil, "actions to approve in the same turn")
	c.Flags().StringSliceVar(&deny, "deny", nil, "actions to deny in the same turn")
	c.Flags().BoolVar(&asJSON, "json", false, "print the continuing turn as JSON when it ends")
	return c
}

// answerSet is the answers one command gives, by action id: a response
// of POST /v1/sessions/{session}/turns each.
type answerSet map[string]map[string]any

// add answers action id with {field: value}; an action answered twice is
// refused, as the API refuses it.
func (a answerSet) add(id, field string, value any) error {
	if _, dup := a[id]; dup {
		return fmt.Errorf("action %s is answered twice", id)
	}
	a[id] = map[string]any{"action_id": id, field: value}
	return nil
}

// approve answers each of ids with approve: yes.
func (a answerSet) approve(ids []string, yes bool) error {
	for _, id := range ids {
		if err := a.add(id, "approve", yes); err != nil {
			return err
		}
	}
	return nil
}

// answer sends the answers, grouped by the session whose turn waits for
// them, each group as one continuing turn, and follows each.
func (e *env) answer(ctx context.Context, answers answerSet, asJSON bool) error {
	pending, err := pendingActions(ctx, e, "")
	if err != nil {
		return err
	}
	bySession := map[string][]any{}
	where := map[string]string{}
	for _, a := range pending {
		where[a.ID] = a.Session
	}
	ids := make([]string, 0, len(answers))
	for id := range answers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s, ok := where[id]
		if !ok {
			return fmt.Errorf("no turn waits for action %s (tern actions lists those that do)", id)
		}
		bySession[s] = append(bySession[s], answers[id])
	}
	sessions := make([]string, 0, len(bySession))
	for s := range bySession {
		sessions = append(sessions, s)
	}
	sort.Strings(sessions)
	for _, s := range sessions {
		if err := e.runTurn(ctx, s, map[string]any{"responses": bySession[s]}, asJSON); err != nil {
			return err
		}
	}
	return nil
}
