package capsule

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/tern-dev/tern/journal"
)

// maxSmallFile bounds the files tern reads whole into memory besides the
// journal: agent.json, the environment spec, the snapshot and the index.
const maxSmallFile = 256 << 20

// maxJournal bounds the journal read into memory.
const maxJournal = 8 << 30

// Capsule is a capsule opened for reading, from a folder or a tar. Its
// manifest has been parsed strictly; file contents are checked by Verify,
// not by Open. Close releases the tar, if any.
type Capsule struct {
	Path     string
	manifest atomic.Pointer[Manifest] // replaced whole by a Dir's updates, read by anyone
	src      source
}

// openedCapsule is the capsule at path with manifest m, read from src.
func openedCapsule(path string, m *Manifest, src source) *Capsule {
	c := &Capsule{Path: path, src: src}
	c.manifest.Store(m)
	return c
}

// Manifest returns the capsule's manifest. A Dir's update replaces it
// whole, never in place: keep the pointer for a consistent view.
func (c *Capsule) Manifest() *Manifest { return c.manifest.Load() }

// Open opens the capsule folder or tar at path for reading. It fails if
// path is not a capsule or its manifest does not parse; use Verify to find
// every problem of a damaged capsule instead.
func Open(path string) (*Capsule, error) {
	return OpenWithLimits(path, Limits{})
}

// OpenWithLimits is Open with explicit limits for a tar.
func OpenWithLimits(path string, lim Limits) (*Capsule, error) {
	src, err := openSource(path, lim)
	if err != nil {
		return nil, err
	}
	data, err := readAll(src, ManifestFile, MaxManifestSize)
	if err != nil {
		src.close()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w: no %s", path, ErrNotCapsule, ManifestFile)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		src.close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return openedCapsule(path, m, src), nil
}

// Close releases the capsule's tar, if it was opened from one.
func (c *Capsule) Close() error { return c.src.close() }

// ID is the agent id.
func (c *Capsule) ID() string { return c.Manifest().ID }

// betweenReads, if set (by a test), runs after ReadFile found NAME other
// than the manifest lists it, before it looks for NAME.next.
var betweenReads func()

// ReadFile returns the content of one of the capsule's files. In a folder
// where an update was committed but not yet installed (see commit), it
// returns the committed content, also when the update installs it as it
// reads.
func (c *Capsule) ReadFile(name string) ([]byte, error) {
	limit := int64(maxSmallFile)
	if name == JournalFile {
		limit = maxJournal
	}
	data, err := readAll(c.src, name, limit)
	if err != nil {
		return nil, err
	}
	want, listed := c.Manifest().Files[name]
	if d, ok := c.src.(dirSource); ok && listed && name != JournalFile && entryOf(data) != want {
		if betweenReads != nil {
			betweenReads()
		}
		if next, err := os.ReadFile(filepath.Join(d.dir, filepath.FromSlash(name)) + nextSuffix); err == nil && entryOf(next) == want {
			return next, nil
		}
		// The update that wrote NAME.next renamed it over NAME between the
		// two reads: NAME holds what the manifest lists now.
		if again, err := readAll(c.src, name, limit); err == nil && entryOf(again) == want {
			return again, nil
		}
	}
	return data, nil
}

// Journal returns the journal's events in file order. Bad lines are an
// error naming the line; a torn tail is ignored.
func (c *Capsule) Journal() ([]*journal.Event, error) {
	data, err := c.ReadFile(JournalFile)
	if err != nil {
		return nil, err
	}
	events, bad, _ := journal.Decode(data)
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s: %w", JournalFile, bad[0])
	}
	return events, nil
}

// Agent returns the parsed agent.json.
func (c *Capsule) Agent() (Agent, error) {
	data, err := c.ReadFile(AgentFile)
	if err != nil {
		return Agent{}, err
	}
	return ParseAgent(data)
}

// ErrUnaccepted means an editable file was edited by hand and the edit
// not accepted: it does not match the manifest.
var ErrUnaccepted = errors.New("edited by hand and not accepted")

// AcceptedAgent returns agent.json as the manifest lists it: an edit not
// accepted is refused with ErrUnaccepted, never used. What runs the agent
// reads this, so a hand edit takes effect only once accepted (and signed).
func (c *Capsule) AcceptedAgent() (Agent, error) {
	data, err := c.ReadFile(AgentFile)
	if err != nil {
		return Agent{}, err
	}
	if entryOf(data) != c.Manifest().Files[AgentFile] {
		return Agent{}, fmt.Errorf("%s: %w: accept the edit (tern capsule accept) or undo it", AgentFile, ErrUnaccepted)
	}
	return ParseAgent(data)
}

// AcceptedEnvironment is AcceptedAgent for environment/spec.json: what
// runs a shell call reads it, so that a hand edit (the secrets a call
// gets, say) takes effect only once accepted.
func (c *Capsule) AcceptedEnvironment() (EnvSpec, error) {
	data, err := c.ReadFile(EnvironmentFile)
	if err != nil {
		return EnvSpec{}, err
	}
	if entryOf(data) != c.Manifest().Files[EnvironmentFile] {
		return EnvSpec{}, fmt.Errorf("%s: %w: accept the edit (tern capsule accept) or undo it", EnvironmentFile, ErrUnaccepted)
	}
	return ParseEnvSpec(data)
}

// Environment returns the parsed environment spec.
func (c *Capsule) Environment() (EnvSpec, error) {
	data, err := c.ReadFile(EnvironmentFile)
	if err != nil {
		return EnvSpec{}, err
	}
	return ParseEnvSpec(data)
}

// Snapshot returns the parsed workspace snapshot.
func (c *Capsule) Snapshot() (*Snapshot, error) {
	data, err := c.ReadFile(SnapshotFile)
	if err != nil {
		return nil, err
	}
	return ParseSnapshot(data)
}

// OpenBlob opens the blob with the given sha256 hex name. The caller checks
// the content (materialize does, as it copies).
func (c *Capsule) OpenBlob(hexSum string) (io.ReadCloser, int64, error) {
	return c.src.open(BlobPath(hexSum))
}

// ReadBlob returns the bytes of the blob cid names, checked against its
// hash; a blob over limit bytes is refused unread.
func (c *Capsule) ReadBlob(cid string, limit int64) ([]byte, error) {
	sum, err := ParseBlobCID(cid)
	if err != nil {
		return nil, err
	}
	r, size, err := c.OpenBlob(sum)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if size > limit {
		return nil, fmt.Errorf("blob %s is %d bytes, over the %d a request may carry", cid, size, limit)
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
		return nil, fmt.Errorf("blob %s: %w", cid, ErrHashMismatch)
	}
	return data, nil
}

// sameBytes reports whether two files of two capsules hold the same bytes.
func sameBytes(a, b *Capsule, name string) (bool, []byte, error) {
	da, err := a.ReadFile(name)
	if err != nil {
		return false, nil, err
	}
	db, err := b.ReadFile(name)
	if err != nil {
		return false, nil, err
	}
	return bytes.Equal(da, db), da, nil
}
