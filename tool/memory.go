package tool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tern-dev/tern/memory"
	"github.com/tern-dev/tern/session"
)

// Memory is the agent's memory as memory_search and memory_note reach it;
// the runtime gives each call the memory of the agent it runs.
type Memory interface {
	// Search searches the agent's notes (see memory.Search).
	Search(ctx context.Context, q memory.Query) ([]memory.Result, error)
	// Note appends a note event: note id with text and tags, added, or
	// revising every current version of the note when revise is set.
	Note(ctx context.Context, id, text string, tags []string, revise bool) error
	// Notes are the agent's notes as the journal holds them now.
	Notes() (memory.Notes, error)
}

func memorySearch() Tool {
	return Tool{
		Name:        "memory_search",
		Description: "Search your notes (your working memory, kept across sessions and machines) for what you noted before. Returns the best matches, best first, each with its note id.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"query":{"type":"string","description":"what to look for, in words"},` +
			`"k":{"type":"integer","description":"how many results (default 5, at most 50)"},` +
			`"tags":{"type":"array","items":{"type":"string"},"description":"only notes with all these tags"}},` +
			`"required":["query"],"additionalProperties":false}`),
		Effect:      Pure,
		NoWorkspace: true,
		Run: func(ctx context.Context, c Call) (Result, error) {
			var a struct {
				Query string   `json:"query"`
				K     int      `json:"k"`
				Tags  []string `json:"tags"`
			}
			if err := strictArgs(c.Arguments, &a); err != nil {
				return failf("%v", err)
			}
			if strings.TrimSpace(a.Query) == "" {
				return failf("query is empty: say what to look for")
			}
			if c.Memory == nil {
				return Result{}, fmt.Errorf("memory_search: the runtime gave no memory")
			}
			results, err := c.Memory.Search(ctx, memory.Query{Text: a.Query, K: min(max(a.K, 0), 50), Tags: a.Tags})
			if err != nil {
				return failf("the search failed: %v", err)
			}
			if len(results) == 0 {
				return Result{Output: "No note matches."}, nil
			}
			var b strings.Builder
			for _, r := range results {
				id := r.Note
				if r.File != "" {
					id = "file " + r.File
				}
				fmt.Fprintf(&b, "%s (score %.2f)", id, r.Score)
				if len(r.Tags) > 0 {
					fmt.Fprintf(&b, " [%s]", strings.Join(r.Tags, ", "))
				}
				if r.Conflict {
					b.WriteString(" (versions written apart; revise it to settle)")
				}
				fmt.Fprintf(&b, ":\n%s\n\n", r.Text)
			}
			return Result{Output: strings.TrimSpace(b.String())}, nil
		},
	}
}

func memoryNote() Tool {
	return Tool{
		Name:        "memory_note",
		Description: "Write a note to your working memory, to find again later with memory_search (in any session, on any machine). Give revise a note id to replace that note's text instead.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"text":{"type":"string","description":"the note, self-contained"},` +
			`"tags":{"type":"array","items":{"type":"string"},"description":"lowercase tags, to filter by later"},` +
			`"revise":{"type":"string","description":"the id of a note to revise (note_…); leave out to add a note"}},` +
			`"required":["text"],"additionalProperties":false}`),
		Effect:      Idempotent,
		NoWorkspace: true,
		Run: func(ctx context.Context, c Call) (Result, error) {
			a, err := noteArgs(c)
			if err != nil {
				return failf("%v", err)
			}
			if c.Memory == nil {
				return Result{}, fmt.Errorf("memory_note: the runtime gave no memory")
			}
			id, revise := noteID(c, a.Revise)
			if err := c.Memory.Note(ctx, id, a.Text, a.Tags, revise); err != nil {
				return failf("the note was not written: %v", err)
			}
			return Result{Output: "Noted as " + id + "."}, nil
		},
		// A retry of the same operation writes the same note id, so the
		// runtime can ask whether the first run got through.
		Status: func(ctx context.Context, c Call) (session.Check, error) {
			a, err := noteArgs(c)
			if err != nil || c.Memory == nil {
				return session.CheckUnknown, nil
			}
			notes, err := c.Memory.Notes()
			if err != nil {
				return session.CheckUnknown, err
			}
			id, _ := noteID(c, a.Revise)
			if n := notes.Find(id); n != nil && !n.Conflict() && n.Text() == strings.TrimSpace(a.Text) {
				return session.CheckCommitted, nil
			}
			return session.CheckNotCommitted, nil
		},
	}
}

type noteArguments struct {
	Text   string   `json:"text"`
	Tags   []string `json:"tags"`
	Revise string   `json:"revise"`
}

func noteArgs(c Call) (noteArguments, error) {
	var a noteArguments
	if err := strictArgs(c.Arguments, &a); err != nil {
		return a, err
	}
	if strings.TrimSpace(a.Text) == "" {
		return a, fmt.Errorf("text is empty: write the note")
	}
	if a.Revise != "" && !memory.ValidNoteID(a.Revise) {
		return a, fmt.Errorf("revise %q is not a note id (note_ and 16 hex digits, as memory_search shows them)", a.Revise)
	}
	return a, nil
}

// noteID is the note a memory_note call writes: the one it revises, or a
// new id made from the operation id, the same on every retry.
func noteID(c Call, revise string) (string, bool) {
	if revise != "" {
		return revise, true
	}
	sum := sha256.Sum256([]byte("memory_note\x00" + c.OperationID))
	return "note_" + hex.EncodeToString(sum[:8]), false
}

// strictArgs decodes a call's arguments, refusing a field the tool does not
// take, in words the model can act on.
func strictArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the arguments: %v", err)
	}
	return nil
}
