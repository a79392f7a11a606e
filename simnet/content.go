package simnet

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/tern-dev/tern/fencing"
)

// The model capsule: a few files, each with a version. The runner writes
// (bumps versions) before each migration; the other nodes keep the versions
// gossip gave them, so a target lacks only what changed: the manifest and
// the journal tail, sometimes a blob.
const numFiles = 4

var fileNames = [numFiles]string{"manifest.json", "memory/timeline_events.jsonl", "agent.json", "artifacts/blobs/0"}

// dataSize is the size of every model file.
const dataSize = 16

// versions is one copy of the capsule: a version per file.
type versions [numFiles]uint32

// contentTable holds the bytes and hashes of every file version, so that
// each is computed once and shared by every message. Bytes depend only on
// (file, version), so the table is kept from run to run.
type contentTable struct {
	data  [numFiles][][]byte
	sums  [numFiles][][32]byte
	arena []fencing.File // file lists of proposals, reused from run to run
}

func (c *contentTable) reset() { c.arena = c.arena[:0] }

// get returns the bytes and hash of version v of file i.
func (c *contentTable) get(i int, v uint32) ([]byte, [32]byte) {
	for uint32(len(c.data[i])) <= v {
		b := make([]byte, dataSize)
		binary.LittleEndian.PutUint32(b[0:], uint32(i))
		binary.LittleEndian.PutUint32(b[4:], uint32(len(c.data[i])))
		copy(b[8:], "capsule!")
		c.data[i] = append(c.data[i], b)
		c.sums[i] = append(c.sums[i], sha256.Sum256(b))
	}
	return c.data[i][v], c.sums[i][v]
}

// files lists the capsule at vs for a proposal. The list is never changed
// during the run (messages carrying it may be replayed).
func (c *contentTable) files(vs *versions) []fencing.File {
	if cap(c.arena)-len(c.arena) < numFiles {
		// A new block: lists already handed out keep the old one.
		c.arena = make([]fencing.File, 0, max(64, 2*cap(c.arena)))
	}
	k := len(c.arena)
	for i := 0; i < numFiles; i++ {
		_, sum := c.get(i, vs[i])
		c.arena = append(c.arena, fencing.File{Name: fileNames[i], Sum: sum, Size: dataSize})
	}
	return c.arena[k : k+numFiles : k+numFiles]
}

// versionOf decodes which file and version bytes made by get are.
func versionOf(b []byte) (file int, v uint32) {
	return int(binary.LittleEndian.Uint32(b[0:])), binary.LittleEndian.Uint32(b[4:])
}

func fileIndex(name string) int {
	for i, n := range fileNames {
		if n == name {
			return i
		}
	}
	return -1
}
