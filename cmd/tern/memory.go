package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/provider"
)

func memoryCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "memory",
		Short: "Write, list and search an agent's notes (its working memory), offline",
		Long: "An agent's notes are journal events, so they sync, merge and migrate with it; notes\n" +
			"written on two machines apart all survive, and two revisions of one note made apart stay\n" +
			"side by side (a conflict) until one is chosen. memory/working_memory.md shows them (edit it\n" +
			"and run tern capsule accept), and memory/vector_index/index.json finds them by meaning.\n" +
			"Each command takes an agent id the running node holds (it then goes through the node) or\n" +
			"a capsule folder.",
		Args: groupArgs,
		RunE: showHelp,
	}
	c.AddCommand(memoryNoteCmd(e), memoryListCmd(e), memorySearchCmd(e), memoryForgetCmd(e), memoryReindexCmd(e))
	return c
}

// memoryTarget is where a memory command works: through the node (agent
// set) or in a capsule folder (dir set).
type memoryTarget struct{ agent, dir string }

// targetOf reads a command's AGENT|DIR: an agent id that is not a folder
// here, or the node's own folder of one while the node runs, goes through
// the node.
func targetOf(arg string) (memoryTarget, error) {
	if _, err := os.Stat(arg); err != nil {
		if capsule.ValidAgentID(arg) {
			return memoryTarget{agent: arg}, nil
		}
		return memoryTarget{}, fmt.Errorf("%s: neither a capsule folder nor an agent id", arg)
	}
	home, err := node.Home()
	if err != nil {
		return memoryTarget{}, err
	}
	var held *heldByNode
	if err := refuseNodeCopy(home, arg); errors.As(err, &held) {
		return memoryTarget{agent: held.agent}, nil
	} else if err != nil {
		return memoryTarget{}, err
	}
	return memoryTarget{dir: arg}, nil
}

func (e *env) memoryPath(agent, rest string) string {
	return "/v1/agents/" + url.PathEscape(agent) + "/memory" + rest
}

func memoryNoteCmd(e *env) *cobra.Command {
	var tags []string
	var revise string
	c := &cobra.Command{
		Use:   "note AGENT|DIR TEXT [--tag T]... [--revise NOTE_ID]",
		Short: "Add a note (or revise one, settling a conflict); prints the note's id",
		Example: "  tern memory note $AGENT \"Maya prefers tabs over spaces\" --tag style\n" +
			"  tern memory note ./agent \"Stand-up moved to 10:00\" --revise note_3f9a2b0c1d2e4f5a",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := targetOf(args[0])
			if err != nil {
				return err
			}
			if dir, offline := e.offlineCopy(t.agent); t.agent != "" && offline {
				t = memoryTarget{dir: dir}
			}
			if t.agent != "" {
				body, _ := json.Marshal(map[string]any{"text": args[1], "tags": tags, "revise": revise})
				var res struct {
					Note string `json:"note"`
				}
				if err := e.nodeDo(cmd.Context(), http.MethodPost, e.memoryPath(t.agent, ""), body, &res); err != nil {
					return err
				}
				fmt.Fprintln(e.stdout, res.Note)
				return nil
			}
			id, err := e.appendNote(cmd.Context(), t.dir, func(notes memory.Notes) (draftAndID, error) {
				d, id, err := memory.NoteDraft(notes, args[1], tags, revise)
				return draftAndID{d, id}, err
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, id)
			return nil
		},
	}
	c.Flags().StringArrayVar(&tags, "tag", nil, "a tag for the note (repeatable; lowercase)")
	c.Flags().StringVar(&revise, "revise", "", "revise this note (every version of it) instead of adding one")
	return c
}

func memoryForgetCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "forget AGENT|DIR NOTE_ID",
		Short:   "Remove a note (its events stay in the journal, as every event does)",
		Example: "  tern memory forget $AGENT note_3f9a2b0c1d2e4f5a",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := targetOf(args[0])
			if err != nil {
				return err
			}
			if t.agent != "" {
				err = e.nodeDo(cmd.Context(), http.MethodDelete, e.memoryPath(t.agent, "/"+url.PathEscape(args[1])), nil, nil)
			} else {
				_, err = e.appendNote(cmd.Context(), t.dir, func(notes memory.Notes) (draftAndID, error) {
					d, err := memory.ForgetDraft(notes, args[1])
					return draftAndID{d, args[1]}, err
				})
			}
			if err == nil {
				e.done("forgot %s", args[1])
			}
			return err
		},
	}
}

type draftAndID struct {
	d  journal.Draft
	id string
}

