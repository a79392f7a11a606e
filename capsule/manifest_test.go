package capsule

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multibase"

	"github.com/tern-dev/tern/journal"
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
			data := encodeThroughJSON(t, &m) // Encode refuses numbers beyond 2^53-1
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
// manifest twice, and writes them itself rather than through encoding/json
// and a canonicalizer: what it writes is still the RFC 8785 encoding of the
// manifest with that digest, signed or not, whatever its file names.
func TestEncodeIsTheCanonicalManifestWithItsDigest(t *testing.T) {
	s := newSigner(t)
	m := Manifest{ID: "01234567-89ab-8def-8123-456789abcdef", Holder: Holder{Peer: s.Machine(), Epoch: 3},
		Files: map[string]FileEntry{"agent.json": {SHA256: strings.Repeat("ab", 32), Size: 7}, BlobPath(strings.Repeat("cd", 32)): {SHA256: strings.Repeat("cd", 32), Size: 1}}}
	// Names that sort differently by UTF-16 code units than by UTF-8 bytes
	// (U+1F600 is a surrogate pair, below U+FB01 in UTF-16, above it in
	// UTF-8), and that need escapes, or must not get any.
	for i, name := range []string{"\U0001F600", "\uFB01", "é", "a\"b", "tab\there", "\x01", "\u2028<&>", "Z", "a/b"} {
		m.Files[name] = FileEntry{SHA256: strings.Repeat("ef", 32), Size: int64(i) << 40}
	}
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
		if want := canonicalThroughJSON(t, &m); !bytes.Equal(got, want) {
			t.Fatalf("signed %v: Encode wrote\n%s\nwant\n%s", sign, got, want)
		}
	}
}

// A manifest whose bytes no reader would get back exactly is not encoded.
func TestEncodeRefusesWhatJSONCannotCarryExactly(t *testing.T) {
	for what, m := range map[string]Manifest{
		"a size beyond 2^53-1":   {Files: map[string]FileEntry{"a": {Size: 1 << 53}}},
		"an epoch beyond 2^53-1": {Holder: Holder{Epoch: 1 << 53}},
		"a name not UTF-8":       {Files: map[string]FileEntry{"\xff": {}}},
	} {
		if _, err := m.Encode(); err == nil {
			t.Errorf("%s: encoded", what)
		}
	}
}

