package capsule

import (
	"crypto/rand"
	"errors"
	"fmt"
)

// NewLegacy creates a capsule as tern wrote them before members: a random
// agent id (a version 4 UUID), an empty journal and no first member, held
// by holder (a peer ID). Any machine's events count in it until a node
// names its members.
func NewLegacy(dir, name, holder string) (*Capsule, error) {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	return newCapsule(dir, id, DefaultAgent(name), peerName(holder), nil)
}

// peerName stands for a machine by its peer ID alone; it cannot sign.
type peerName string

func (p peerName) Machine() string             { return string(p) }
func (p peerName) Sign([]byte) ([]byte, error) { return nil, errors.New("a bare peer ID cannot sign") }