// appendNote signs, in the capsule folder dir, the note event make gives
// for the folder's current notes, and returns the note's id.
func (e *env) appendNote(ctx context.Context, dir string, make func(memory.Notes) (draftAndID, error)) (string, error) {
	w, err := e.openWriter(ctx, dir, false)
	if err != nil {
		return "", err
	}
	m, err := w.Memory()
	if err == nil {
		var dd draftAndID
		if dd, err = make(m.Notes); err == nil {
			_, err = w.Append(ctx, w.id, 0, dd.d)
			return dd.id, errors.Join(err, w.Close())
		}
	}
	return "", errors.Join(err, w.Close())
}

func memoryListCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "list AGENT|DIR [--json]",
		Short:   "List the live notes, conflicts shown with each version",
		Example: "  tern memory list $AGENT\n  tern memory list ./agent --json | jq -r '.[] | select(.conflict) | .id'",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := targetOf(args[0])
			if err != nil {
				return err
			}
			var views []memory.NoteView
			if t.agent != "" {
				var res struct {
					Notes []memory.NoteView `json:"notes"`
				}
				if err := e.nodeDo(cmd.Context(), http.MethodGet, e.memoryPath(t.agent, ""), nil, &res); err != nil {
					return err
				}
				views = res.Notes
			} else {
				m, err := readMemory(t.dir)
				if err != nil {
					return err
				}
				views = m.Notes.Views()
			}
			if asJSON {
				return printJSON(e, views)
			}
			if len(views) == 0 {
				fmt.Fprintln(e.stderr, "no notes")
			}
			for _, v := range views {
				if !v.Conflict {
					fmt.Fprintf(e.stdout, "%s  %s%s\n", v.ID, oneLine(v.Text, 100), tagSuffix(v.Tags))
					continue
				}
				fmt.Fprintf(e.stdout, "%s  CONFLICT: %s written apart (keep one: tern memory note %s TEXT --revise %s)\n", v.ID, plural(len(v.Versions), "version"), args[0], v.ID)
				for _, ver := range v.Versions {
					text := oneLine(ver.Text, 100)
					if ver.Removed {
						text = "(removed)"
					}
					fmt.Fprintf(e.stdout, "    version …%s by %s: %s%s\n", ver.Event[max(0, len(ver.Event)-10):], shortPeer(ver.Machine), text, tagSuffix(ver.Tags))
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the notes as a JSON array")
	return c
}

func memorySearchCmd(e *env) *cobra.Command {
	var (
		asJSON       bool
		k            int
		tags         []string
		since, until string
	)
	c := &cobra.Command{
		Use:   "search AGENT|DIR QUERY [--k N] [--tag T]... [--since TIME] [--until TIME] [--json]",
		Short: "Find the notes most like QUERY, best first, with the embedder agent.json names",
		Example: "  tern memory search $AGENT \"how do I run the tests\"\n" +
			"  tern memory search ./agent \"deploy\" --tag ops --since 2026-11-01T00:00:00Z --json",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := targetOf(args[0])
			if err != nil {
				return err
			}
			if k < 1 || k > 1000 {
				return fmt.Errorf("--k %d: give a number from 1 to 1000", k)
			}
			var results []memory.Result
			if t.agent != "" {
				v := url.Values{"q": {args[1]}, "k": {strconv.Itoa(k)}, "tag": tags}
				if since != "" {
					v.Set("since", since)
				}
				if until != "" {
					v.Set("until", until)
				}
				var res struct {
					Results []memory.Result `json:"results"`
				}
				if err := e.nodeDo(cmd.Context(), http.MethodGet, e.memoryPath(t.agent, "/search?"+v.Encode()), nil, &res); err != nil {
					return err
				}
				results = res.Results
			} else {
				q := memory.Query{Text: args[1], K: k, Tags: tags}
				for _, b := range []struct {
					flag, s string
					t       *time.Time
				}{{"--since", since, &q.Since}, {"--until", until, &q.Until}} {
					if b.s == "" {
						continue
					}
					if *b.t, err = time.Parse(time.RFC3339, b.s); err != nil {
						return fmt.Errorf("%s %q: give a time like 2026-12-01T00:00:00Z", b.flag, b.s)
					}
				}
				if results, err = e.searchFolder(cmd.Context(), t.dir, q); err != nil {
					return err
				}
			}
			if asJSON {
				if results == nil {
					results = []memory.Result{}
				}
				return printJSON(e, results)
			}
			if len(results) == 0 {
				fmt.Fprintln(e.stderr, "nothing found")
			}
			for _, r := range results {
				what := r.Note
				if r.File != "" {
					what = "file " + r.File
				}
				fmt.Fprintf(e.stdout, "%.2f  %s  %s%s\n", r.Score, what, oneLine(r.Text, 100), tagSuffix(r.Tags))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the results as a JSON array")
	c.Flags().IntVar(&k, "k", 5, "how many results")
	c.Flags().StringArrayVar(&tags, "tag", nil, "only notes with this tag (repeatable: all of them)")
	c.Flags().StringVar(&since, "since", "", "only notes written at or after this time (RFC 3339)")
	c.Flags().StringVar(&until, "until", "", "only notes written before this time (RFC 3339)")
	return c
}

// searchFolder searches a capsule folder's memory here; a provider's
// embedder takes its key from this machine's secrets, and the index it
// completes is kept in the folder.
func (e *env) searchFolder(ctx context.Context, dir string, q memory.Query) ([]memory.Result, error) {
	m, err := readMemory(dir)
	if err != nil {
		return nil, err
	}
	emb, err := e.folderEmbedder(dir, m)
	if err != nil {
		return nil, err
	}
	results, completed, err := memory.Search(ctx, m.Notes, m.Items, m.Index, emb, q)
	if err != nil || completed == nil {
		return results, err
	}
	if d, err := e.openDir(ctx, dir); err == nil {
		err = d.WriteIndex(completed)
		d.Close()
		if err != nil {
			fmt.Fprintf(e.stderr, "tern: warning: could not keep the completed index: %v\n", err)
		}
	}
	return results, nil
}

func memoryReindexCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "reindex AGENT|DIR",
		Short: "Rebuild working_memory.md and the index from the journal's notes",
		Long: "Writes memory/working_memory.md and memory/vector_index/index.json again from the\n" +
			"journal's notes, trusting nothing of what they held: after verify reports them altered,\n" +
			"or after agent.json changed the embedder. A provider's embedder takes its key from this\n" +
			"machine's secrets (the node's, for an agent id). The node keeps its copies derived as it\n" +
			"goes; a reindex there is only needed after a change of embedder.",
		Example: "  tern capsule verify ./agent || tern memory reindex ./agent\n  tern memory reindex $AGENT",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := targetOf(args[0])
			if err != nil {
				return err
			}
			if t.agent != "" {
				var res struct {
					Texts int `json:"texts"`
				}
				if err := e.nodeDo(cmd.Context(), http.MethodPost, e.memoryPath(t.agent, "/reindex"), nil, &res); err != nil {
					return err
				}
				e.done("reindexed %s through the node: %s", t.agent, plural(res.Texts, "text"))
				return nil
			}
			m, err := readMemory(t.dir)
			if err != nil {
				return err
			}
			emb, err := e.folderEmbedder(t.dir, m)
			if err != nil {
				return err
			}
			idx, err := memory.Build(cmd.Context(), m.Items, emb, nil)
			if err != nil {
				return err
			}
			w, err := e.openWriter(cmd.Context(), t.dir, false)
			if err != nil {
				return err
			}
			if err = errors.Join(w.WriteIndex(idx), w.Close()); err != nil {
				return err
			}
			e.done("reindexed %s: %s by %s", t.dir, plural(len(idx.Entries), "text"), idx.Embedder.Name)
			return nil
		},
	}
}