func FuzzEncodeIsCanonical(f *testing.F) {
	f.Add("agent.json", "\U0001F600", int64(7), uint64(3))
	f.Add("\uFB01", "\\\"\x7f", int64(0), uint64(1<<53-1))
	f.Fuzz(func(t *testing.T, a, b string, size int64, epoch uint64) {
		m := Manifest{ID: a, Holder: Holder{Peer: b, Epoch: epoch}, Files: map[string]FileEntry{a: {SHA256: b, Size: size}, b: {Size: -size}}}
		got, err := m.Encode()
		if !utf8.ValidString(a) || !utf8.ValidString(b) || epoch > maxSafeInt || size > maxSafeInt || size < -maxSafeInt {
			if err == nil {
				t.Fatalf("encoded %q, which JSON cannot carry exactly", got)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := canonicalThroughJSON(t, &m); !bytes.Equal(got, want) {
			t.Fatalf("Encode wrote\n%s\nwant\n%s", got, want)
		}
	})
}

// encodeThroughJSON is what Encode would write for m if it wrote numbers
// beyond 2^53-1 as a double does.
func encodeThroughJSON(t *testing.T, m *Manifest) []byte {
	t.Helper()
	m.Format = Format
	c := *m
	c.Digest = ""
	sum := sha256.Sum256(canonicalThroughJSON(t, &c))
	m.Digest = hex.EncodeToString(sum[:])
	return canonicalThroughJSON(t, m)
}

// canonicalThroughJSON is the manifest's canonical encoding the slow,
// general way: encoding/json, then journal.Canonical.
func canonicalThroughJSON(t testing.TB, m *Manifest) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := journal.Canonical(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// manifest20k is the manifest of a 10,000-file workspace: a blob a file,
// a listing a snapshot.
func manifest20k(b *testing.B) Manifest {
	m := Manifest{ID: "01234567-89ab-8def-8123-456789abcdef", Holder: Holder{Peer: newSigner(b).Machine(), Epoch: 3}, Files: map[string]FileEntry{}}
	for i := range 20000 {
		sum := sha256.Sum256([]byte(strconv.Itoa(i)))
		h := hex.EncodeToString(sum[:])
		m.Files[BlobPath(h)] = FileEntry{SHA256: h, Size: int64(i) * 977}
	}
	for _, name := range Layout {
		m.Files[name] = FileEntry{SHA256: strings.Repeat("ab", 32), Size: 7}
	}
	return m
}

// BenchmarkManifestEncode20k: manifest20k written by Encode and, side by
// side, the general way (encoding/json, then journal.Canonical).
func BenchmarkManifestEncode20k(b *testing.B) {
	m := manifest20k(b)
	b.Run("Encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.Encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("through encoding/json", func(b *testing.B) {
		for b.Loop() {
			canonicalThroughJSON(b, &m)
		}
	})
}

// BenchmarkParseManifest20k: manifest20k read back, with every check.
func BenchmarkParseManifest20k(b *testing.B) {
	m := manifest20k(b)
	data, err := m.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseManifest(data); err != nil {
			b.Fatal(err)
		}
	}
}

// ParseManifest reads what tern wrote in one pass; whatever the bytes, it
// gives what each check in turn gives: the same manifest, or an error
// where they give one.
func FuzzParseManifestAgreesWithEveryCheckInTurn(f *testing.F) {
	s := newSigner(f)
	m := Manifest{ID: "01234567-89ab-8def-8123-456789abcdef", Holder: Holder{Peer: s.Machine(), Epoch: 3}, Files: map[string]FileEntry{}}
	for _, name := range Layout {
		m.Files[name] = FileEntry{SHA256: strings.Repeat("ab", 32), Size: 7}
	}
	m.Files["workspace/é \U0001F600"] = FileEntry{SHA256: strings.Repeat("cd", 32), Size: 1 << 40}
	plain, err := m.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(plain)
	if err := m.Sign(s); err != nil {
		f.Fatal(err)
	}
	signed, err := m.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(signed)
	m.Files["a\"b\tc"] = FileEntry{SHA256: strings.Repeat("ef", 32)} // escapes: the checked way only
	escaped, _ := m.Encode()
	f.Add(escaped)
	for _, edit := range [][2]string{{`"size":7`, `"size":07`}, {`"epoch":3`, `"epoch":3.0`}, {`"size":7}`, `"size":7,"x":1}`},
		{`{"digest":`, `{ "digest":`}, {`"files":{`, `"Files":{`}, {`"agent.json"`, `"agent\u002ejson"`}} {
		f.Add([]byte(strings.Replace(string(signed), edit[0], edit[1], 1)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseManifest(data)
		want, werr := parseManifestChecked(data)
		if (err == nil) != (werr == nil) {
			t.Fatalf("ParseManifest: %v; each check in turn: %v", err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseManifest read %+v; each check in turn %+v", got, want)
		}
	})
}

// What Encode writes, signed or not, is read in one pass: the fast path
// is the path manifests take.
func TestWhatEncodeWritesIsReadInOnePass(t *testing.T) {
	s := newSigner(t)
	m := Manifest{ID: "01234567-89ab-8def-8123-456789abcdef", Holder: Holder{Peer: s.Machine(), Epoch: 3},
		Files: map[string]FileEntry{"\U0001F600": {SHA256: strings.Repeat("ab", 32), Size: 1 << 50}, "é": {SHA256: strings.Repeat("cd", 32)}}}
	for _, sign := range []bool{false, true} {
		if sign {
			if err := m.Sign(s); err != nil {
				t.Fatal(err)
			}
		}
		data, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if got := readCanonical(data); !reflect.DeepEqual(got, &m) {
			t.Fatalf("signed %v: read %+v, want %+v", sign, got, &m)
		}
	}
}

// A manifest's bytes do not make ParseManifest allocate much more than
// they are: the room it makes for entries is bounded by what the bytes
// can hold, whatever they repeat.
func TestParseManifestAllocatesNoMoreThanItsBytesCanHold(t *testing.T) {
	data := []byte(`{"digest":"","files":{"` + strings.Repeat(`"sha256"`, 1<<17) + `":{}}}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := ParseManifest(data); err == nil {
		t.Fatal("parsed")
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 8*uint64(len(data)) {
		t.Fatalf("parsing %d bytes allocated %d", len(data), n)
	}
}
