package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/journal"
)

// KeyFile is the node's ed25519 private key inside $TERN_HOME, in libp2p's
// protobuf encoding, readable by its owner only.
const KeyFile = "node.key"

// Home returns the tern data folder: $TERN_HOME if set, else the platform's
// data folder (~/.local/share/tern on Linux, ~/Library/Application
// Support/tern on macOS, %LocalAppData%\tern on Windows).
func Home() (string, error) {
	if h := os.Getenv("TERN_HOME"); h != "" {
		return h, nil
	}
	if runtime.GOOS == "linux" || runtime.GOOS == "freebsd" || runtime.GOOS == "openbsd" {
		if x := os.Getenv("XDG_DATA_HOME"); x != "" {
			return filepath.Join(x, "tern"), nil
		}
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no data folder: set TERN_HOME (%v)", err)
		}
		return filepath.Join(home, ".local", "share", "tern"), nil
	}
	if runtime.GOOS == "windows" {
		if d := os.Getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "tern"), nil
		}
	}
	d, err := os.UserConfigDir() // ~/Library/Application Support on macOS
	if err != nil {
		return "", fmt.Errorf("no data folder: set TERN_HOME (%v)", err)
	}
	return filepath.Join(d, "tern"), nil
}

// Identity is this machine's key. Its peer ID is the machine id in journal
// chains and the node's libp2p identity. It signs journal events as that
// machine (journal.Signer: Machine and Sign) and is safe for concurrent
// use.
type Identity struct {
	*journal.KeySigner
	priv crypto.PrivKey
	id   peer.ID
}

// ErrNoKey means home holds capsules, peers or chain records bound to a
// machine key, but not the key: it was deleted or not restored.
var ErrNoKey = errors.New("this machine's key is missing")

// LoadIdentity reads the key in home, creating home (0700) and a fresh
// ed25519 key (0600) on first use. Two processes starting at once end up
// with the same key. A key file readable by others is refused, and so is
// a missing key in a home that holds capsules, peers or chain records
// (ErrNoKey): a new key there would silently make this machine someone
// else to its peers and its chains; NewHomeIdentity makes one on purpose.
func LoadIdentity(home string) (*Identity, error) {
	path := filepath.Join(home, KeyFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if what := inUse(home); what != "" {
			return nil, fmt.Errorf("%w: %s is missing but %s holds %s. Restore node.key from a backup of this machine, or start a new identity on purpose with: tern node --new-identity (paired machines must then pair the new peer ID)", ErrNoKey, path, home, what)
		}
		if err := createKey(home, path); err != nil {
			return nil, err
		}
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	return parseKey(path, data)
}

// NewHomeIdentity makes a new key for home on purpose, where LoadIdentity
// refuses to: the old key is missing but the home holds capsules or
// peers. An existing key is never replaced.
func NewHomeIdentity(home string) (*Identity, error) {
	path := filepath.Join(home, KeyFile)
	if _, err := os.Stat(path); err == nil {
		return nil, fmt.Errorf("%s exists: this machine already has an identity; move the file away first if you really mean to replace it (paired machines will no longer know this one)", path)
	}
	if err := createKey(home, path); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	return parseKey(path, data)
}

// parseKey checks and decodes a key file's content.
func parseKey(path string, data []byte) (*Identity, error) {
	const todo = "restore it from a backup of this machine, or move it away and start a new identity with: tern node --new-identity (paired machines must then pair the new peer ID)"
	if st, err := os.Stat(path); err == nil && runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("node key %s is readable by others (mode %04o); run: chmod 600 %s", path, st.Mode().Perm(), path)
	}
	priv, err := crypto.UnmarshalPrivateKey(data)
	if err != nil {
		return nil, damagedHomeFile(path, err, todo)
	}
	if priv.Type() != crypto.Ed25519 {
		return nil, damagedHomeFile(path, fmt.Errorf("the key is %v, not ed25519", priv.Type()), todo)
	}
	return newIdentity(priv)
}

// NewIdentity returns a fresh identity that lives only in memory (tests, demo).
func NewIdentity() (*Identity, error) {
	priv, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, err
	}
	return newIdentity(priv)
}

func newIdentity(priv crypto.PrivKey) (*Identity, error) {
	ks, err := journal.NewKeySigner(priv)
	if err != nil {
		return nil, err
	}
	id, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return &Identity{KeySigner: ks, priv: priv, id: id}, nil
}

// createKey writes a new key to path unless one appears there first: the
// key goes to a temporary file that is hard-linked to path, which fails if
// path already exists.
func createKey(home, path string) error {
	priv, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return err
	}
	return writeKey(home, path, priv)
}

// SaveIdentity gives the new home the identity id, as if it had made it:
// one machine's key in a second home (the demo's nodes sign as the
// identities of its offline steps). An existing key is never replaced.
func SaveIdentity(home string, id *Identity) error {
	path := filepath.Join(home, KeyFile)
	if err := writeKey(home, path, id.priv); err != nil {
		return fmt.Errorf("save identity in %s: %w", home, err)
	}
	return nil
}

// writeKey writes priv to path unless a key appears there first.
func writeKey(home, path string, priv crypto.PrivKey) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", home, err)
	}
	data, err := crypto.MarshalPrivateKey(priv)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(home, ".node.key-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write node key: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("write node key: %w", err)
	}
	d, err := os.Open(home)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// PeerID returns the libp2p peer ID.
func (i *Identity) PeerID() peer.ID { return i.id }

// PrivKey returns the private key, for the libp2p host.
func (i *Identity) PrivKey() crypto.PrivKey { return i.priv }