// folderEmbedder returns the embedder of a capsule folder's memory
// settings, its key from this machine's secrets, unless it would send that
// key to a base URL no machine of this person's accepted (capsule.Reach).
func (e *env) folderEmbedder(dir string, m *capsule.Memory) (memory.Embedder, error) {
	var store provider.Secrets
	if m.Spec != memory.BuiltinSpec {
		if s := m.Agent.Memory; s.BaseURL != "" && s.KeySecret != "" {
			if err := e.trusted(dir); err != nil {
				return nil, err
			}
		}
		var err error
		if store, err = openSecrets(e); err != nil {
			return nil, err
		}
	}
	return provider.EmbedderFor(m.Agent, store)
}

// trusted refuses a capsule folder whose agent.json would run commands or
// send keys when no machine of this person's accepted it.
func (e *env) trusted(dir string) error {
	ours, err := e.ours()
	if err != nil {
		return err
	}
	c, err := capsule.Open(dir)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.TrustedAgent(dir, ours)
	return err
}

func readMemory(dir string) (*capsule.Memory, error) {
	c, err := capsule.Open(dir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Memory()
}

// nodeDo sends one request to the running node's API; body is JSON or nil.
func (e *env) nodeDo(ctx context.Context, method, path string, body []byte, out any) error {
	cl, err := e.client()
	if err != nil {
		return err
	}
	var r *bytes.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	if r == nil {
		return cl.Do(ctx, method, path, nil, out)
	}
	return cl.Do(ctx, method, path, r, out)
}

func printJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func tagSuffix(tags []string) string {
	if len(tags) == 0 {
		return ""
	}
	return "  [" + strings.Join(tags, ", ") + "]"
}
