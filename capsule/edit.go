package capsule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/tern-dev/tern/internal/atomicfile"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/memory"
)

// Editable lists the files a person may edit in place and then accept with
// AcceptEdits: the agent definition, the environment spec and the working
// memory (whose edits become note events). Every other file is written
// only by tern.
var Editable = []string{AgentFile, EnvironmentFile, NotesFile}

// FileUpdatedEventType is the journal event that records an accepted edit;
// its body is FileUpdatedBody. The edited content is kept as a blob too, so
// that a merge can take the latest edit of each file.
const FileUpdatedEventType = "file.updated"

// FileUpdatedBody names the edited file and the CID of its new content.
type FileUpdatedBody struct {
	Path string `json:"path"`
	CID  string `json:"cid"`
}

// ErrNotEditable means a file that only tern writes differs from the
// manifest when edits are accepted: damage, or an edit of a file that may
// not be edited by hand.
var ErrNotEditable = errors.New("not a file a person may edit")

// ErrInvalidEdit means a hand-edited file does not parse or breaks a rule
// of its format; the error names the file and what is wrong.
var ErrInvalidEdit = errors.New("invalid edit")

// invalidEdit is ErrInvalidEdit with its message.
type invalidEdit struct{ error }

func (e invalidEdit) Is(target error) bool { return target == ErrInvalidEdit }

