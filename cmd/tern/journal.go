package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

// maxDraftLine bounds one draft line of journal append.
const maxDraftLine = 64 << 20

func journalCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "journal",
		Short: "Append to and read a capsule's journal",
		Args:  groupArgs,
		RunE:  showHelp,
	}
	c.AddCommand(journalAppendCmd(e), journalLogCmd(e))
	return c
}

func journalAppendCmd(e *env) *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:     "append DIR|AGENT-ID [--file F|-]",
		Example: "  echo '{\"type\":\"message\",\"session\":\"s1\",\"body\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}' | tern journal append $AGENT",
		Short:   "Append draft events {type, session, turn, body}, one JSON object per line; prints each new event id",
		Long: "Reads draft events, one JSON object per line, from --file or standard input, and appends\n" +
			"them to the capsule's journal as events signed by this machine, all or nothing. Every\n" +
			"line is checked before anything is written; a type is a lower-case token,\n" +
			"[a-z][a-z0-9_.-]*, of at most 64 bytes (docs/FORMAT.md, Types), and a line with any other\n" +
			"type exits 2 naming it. Given an agent id instead of a folder (or the node's own folder\n" +
			"of it), it appends through the running node (which then syncs it); with no node running,\n" +
			"to this home's copy of the agent, as an offline edit the node takes up. Another command\n" +
			"writing the folder is waited for. A copy that lacks events this machine wrote in another\n" +
			"copy of the agent is refused, naming that copy: merge it first.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = e.stdin
			name := "standard input"
			if file != "" && file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				in, name = f, file
			}
			drafts, err := readDrafts(in, name)
			if err != nil {
				return err
			}
			if len(drafts) == 0 {
				return fmt.Errorf("journal append: %s holds no draft events", name)
			}
			target := args[0]
			if _, err := os.Stat(target); err != nil && capsule.ValidAgentID(target) {
				dir, offline := e.offlineCopy(target)
				if !offline {
					return e.appendThroughNode(cmd.Context(), target, drafts)
				}
				target = dir
			}
			w, err := e.openWriter(cmd.Context(), target, false)
			var held *heldByNode
			if errors.As(err, &held) {
				fmt.Fprintf(e.stderr, "note: %s is the running node's copy of agent %s; appending through the node\n", args[0], held.agent)
				return e.appendThroughNode(cmd.Context(), held.agent, drafts)
			}
			if err != nil {
				return err
			}
			evs, err := w.Append(cmd.Context(), w.id, 0, drafts...)
			for _, ev := range evs {
				fmt.Fprintln(e.stdout, ev.ID)
			}
			return errors.Join(err, w.Close())
		},
	}
	c.Flags().StringVar(&file, "file", "", "read drafts from this file (- or empty: standard input)")
	return c
}

// readDrafts parses one draft per non-blank line; the first bad line is an
// error naming it.
func readDrafts(r io.Reader, name string) ([]journal.Draft, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxDraftLine)
	var drafts []journal.Draft
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		d, err := journal.ParseDraft(line)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", name, n, err)
		}
		drafts = append(drafts, d)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: after %d drafts: %w", name, len(drafts), err)
	}
	return drafts, nil
}

func journalLogCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "log PATH [--json]",
		Example: "  tern journal log ./agent\n  tern journal log $AGENT --json | jq -c 'select(.type == \"message\")'",
		Short:   "Print the journal in its total order (--json: one event per line, as stored, quarantined ones marked)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := capsule.Open(capsulePath(args[0]))
			if err != nil {
				return err
			}
			defer c.Close()
			events, err := c.Journal()
			if err != nil {
				return err
			}
			journal.Sort(events)
			aside := journal.QuarantinedOf(c.ID(), events)
			w := bufio.NewWriter(e.stdout)
			defer w.Flush()
			for _, ev := range events {
				why := aside[ev.ID]
				if asJSON {
					w.Write(markedLine(ev, why))
					w.WriteByte('\n')
					continue
				}
				mark := ""
				switch why {
				case "":
				case journal.AsideHealed:
					mark = " SET ASIDE (healed)"
				case journal.AsideStaleEpoch:
					mark = " SET ASIDE (written under an ended epoch)"
				case journal.AsideRemoved:
					mark = " SET ASIDE (written after its machine's removal from the members)"
				case journal.AsideStranger:
					mark = " NOT READ (its machine is not a member of the agent)"
				case journal.AsideFork:
					mark = " QUARANTINED (fork)"
				default:
					mark = " QUARANTINED (broken chain)"
				}
				fmt.Fprintf(w, "%6d  %s#%d  %-14s %s/%s  %s%s\n", ev.Clock, shortPeer(ev.Machine), ev.Seq, ev.Type, ev.Session, ev.Turn, summary(ev), mark)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "one event per line, the stored canonical JSON; an event kept aside gains \"quarantined\": why")
	return c
}

// markedLine is an event's stored line, with "quarantined" added as its last
// field when the journal keeps it aside (why: removed, not_member, healed,
// stale_epoch, fork or broken_chain), so a script can select(.quarantined) or drop them. A line
// without the field is byte for byte the stored one; del(.quarantined) gives
// it back for a marked one.
func markedLine(ev *journal.Event, why string) []byte {
	line := ev.Line()
	if why == "" {
		return line
	}
	q, _ := json.Marshal(why)
	out := append([]byte(nil), line[:len(line)-1]...)
	out = append(out, `,"quarantined":`...)
	out = append(out, q...)
	return append(out, '}')
}

func shortPeer(p string) string {
	if len(p) > 8 {
		return "…" + p[len(p)-6:]
	}
	return p
}

// summary is a one-line human view of an event's body.
func summary(ev *journal.Event) string {
	var b struct {
		Role    string `json:"role"`
		Name    string `json:"name"`
		CallID  string `json:"call_id"`
		Text    string `json:"text"`
		IsError bool   `json:"is_error"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(ev.Body, &b) // unknown shapes fall through to the raw body
	var s string
	switch ev.Type {
	case "message":
		var parts []string
		for _, p := range b.Content {
			if p.Type == "text" {
				parts = append(parts, p.Text)
			} else {
				parts = append(parts, "["+p.Type+"]")
			}
		}
		s = b.Role + ": " + strings.Join(parts, " ")
	case "tool_call":
		s = b.Name + " (" + b.CallID + ")"
	case "tool_result":
		s = "result for " + b.CallID
		if b.IsError {
			s += " (error)"
		}
	case "reasoning":
		s = b.Text
	case journal.HealType:
		var h journal.HealBody
		_ = json.Unmarshal(ev.Body, &h)
		s = fmt.Sprintf("healed a fork: %s set aside, their content signed again", plural(len(h.Replaced), "event"))
	default:
		s = string(ev.Body)
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > 80 {
		s = string([]rune(s)[:79]) + "…"
	}
	return s
}

// appendThroughNode appends drafts to the running node's copy of agent.
func (e *env) appendThroughNode(ctx context.Context, agent string, drafts []journal.Draft) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	var body bytes.Buffer
	for _, d := range drafts {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		body.Write(append(b, '\n'))
	}
	var res struct {
		IDs []string `json:"ids"`
	}
	if err := cl.Do(ctx, http.MethodPost, "/v1/capsules/"+url.PathEscape(agent)+"/events", &body, &res); err != nil {
		return err
	}
	for _, id := range res.IDs {
		fmt.Fprintln(e.stdout, id)
	}
	return nil
}
