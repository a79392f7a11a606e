package memory

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tern-dev/tern/journal"
)

// NoteType is the journal event type of every version of a note.
const NoteType = "memory.note"

// The ops of a memory.note event.
const (
	OpAdd    = "add"    // a new note: note is a new id, revises is empty
	OpRevise = "revise" // new text and tags for the versions it revises
	OpRemove = "remove" // the note is gone, as of the versions it revises
)

// Limits of a note, checked on every draft.
const (
	MaxNoteText = 64 << 10 // bytes of text
	MaxTags     = 16
)

// NoteBody is the body of a memory.note event (docs/FORMAT.md, "Notes").
type NoteBody struct {
	Note    string   `json:"note"`              // the note's stable id, note_ and 16 hex digits
	Op      string   `json:"op"`                // OpAdd, OpRevise or OpRemove
	Revises []string `json:"revises,omitempty"` // event ids of the versions this one replaces
	Text    string   `json:"text,omitempty"`    // trimmed, non-empty for add and revise
	Tags    []string `json:"tags,omitempty"`    // sorted, without repeats
}

var (
	noteIDPattern = regexp.MustCompile(`^note_[0-9a-f]{16}$`)
	tagPattern    = regexp.MustCompile(`^[\p{Ll}\p{Lo}\p{N}][\p{Ll}\p{Lo}\p{N}._:-]{0,39}$`)
)

// ValidNoteID reports whether s is a note id as tern writes them.
func ValidNoteID(s string) bool { return noteIDPattern.MatchString(s) }

// NewNoteID returns a fresh random note id.
func NewNoteID() string {
	var b [8]byte
	rand.Read(b[:])
	return "note_" + hex.EncodeToString(b[:])
}

// CheckNoteBody checks a memory.note draft's body and says, naming the
// field, what is wrong. Events read from a journal are not checked this
// way (Fold skips a body it cannot read).
func CheckNoteBody(body []byte) error {
	var b NoteBody
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return fmt.Errorf("body: %v (want {\"note\", \"op\", \"revises\", \"text\", \"tags\"})", err)
	}
	return b.check()
}

func (b NoteBody) check() error {
	if !ValidNoteID(b.Note) {
		return fmt.Errorf("body.note: %q is not a note id (note_ and 16 hex digits)", b.Note)
	}
	switch b.Op {
	case OpAdd:
		if len(b.Revises) > 0 {
			return fmt.Errorf("body.revises: an added note revises nothing")
		}
	case OpRevise, OpRemove:
		if len(b.Revises) == 0 {
			return fmt.Errorf("body.revises: a %s names the versions (event ids) it replaces", b.Op)
		}
	default:
		return fmt.Errorf("body.op: %q is not add, revise or remove", b.Op)
	}
	if b.Op == OpRemove {
		if b.Text != "" || len(b.Tags) > 0 {
			return fmt.Errorf("body: a remove carries no text or tags")
		}
		return nil
	}
	switch {
	case b.Text == "":
		return fmt.Errorf("body.text: a note needs text")
	case len(b.Text) > MaxNoteText:
		return fmt.Errorf("body.text: %d bytes, over the limit of %d", len(b.Text), MaxNoteText)
	case !utf8.ValidString(b.Text):
		return fmt.Errorf("body.text: not valid UTF-8")
	case b.Text != normalText(b.Text):
		return fmt.Errorf("body.text: has leading or trailing space, or a carriage return; tern writes notes trimmed, with \\n line ends")
	}
	if len(b.Tags) > MaxTags {
		return fmt.Errorf("body.tags: %d tags, over the limit of %d", len(b.Tags), MaxTags)
	}
	for i, t := range b.Tags {
		if !tagPattern.MatchString(t) {
			return fmt.Errorf("body.tags[%d]: %q is not a tag (lowercase letters and digits, then . _ : -, up to 40)", i, t)
		}
		if i > 0 && b.Tags[i-1] >= t {
			return fmt.Errorf("body.tags: not sorted without repeats")
		}
	}
	return nil
}

// normalText is text as a note keeps it: \n line ends, trimmed.
func normalText(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
}