// AcceptEdits takes the current content of every Editable file that no
// longer matches the manifest, checks it (an invalid agent.json or
// environment spec is refused, naming the file), keeps it as a blob,
// records a file.updated event signed by s for each, and commits the new
// manifest. Any other file that does not match is damage, not an edit: it
// is refused and nothing changes. It returns the paths it accepted.
func (d *Dir) AcceptEdits(ctx context.Context, s journal.Signer) ([]string, error) {
	var (
		notesEdited bool
		accepted    []string
		files       = map[string][]byte{}
		blobs       = map[string]FileEntry{}
		drafts      []journal.Draft
	)
	for _, name := range d.Manifest().Names() {
		if name == JournalFile {
			continue
		}
		want := d.Manifest().Files[name]
		got, err := hashFile(d.path(name), -1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if got == want {
			continue
		}
		if !isEditable(name) {
			return nil, fmt.Errorf("%s: %w: it does not match the manifest, and only %v may be edited by hand (%w); run tern capsule verify %s", name, ErrHashMismatch, Editable, ErrNotEditable, d.dir)
		}
		data, err := os.ReadFile(d.path(name))
		if err != nil {
			return nil, err
		}
		if name == NotesFile {
			evs, err := d.Events()
			if err != nil {
				return nil, err
			}
			view, _ := journal.Readable(evs)
			edits, sum, err := memory.Edits(memory.Fold(view), data)
			if err != nil {
				return nil, invalidEdit{fmt.Errorf("%s: %w; fix it and accept again", NotesFile, err)}
			}
			drafts = append(drafts, edits...)
			accepted = append(accepted, fmt.Sprintf("%s (%s)", name, sum))
			notesEdited = true
			continue
		}
		if err := checkEditable(name, data); err != nil {
			return nil, err
		}
		e, err := putBlob(d.dir, bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		blobs[BlobPath(e.SHA256)] = e
		files[name] = data
		body, err := json.Marshal(FileUpdatedBody{Path: name, CID: BlobCID(e.SHA256)})
		if err != nil {
			return nil, err
		}
		drafts = append(drafts, journal.Draft{Type: FileUpdatedEventType, Body: body})
		accepted = append(accepted, name)
	}
	// agent.json as it now stands, if it runs commands or sends keys
	// (Reach), is accepted by s: that takes effect (see TrustedAgent). One
	// accepted before s said so (before agent.accepted existed, or by
	// another machine) is accepted again here, the way a person says yes
	// to it.
	agentData, ok := files[AgentFile]
	if !ok {
		var err error
		if agentData, err = d.ReadFile(AgentFile); err != nil {
			return nil, err
		}
	}
	if a, err := ParseAgent(agentData); err == nil && !a.Reach().Empty() {
		evs, err := d.Events()
		if err != nil {
			return nil, err
		}
		sum := AgentSum(agentData)
		if !AcceptedBy(sum, evs, func(m string) bool { return m == s.Machine() }) {
			body, _ := json.Marshal(AgentAcceptedBody{SHA256: sum})
			drafts = append(drafts, journal.Draft{Type: AgentAcceptedType, Body: body})
			if !ok {
				accepted = append(accepted, AgentFile+" (as it is)")
			}
		}
	}
	if len(accepted) == 0 {
		return nil, d.Seal()
	}
	if err := atomicfile.SyncDir(d.path(BlobDir)); err != nil {
		return nil, err
	}
	jl, err := d.journalLog()
	if err != nil {
		return nil, err
	}
	d.deriveMu.Lock() // from the events to the commit, as a snapshot holds it
	defer d.deriveMu.Unlock()
	if len(drafts) > 0 {
		if _, err := jl.Append(ctx, s, 0, drafts...); err != nil {
			return nil, err
		}
	}
	derived, err := d.derivedUpdates(blobs)
	if err != nil {
		return nil, err
	}
	for name, data := range derived {
		files[name] = data
	}
	if notesEdited {
		// The file becomes what the journal now derives (derivedUpdates
		// leaves a hand-edited file alone).
		evs, err := d.Events()
		if err != nil {
			return nil, err
		}
		view, _ := journal.Readable(evs)
		files[NotesFile] = memory.Render(memory.Fold(view))
	}
	return accepted, d.commit(files, blobs)
}

func isEditable(name string) bool {
	for _, e := range Editable {
		if e == name {
			return true
		}
	}
	return false
}

// checkEditable validates the content of an editable file.
func checkEditable(name string, data []byte) error {
	var err error
	switch name {
	case AgentFile:
		_, err = ParseAgent(data)
	case EnvironmentFile:
		_, err = ParseEnvSpec(data)
	}
	if err != nil {
		if !strings.HasPrefix(err.Error(), name+":") {
			err = fmt.Errorf("%s: %w", name, err)
		}
		return invalidEdit{fmt.Errorf("%w; fix it and accept again", err)}
	}
	return nil
}

// latestEdit returns the content of name named by the latest file.updated
// event of the readable view, read from whichever capsule holds its blob,
// or nil if no event names that file.
func latestEdit(view []*journal.Event, name string, from ...*Capsule) ([]byte, error) {
	for i := len(view) - 1; i >= 0; i-- {
		e := view[i]
		if e.Type != FileUpdatedEventType {
			continue
		}
		var body FileUpdatedBody
		if err := json.Unmarshal(e.Body, &body); err != nil || body.Path != name {
			continue
		}
		return blobContent(body.CID, e, from...)
	}
	return nil, nil
}

// blobContent reads the blob with the given CID from the first capsule
// that lists it, checking its hash; ev names the event that asked for it.
func blobContent(cidStr string, ev *journal.Event, from ...*Capsule) ([]byte, error) {
	h, err := ParseBlobCID(cidStr)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", ev.ID, err)
	}
	for _, c := range from {
		want, ok := c.Manifest().Files[BlobPath(h)]
		if !ok {
			continue
		}
		rc, _, err := c.OpenBlob(h)
		if err != nil {
			return nil, err
		}
		data, err := readAllClose(rc)
		if err != nil {
			return nil, err
		}
		if entryOf(data) != want {
			return nil, fmt.Errorf("blob %s in %s: %w", cidStr, c.Path, ErrHashMismatch)
		}
		return data, nil
	}
	return nil, fmt.Errorf("blob %s (event %s) is in neither copy", cidStr, ev.ID)
}
