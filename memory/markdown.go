package memory

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/tern-dev/tern/journal"
)

// The working memory file (memory/working_memory.md) is the notes as a
// person reads them, derived from the journal: the same notes give the
// same bytes. A person may edit it and accept the edit (Edits turns it
// into note events). Its shape:
//
//	# Working memory
//
//	<!-- the note on editing -->
//
//	## note_3f9a2b0c1d2e4f5a
//	Tags: deploy, ci
//
//	The note's text.
//
//	## note_8c7d6e5f4a3b2c1d (conflict: 2 versions written apart)
//
//	### version …k2xq4a
//
//	One text.
//
//	### version …m7ph2e (removed)
//
//	<!-- shown: note_3f9a2b0c1d2e4f5a note_8c7d6e5f4a3b2c1d -->
//
// A line of a note's text that starts with #, \, <!-- or Tags: is written
// with a \ before it, which Edits takes off again.

const (
	mdTitle   = "# Working memory"
	mdHelp    = "<!-- Derived by tern from the journal's memory.note events. Edit it, then run tern capsule accept:\n     a changed note is revised, a deleted section removes its note, a section \"## new\" adds one.\n     In a conflict, keep the one version you want (or write the text in its place). -->"
	mdTags    = "Tags: "
	mdNew     = "new"
	mdShown   = "<!-- shown:"
	mdVersion = "### version …"
	shortID   = 10 // the characters of an event id a version heading shows: its last ones
)

// Render writes the live notes (conflicts included) as the working memory
// file; no notes give an empty file. Its last line lists the ids it shows,
// so that an accepted edit removes only the notes it deleted, never one
// written after the file was.
func Render(notes Notes) []byte {
	live := notes.Live()
	if len(live) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString(mdTitle + "\n\n" + mdHelp + "\n")
	for _, n := range live {
		if !n.Conflict() {
			fmt.Fprintf(&b, "\n## %s\n", n.ID)
			writeBody(&b, n.Heads[0])
			continue
		}
		fmt.Fprintf(&b, "\n## %s (conflict: %d versions written apart)\n", n.ID, len(n.Heads))
		for _, h := range n.Heads {
			removed := ""
			if h.Removed {
				removed = " (removed)"
			}
			fmt.Fprintf(&b, "\n%s%s%s\n", mdVersion, tail(h.Event), removed)
			if !h.Removed {
				writeBody(&b, h)
			}
		}
	}
	b.WriteString("\n" + mdShown)
	for _, n := range live {
		b.WriteString(" " + n.ID)
	}
	b.WriteString(" -->\n")
	return b.Bytes()
}

func writeBody(b *bytes.Buffer, v Version) {
	if len(v.Tags) > 0 {
		b.WriteString(mdTags + strings.Join(v.Tags, ", ") + "\n")
	}
	b.WriteString("\n")
	for _, line := range strings.Split(v.Text, "\n") {
		if needsEscape(line) {
			b.WriteByte('\\')
		}
		b.WriteString(line + "\n")
	}
}

