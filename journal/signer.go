package journal

import (
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Signer signs events for one machine. Machine returns the libp2p peer ID
// (string form) of an ed25519 key, and Sign signs msg with that key. Sign
// may be called from several goroutines at once.
type Signer interface {
	Machine() string
	Sign(msg []byte) ([]byte, error)
}

// KeySigner is a Signer backed by a libp2p ed25519 private key.
type KeySigner struct {
	key     crypto.PrivKey
	machine string
}

var _ Signer = (*KeySigner)(nil)

// NewKeySigner returns a Signer for an ed25519 private key; other key types
// are refused, since a machine's peer ID must embed its public key.
func NewKeySigner(k crypto.PrivKey) (*KeySigner, error) {
	if k == nil {
		return nil, errors.New("new key signer: no key")
	}
	if k.Type() != pb.KeyType_Ed25519 {
		return nil, fmt.Errorf("new key signer: %s key: journal events are signed with ed25519 keys", k.Type())
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("new key signer: %w", err)
	}
	return &KeySigner{key: k, machine: id.String()}, nil
}

// Machine returns the peer ID of the key.
func (s *KeySigner) Machine() string { return s.machine }

// Sign signs msg with the key.
func (s *KeySigner) Sign(msg []byte) ([]byte, error) { return s.key.Sign(msg) }
