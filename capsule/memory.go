package capsule

import (
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

// Memory is what a capsule holds of its agent's memory: the notes its
// journal folds to, the texts its index covers and the index as stored.
type Memory struct {
	Agent Agent
	Notes memory.Notes
	Items []memory.Item // the notes' current versions, then the workspace's text files when agent.json asks
	Index *memory.Index // as stored; nil when it does not parse (a search rebuilds it)
	Spec  memory.EmbedderSpec
}

// Memory reads the capsule's memory (see Memory).
func (c *Capsule) Memory() (*Memory, error) {
	agent, err := c.Agent()
	if err != nil {
		return nil, err
	}
	events, err := c.Journal()
	if err != nil {
		return nil, err
	}
	view, _ := journal.Readable(events)
	m := &Memory{Agent: agent, Notes: memory.Fold(view), Spec: agent.EmbedderSpec()}
	m.Items = memory.NoteItems(m.Notes)
	if agent.Memory != nil && agent.Memory.Workspace {
		if snap, err := c.Snapshot(); err == nil {
			m.Items = append(m.Items, workspaceItems(snap, func(h string) ([]byte, bool) {
				rc, _, err := c.OpenBlob(h)
				if err != nil {
					return nil, false
				}
				data, err := readAllClose(rc)
				return data, err == nil
			})...)
		}
	}
	// An index that is not the one the manifest lists is not used: a
	// search rebuilds it (see memory.Search).
	if data, err := c.ReadFile(IndexFile); err == nil && entryOf(data) == c.Manifest().Files[IndexFile] {
		m.Index, _ = memory.ParseIndex(data)
	}
	return m, nil
}

// WriteIndex stores idx as the capsule's index (a search completed it, or
// a reindex rebuilt it) together with the working memory the journal
// derives, unless a person has edited that and not accepted the edit:
// derived files, no event.
func (d *Dir) WriteIndex(idx *memory.Index) error {
	evs, err := d.Events()
	if err != nil {
		return err
	}
	view, _ := journal.Readable(evs)
	files := map[string][]byte{IndexFile: idx.Encode()}
	if !d.notesEdited(d.Manifest().Files[NotesFile]) {
		files[NotesFile] = memory.Render(memory.Fold(view)) // a person's unaccepted edit stays theirs
	}
	return d.commit(files, nil)
}