func needsEscape(line string) bool {
	for _, p := range []string{"#", "\\", "<!--", mdTags} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

func tail(id string) string {
	if len(id) <= shortID {
		return id
	}
	return id[len(id)-shortID:]
}

// section is one "## " section of an edited file.
type section struct {
	heading string
	line    int
	parts   []part // the text under it: one part, or one per "### version"
}

// part is a note's text and tags as a person left them.
type part struct {
	version string // the tail after "### version …", if any
	removed bool
	tags    []string
	text    string
}

// EditSummary counts what an accepted edit of the file does.
type EditSummary struct{ Revised, Removed, Added int }

func (e EditSummary) String() string {
	if e == (EditSummary{}) {
		return "no note changed"
	}
	return fmt.Sprintf("%d revised, %d removed, %d added", e.Revised, e.Removed, e.Added)
}

// Edits compares an edited working memory file with the notes the journal
// holds and returns the note events that make the notes say what the file
// says: a note whose text or tags changed is revised (a conflict left with
// one version, or with new text, is settled by that revision), a note the
// file's last line lists but whose section is gone is removed, and a
// "## new" section adds a note. Notes written after the file (not listed)
// are left alone, and a file whose last line is gone removes nothing. A
// file equal to Render(notes) gives no drafts. An error names the line and
// what is wrong, and nothing is to be written.
func Edits(notes Notes, md []byte) ([]journal.Draft, EditSummary, error) {
	var sum EditSummary
	f, err := parseMarkdown(md)
	if err != nil {
		return nil, sum, err
	}
	var drafts []journal.Draft
	seen := map[string]bool{}
	for _, s := range f.sections {
		id, _, _ := strings.Cut(s.heading, " ")
		if id == mdNew {
			for _, p := range s.parts {
				if p.text == "" {
					continue // an empty "## new" is a template left unused
				}
				d, _, err := AddDraft(p.text, p.tags)
				if err != nil {
					return nil, sum, fmt.Errorf("line %d: the new note: %v", s.line, err)
				}
				drafts = append(drafts, d)
				sum.Added++
			}
			continue
		}
		n := notes.Find(id)
		if n == nil || n.Removed() {
			return nil, sum, fmt.Errorf("line %d: ## %s: no such note; to add one, head its section \"## new\"", s.line, id)
		}
		if seen[id] {
			return nil, sum, fmt.Errorf("line %d: ## %s: the note has a second section; keep one", s.line, id)
		}
		seen[id] = true
		d, err := sectionEdit(n, s)
		if err != nil {
			return nil, sum, err
		}
		if d != nil {
			drafts = append(drafts, *d)
			sum.Revised++
		}
	}
	for _, id := range f.shown {
		n := notes.Find(id)
		if n == nil || n.Removed() || seen[id] {
			continue
		}
		d, err := RemoveDraft(n)
		if err != nil {
			return nil, sum, err
		}
		drafts = append(drafts, d)
		sum.Removed++
	}
	return drafts, sum, nil
}

// sectionEdit is the draft a note's section asks for, or nil.
func sectionEdit(n *Note, s section) (*journal.Draft, error) {
	lead, versions := s.parts[0], s.parts[1:]
	empty := fmt.Errorf("line %d: ## %s: the note's text is gone; to remove the note, delete its whole section (the heading too)", s.line, n.ID)
	if len(versions) == 0 {
		if lead.text == "" {
			return nil, empty
		}
		if !n.Conflict() && lead.text == n.Text() && equalTags(lead.tags, n.Tags()) {
			return nil, nil
		}
		return revise(n, s, lead)
	}
	for _, v := range versions {
		if !slices.ContainsFunc(n.Heads, func(h Version) bool { return tail(h.Event) == v.version }) {
			return nil, fmt.Errorf("line %d: ## %s: \"### version …%s\" names no current version of the note; keep the headings as tern wrote them", s.line, n.ID, v.version)
		}
	}
	switch {
	case lead.text != "" || len(lead.tags) > 0:
		return nil, fmt.Errorf("line %d: ## %s: text under the heading and %d \"### version\" sections; to settle the conflict, keep either your text or one version", s.line, n.ID, len(versions))
	case len(versions) == len(n.Heads) && unchangedConflict(n, versions):
		return nil, nil // the conflict stays until a person chooses
	case len(versions) > 1:
		return nil, fmt.Errorf("line %d: ## %s: %d of its %d versions left; keep one (delete the others' \"### version\" sections) or write the text you want under the heading", s.line, n.ID, len(versions), len(n.Heads))
	}
	v := versions[0]
	if v.removed {
		d, err := RemoveDraft(n)
		return &d, err
	}
	if v.text == "" {
		return nil, empty
	}
	return revise(n, s, v)
}

func revise(n *Note, s section, p part) (*journal.Draft, error) {
	d, err := ReviseDraft(n, p.text, p.tags)
	if err != nil {
		return nil, fmt.Errorf("line %d: ## %s: %v", s.line, n.ID, err)
	}
	return &d, nil
}

func unchangedConflict(n *Note, parts []part) bool {
	for i, h := range n.Heads {
		p := parts[i]
		if p.version != tail(h.Event) || p.removed != h.Removed || p.text != h.Text || !equalTags(p.tags, h.Tags) {
			return false
		}
	}
	return true
}

func equalTags(a, b []string) bool {
	a, b = normalTags(a), normalTags(b)
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// mdFile is an edited working memory file, read.
type mdFile struct {
	sections []section
	shown    []string // the ids its last line lists
}

// parseMarkdown reads the sections of a working memory file: the title and
// tern's comments are the file's own; any other text outside a section is
// refused, as it would be lost.
func parseMarkdown(md []byte) (mdFile, error) {
	var f mdFile
	text := strings.ReplaceAll(string(md), "\r\n", "\n")
	var cur *section
	var body []string
	var p *part
	flush := func() {
		if p != nil {
			p.text = normalText(strings.Join(body, "\n"))
			cur.parts = append(cur.parts, *p)
		}
		p, body = nil, nil
	}
	inComment := false
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		switch {
		case inComment:
			inComment = !strings.Contains(line, "-->")
			continue
		case strings.HasPrefix(line, mdShown):
			f.shown = strings.Fields(strings.TrimSuffix(strings.TrimPrefix(line, mdShown), "-->"))
			continue
		case strings.HasPrefix(line, "<!--"):
			inComment = !strings.Contains(line, "-->")
			continue
		case cur == nil && (line == mdTitle || strings.TrimSpace(line) == ""):
			continue
		case strings.HasPrefix(line, "## "):
			if cur != nil {
				flush()
				f.sections = append(f.sections, *cur)
			}
			cur = &section{heading: strings.TrimSpace(line[3:]), line: n}
			p = &part{}
		case cur == nil:
			return f, fmt.Errorf("line %d: text outside a note's section; to add it as a note, put \"## new\" on the line before it", n)
		case strings.HasPrefix(line, mdVersion):
			flush()
			rest := strings.TrimSpace(strings.TrimPrefix(line, mdVersion))
			v, flag, _ := strings.Cut(rest, " ")
			p = &part{version: v, removed: flag == "(removed)"}
		case strings.HasPrefix(line, "#"):
			return f, fmt.Errorf("line %d: %q: a heading tern does not know; a note's line starting with # is written \\#", n, line)
		case strings.HasPrefix(line, mdTags) && len(body) == 0 && len(p.tags) == 0:
			for _, t := range strings.Split(strings.TrimPrefix(line, mdTags), ",") {
				if t = strings.TrimSpace(t); t != "" {
					p.tags = append(p.tags, t)
				}
			}
		default:
			if strings.HasPrefix(line, "\\") {
				line = line[1:]
			}
			if len(body) == 0 && strings.TrimSpace(line) == "" {
				continue
			}
			body = append(body, line)
		}
	}
	if cur != nil {
		flush()
		f.sections = append(f.sections, *cur)
	}
	return f, nil
}