// normalTags lowercases, sorts and dedupes tags.
func normalTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		if t = strings.ToLower(strings.TrimSpace(t)); t != "" {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func noteDraft(b NoteBody) (journal.Draft, error) {
	if err := b.check(); err != nil {
		// The caller gave text and tags, not a body: name them as such.
		return journal.Draft{}, errors.New(strings.TrimPrefix(err.Error(), "body."))
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return journal.Draft{}, err
	}
	return journal.Draft{Type: NoteType, Body: raw}, nil
}

// AddDraft is the draft of a new note with text and tags (normalised:
// trimmed text, lowercase sorted tags); it returns the note's new id.
func AddDraft(text string, tags []string) (journal.Draft, string, error) {
	id := NewNoteID()
	d, err := noteDraft(NoteBody{Note: id, Op: OpAdd, Text: normalText(text), Tags: normalTags(tags)})
	return d, id, err
}

// AddDraftAs is AddDraft for a note id chosen by the caller (a tool call
// that must write the same note when it is run again).
func AddDraftAs(id, text string, tags []string) (journal.Draft, error) {
	return noteDraft(NoteBody{Note: id, Op: OpAdd, Text: normalText(text), Tags: normalTags(tags)})
}

// ReviseDraft is the draft that replaces every current version of n (so it
// also settles a conflict) with text and tags.
func ReviseDraft(n *Note, text string, tags []string) (journal.Draft, error) {
	return noteDraft(NoteBody{Note: n.ID, Op: OpRevise, Revises: n.headIDs(), Text: normalText(text), Tags: normalTags(tags)})
}

// RemoveDraft is the draft that removes n, every current version of it.
func RemoveDraft(n *Note) (journal.Draft, error) {
	return noteDraft(NoteBody{Note: n.ID, Op: OpRemove, Revises: n.headIDs()})
}

// Version is one version of a note: what one memory.note event wrote.
type Version struct {
	Event   string // the event's id
	Machine string
	Time    string // the event's time, RFC 3339
	Removed bool
	Text    string
	Tags    []string
}

// Note is a note as the journal leaves it: the versions nothing revises
// (its heads). One head is the note; two or more are a conflict, written
// apart, that stays until a revision names them all.
type Note struct {
	ID    string
	Heads []Version // in total order of their events
	first int       // position of its first version in the view
}

// Conflict reports whether the note has more than one current version.
func (n *Note) Conflict() bool { return len(n.Heads) > 1 }

// Removed reports whether every current version removes the note.
func (n *Note) Removed() bool {
	for _, h := range n.Heads {
		if !h.Removed {
			return false
		}
	}
	return true
}

// Text is the text of the note's latest live head (the only one, outside
// a conflict).
func (n *Note) Text() string { return n.live().Text }

// Tags are the tags of the note's latest live head.
func (n *Note) Tags() []string { return n.live().Tags }

// Time is when the note's latest live head was written (its text's time).
func (n *Note) Time() string { return n.live().Time }

func (n *Note) live() Version {
	for i := len(n.Heads) - 1; i >= 0; i-- {
		if !n.Heads[i].Removed {
			return n.Heads[i]
		}
	}
	return Version{}
}

func (n *Note) headIDs() []string {
	ids := make([]string, len(n.Heads))
	for i, h := range n.Heads {
		ids[i] = h.Event
	}
	slices.Sort(ids)
	return ids
}

// Notes are every note of a journal, removed ones included, in the order
// their first versions were written.
type Notes []*Note

// Live are the notes not removed.
func (ns Notes) Live() Notes {
	var out Notes
	for _, n := range ns {
		if !n.Removed() {
			out = append(out, n)
		}
	}
	return out
}

// Find returns the note with id, or nil.
func (ns Notes) Find(id string) *Note {
	for _, n := range ns {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Fold derives the notes from a journal's readable view, in total order.
// A version that another version of the same note revises is no longer a
// head; a revision that names a version of another note, or one the
// journal lacks, replaces only what it names and holds. A memory.note
// body Fold cannot read is skipped. The same events give the same notes,
// whatever order the copies were merged in.
func Fold(view []*journal.Event) Notes {
	byID := map[string]*Note{}
	var order []*Note
	versions := map[string][]Version{}
	revised := map[string]bool{} // event ids some version of the same note revises
	noteOf := map[string]string{}
	type rev struct{ note, of string }
	var revs []rev
	for i, e := range view {
		if e.Type != NoteType {
			continue
		}
		var b NoteBody
		if json.Unmarshal(e.Body, &b) != nil || b.check() != nil {
			continue
		}
		n := byID[b.Note]
		if n == nil {
			n = &Note{ID: b.Note, first: i}
			byID[b.Note] = n
			order = append(order, n)
		}
		versions[b.Note] = append(versions[b.Note], Version{Event: e.ID, Machine: e.Machine, Time: e.Time,
			Removed: b.Op == OpRemove, Text: b.Text, Tags: b.Tags})
		noteOf[e.ID] = b.Note
		for _, r := range b.Revises {
			revs = append(revs, rev{b.Note, r})
		}
	}
	for _, r := range revs {
		if noteOf[r.of] == r.note {
			revised[r.of] = true
		}
	}
	out := make(Notes, 0, len(order))
	for _, n := range order {
		for _, v := range versions[n.ID] {
			if !revised[v.Event] {
				n.Heads = append(n.Heads, v)
			}
		}
		if len(n.Heads) > 0 { // a cycle of revisions leaves none: nothing to show
			out = append(out, n)
		}
	}
	return out
}

// ErrNoNote is the error of a note id that names no live note.
var ErrNoNote = errors.New("no such note")

// NoteView is a note as the API and tern memory list --json show it.
type NoteView struct {
	ID       string        `json:"id"`
	Text     string        `json:"text"` // the latest live version's
	Tags     []string      `json:"tags"`
	Time     string        `json:"time"` // when its latest version was written
	Conflict bool          `json:"conflict"`
	Versions []VersionView `json:"versions,omitempty"` // in a conflict: every current version
}

// VersionView is one current version of a note in conflict.
type VersionView struct {
	Event   string   `json:"event"`
	Machine string   `json:"machine"`
	Time    string   `json:"time"`
	Removed bool     `json:"removed"`
	Text    string   `json:"text,omitempty"`
	Tags    []string `json:"tags"`
}

// View returns the note as the API shows it.
func (n *Note) View() NoteView {
	v := NoteView{ID: n.ID, Text: n.Text(), Tags: n.Tags(), Time: n.Time(), Conflict: n.Conflict()}
	if v.Tags == nil {
		v.Tags = []string{}
	}
	if n.Conflict() {
		for _, h := range n.Heads {
			tags := h.Tags
			if tags == nil {
				tags = []string{}
			}
			v.Versions = append(v.Versions, VersionView{Event: h.Event, Machine: h.Machine, Time: h.Time, Removed: h.Removed, Text: h.Text, Tags: tags})
		}
	}
	return v
}

// Views are the live notes' views, in the order they were first written.
func (ns Notes) Views() []NoteView {
	out := []NoteView{}
	for _, n := range ns.Live() {
		out = append(out, n.View())
	}
	return out
}

// NoteDraft is the draft that adds a note (revise empty) or revises the
// live note revise of notes, with text and tags; it returns the note's id.
func NoteDraft(notes Notes, text string, tags []string, revise string) (journal.Draft, string, error) {
	if revise == "" {
		return AddDraft(text, tags)
	}
	n := notes.Find(revise)
	if n == nil || n.Removed() {
		return journal.Draft{}, "", fmt.Errorf("note %s: %w (tern memory list shows them)", revise, ErrNoNote)
	}
	d, err := ReviseDraft(n, text, tags)
	return d, n.ID, err
}

// ForgetDraft is the draft that removes the live note id of notes.
func ForgetDraft(notes Notes, id string) (journal.Draft, error) {
	n := notes.Find(id)
	if n == nil || n.Removed() {
		return journal.Draft{}, fmt.Errorf("note %s: %w (tern memory list shows them)", id, ErrNoNote)
	}
	return RemoveDraft(n)
}
