package capsule

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multibase"
)

// keySigner signs with any libp2p key, ed25519 or not.
type keySigner struct{ k crypto.PrivKey }

func (s keySigner) Machine() string {
	id, _ := peer.IDFromPrivateKey(s.k)
	return id.String()
}
func (s keySigner) Sign(b []byte) ([]byte, error) { return s.k.Sign(b) }

// otherSpelling is a peer ID written as a CIDv1 (libp2p-key codec) in the
// given base: the same key, another string.
func otherSpelling(t *testing.T, id string, base multibase.Encoding) string {
	t.Helper()
	pid, err := peer.Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	s, err := peer.ToCid(pid).StringOfBase(base)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseManifestAcceptsOnlyCanonicalMachinePeerIDs(t *testing.T) {
	s := newSigner(t)
	base := *mustOpen(t, emptyCapsule(t, s, "helper")).Manifest()
	secp, _, err := crypto.GenerateSecp256k1Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(m *Manifest)
		want error
	}{
		{"a holder spelt as a CID is refused", func(m *Manifest) { m.Holder.Peer = otherSpelling(t, s.Machine(), multibase.Base32) }, ErrInvalidManifest},
		{"a holder spelt in base36 is refused", func(m *Manifest) { m.Holder.Peer = otherSpelling(t, s.Machine(), multibase.Base36) }, ErrInvalidManifest},
		{"a holder with a secp256k1 key is refused", func(m *Manifest) { m.Holder.Peer = keySigner{secp}.Machine() }, ErrInvalidManifest},
		{"a holder epoch over 2^53-1 is refused", func(m *Manifest) { m.Holder.Epoch = 1 << 53 }, ErrInvalidManifest},
		{"a file size over 2^53-1 is refused", func(m *Manifest) { m.Files[NotesFile] = FileEntry{SHA256: m.Files[NotesFile].SHA256, Size: 1 << 60} }, ErrInvalidManifest},
		{"a signer spelt as a CID is refused", func(m *Manifest) {
			if err := m.Sign(s); err != nil {
				t.Fatal(err)
			}
			m.Signature.Signer = otherSpelling(t, s.Machine(), multibase.Base32)
		}, ErrInvalidManifest},
		{"a signer with a secp256k1 key is refused even when its signature verifies", func(m *Manifest) {
			if err := m.Sign(keySigner{secp}); err != nil {
				t.Fatal(err)
			}
		}, ErrInvalidManifest},
		{"a wrong digest is refused", func(m *Manifest) { m.Digest = "00" }, ErrBadDigest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base
			m.Files = make(map[string]FileEntry)
			for k, v := range base.Files {
				m.Files[k] = v
			}
			tt.edit(&m)
			digest := m.Digest
			data, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == ErrBadDigest {
				data = []byte(string(data[:len(`{"digest":"`)]) + digest + string(data[len(`{"digest":"`)+64:]))
			}
			_, err = ParseManifest(data)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestCheckSignatureAcceptsOnlyTheStandardSpellingOfASignature(t *testing.T) {
	s := newSigner(t)
	m := *mustOpen(t, emptyCapsule(t, s, "helper")).Manifest()
	if err := m.Sign(s); err != nil {
		t.Fatal(err)
	}
	good := m.Signature.Sig
	for name, sig := range map[string]string{
		"the signature as signed":   good,
		"a line break inside":       good[:40] + "\n" + good[40:],
		"no padding":                good[:len(good)-2],
		"padding bits set":          good[:len(good)-3] + string(good[len(good)-3]+1) + "==",
		"another signature's bytes": "A" + good[1:],
	} {
		t.Run(name, func(t *testing.T) {
			m.Signature.Sig = sig
			data, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := ParseManifest(data)
			if err != nil {
				t.Fatal(err)
			}
			signer, err := parsed.CheckSignature()
			if sig == good {
				if err != nil || signer != s.Machine() {
					t.Fatalf("got %q, %v", signer, err)
				}
				return
			}
			if !errors.Is(err, ErrBadSignature) {
				t.Fatalf("got %q, %v; want %v", signer, err, ErrBadSignature)
			}
		})
	}
}

func TestParseManifestReadsTheFormatFieldByItsExactName(t *testing.T) {
	s := newSigner(t)
	data, err := os.ReadFile(filepath.Join(emptyCapsule(t, s, "helper"), ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Format", "FORMAT", "forMat"} {
		_, err := ParseManifest(bytes.Replace(data, []byte(`"format":`), []byte(`"`+name+`":`), 1))
		if !errors.Is(err, ErrNotCapsule) {
			t.Errorf("%s: got %v, want %v", name, err, ErrNotCapsule)
		}
	}
}

// Encode writes the digest into the canonical bytes without encoding the
// manifest twice: what it writes is still the RFC 8785 encoding of the
// manifest with that digest, signed or not.
func TestEncodeIsTheCanonicalManifestWithItsDigest(t *testing.T) {
	s := newSigner(t)
	m := Manifest{ID: "01234567-89ab-8def-8123-456789abcdef", Holder: Holder{Peer: s.Machine(), Epoch: 3},
		Files: map[string]FileEntry{"agent.json": {SHA256: strings.Repeat("ab", 32), Size: 7}, BlobPath(strings.Repeat("cd", 32)): {SHA256: strings.Repeat("cd", 32), Size: 1}}}
	for _, sign := range []bool{false, true} {
		if sign {
			if err := m.Sign(s); err != nil {
				t.Fatal(err)
			}
		}
		got, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		want, err := canonical(&m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("signed %v: Encode wrote\n%s\nwant\n%s", sign, got, want)
		}
	}
}
