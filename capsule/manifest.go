package capsule

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tern-dev/tern/journal"
)

// MaxManifestSize bounds manifest.json. A capsule with a million blobs needs
// about 110 MB; anything bigger is refused before it is parsed.
const MaxManifestSize = 128 << 20

// FileEntry is what the manifest records of one file. For the journal, the
// one append-only file, it records the sealed prefix: the first Size bytes
// hash to SHA256, and whatever follows must be whole, valid events.
type FileEntry struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Holder names the machine that holds the agent and the epoch it holds it
// under. A capsule made offline is held by its creator at epoch 0.
type Holder struct {
	Peer  string `json:"peer"`
	Epoch uint64 `json:"epoch"`
}

// Signature attests an exported state: an ed25519 signature by Signer over
// the canonical manifest without its digest and signature fields.
type Signature struct {
	Signer string `json:"signer"`
	Sig    string `json:"sig"`
}

// Manifest is manifest.json. Its bytes on disk are always its canonical
// RFC 8785 encoding (see Encode); Digest is the sha256 hex of that encoding
// with the digest field left out, so any change to the file is caught.
type Manifest struct {
	Format    string               `json:"format"`
	ID        string               `json:"id"`
	Holder    Holder               `json:"holder"`
	Files     map[string]FileEntry `json:"files"`
	Signature *Signature           `json:"signature,omitempty"`
	Digest    string               `json:"digest,omitempty"`
}

// Errors a manifest can fail with; match with errors.Is.
var (
	ErrFutureFormat = errors.New("capsule format is newer than this tern understands")
	ErrNotCapsule   = errors.New("not a tern capsule")
	ErrBadSignature = errors.New("signature does not verify")
	// ErrNotCanonical: the manifest's bytes are not their RFC 8785 encoding.
	ErrNotCanonical = errors.New("manifest is not byte-exact canonical JSON (RFC 8785)")
	// ErrInvalidManifest: a field is unknown, missing, misnamed or out of
	// range (the agent id, a peer ID, a file name, a hash, a size).
	ErrInvalidManifest = errors.New("invalid manifest")
	// ErrBadDigest: the digest field is not the hash of the rest.
	ErrBadDigest = errors.New("manifest digest does not match its content")
)

// maxSafeInt is the largest integer every JSON reader holds exactly (2^53-1).
const maxSafeInt = 1<<53 - 1

// Encode sets m.Digest and returns the canonical bytes of m, exactly what
// manifest.json holds.
func (m *Manifest) Encode() ([]byte, error) {
	m.Format = Format
	c := *m
	c.Digest = ""
	b, err := c.canonical()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	m.Digest = hex.EncodeToString(sum[:])
	// "digest" sorts before every other key (RFC 8785 orders members by
	// name), and format is always there: the canonical manifest is the one
	// without the digest, with the digest as its first member. (Encoding it
	// again would double the cost of a commit of a large manifest.)
	out := make([]byte, 0, len(b)+len(m.Digest)+len(`{"digest":"",`))
	out = append(append(append(out, `{"digest":"`...), m.Digest...), `",`...)
	return append(out, b[1:]...), nil
}

// signedBytes are the bytes a signature covers: the canonical manifest
// without digest and signature.
func (m *Manifest) signedBytes() ([]byte, error) {
	c := *m
	c.Digest, c.Signature = "", nil
	return c.canonical()
}

// Sign adds a signature by s over the manifest's content. Call Encode after.
func (m *Manifest) Sign(s journal.Signer) error {
	m.Signature = nil
	b, err := m.signedBytes()
	if err != nil {
		return err
	}
	sig, err := s.Sign(b)
	if err != nil {
		return fmt.Errorf("sign manifest: %w", err)
	}
	m.Signature = &Signature{Signer: s.Machine(), Sig: base64.StdEncoding.EncodeToString(sig)}
	return nil
}

// CheckSignature verifies the manifest's signature and returns the signer's
// peer ID. It returns "" and no error for an unsigned manifest. The signer
// must be a machine's peer ID in its canonical spelling (see
// journal.MachineKey), and sig the standard base64 of a 64-byte ed25519
// signature; anything else wraps ErrBadSignature.
func (m *Manifest) CheckSignature() (string, error) {
	if m.Signature == nil {
		return "", nil
	}
	signer := m.Signature.Signer
	pub, err := journal.MachineKey(signer)
	if err != nil {
		return "", fmt.Errorf("signature: signer: %v: %w", err, ErrBadSignature)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(m.Signature.Sig)
	if err != nil || len(sig) != ed25519.SignatureSize || base64.StdEncoding.EncodeToString(sig) != m.Signature.Sig {
		return "", fmt.Errorf("signature: sig is not the standard base64 of an ed25519 signature: %w", ErrBadSignature)
	}
	b, err := m.signedBytes()
	if err != nil {
		return "", err
	}
	if !ed25519.Verify(pub, b, sig) {
		return "", fmt.Errorf("signature by %s: %w", signer, ErrBadSignature)
	}
	return signer, nil
}

// ParseManifest reads manifest.json strictly: the format is checked first
// (a newer one gets ErrFutureFormat), then the bytes must be exactly their
// own canonical encoding, every field known, every path one the format
// allows, every layout file listed and the digest right.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrInvalidManifest, len(data), MaxManifestSize)
	}
	// What tern wrote is read in one pass and taken once it encodes back to
	// the same bytes; anything else goes through each check in turn, for
	// the error that names what is wrong.
	if m := readCanonical(data); m != nil && m.Format == Format && m.check() == nil {
		digest := m.Digest
		if again, err := m.Encode(); err == nil && m.Digest == digest && bytes.Equal(again, data) {
			return m, nil
		}
	}
	return parseManifestChecked(data)
}

// parseManifestChecked is ParseManifest without its fast path: each check
// in turn, with the error of the first that fails.
func parseManifestChecked(data []byte) (*Manifest, error) {
	// A map, not a struct: encoding/json would also take "Format" or
	// "FORMAT" for the field, and field names are exact.
	var head map[string]json.RawMessage
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%w: manifest is not a JSON object: %v", ErrNotCapsule, err)
	}
	var f string
	if raw, ok := head["format"]; !ok || json.Unmarshal(raw, &f) != nil {
		return nil, fmt.Errorf("%w: manifest has no format field (a string)", ErrNotCapsule)
	}
	if f != Format {
		if strings.HasPrefix(f, "tern.capsule/") {
			return nil, fmt.Errorf("%w: manifest format %q, this tern reads %q; upgrade tern", ErrFutureFormat, f, Format)
		}
		return nil, fmt.Errorf("%w: manifest format %q, expected %q", ErrNotCapsule, f, Format)
	}
	canon, err := journal.Canonical(data)
	if err != nil {
		return nil, fmt.Errorf("%w: not valid JSON: %v", ErrInvalidManifest, err)
	}
	if !bytes.Equal(canon, data) {
		return nil, fmt.Errorf("%w: it was edited or damaged", ErrNotCanonical)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidManifest, err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidManifest, err)
	}
	// The digest and signature are computed over the decoded manifest, so the
	// bytes must be exactly its encoding: JSON's case-insensitive field
	// matching must not let "Epoch" stand in for "epoch".
	digest := m.Digest
	again, err := m.Encode() // sets m.Digest to the content's hash
	if err != nil {
		return nil, err
	}
	if m.Digest != digest {
		return nil, fmt.Errorf("%w: the digest is %q, the content hashes to %q: the manifest was altered", ErrBadDigest, digest, m.Digest)
	}
	if !bytes.Equal(again, data) {
		return nil, fmt.Errorf("%w: not in the form tern writes (a field name or value was altered)", ErrInvalidManifest)
	}
	return &m, nil
}

func (m *Manifest) check() error {
	if m.ID == "" {
		return fmt.Errorf("no agent id")
	}
	if err := checkAgentID(m.ID); err != nil {
		return err
	}
	if _, err := journal.MachineKey(m.Holder.Peer); err != nil {
		return fmt.Errorf("holder peer: %v", err)
	}
	if m.Holder.Epoch > maxSafeInt {
		return fmt.Errorf("holder epoch %d is over 2^53-1", m.Holder.Epoch)
	}
	if m.Signature != nil {
		if _, err := journal.MachineKey(m.Signature.Signer); err != nil {
			return fmt.Errorf("signature signer: %v", err)
		}
	}
	for name, e := range m.Files {
		if err := checkName(name); err != nil {
			return fmt.Errorf("files: %w", err)
		}
		if !isSHA256Hex(e.SHA256) {
			return fmt.Errorf("files: %s: sha256 %q is not 64 lowercase hex digits", name, e.SHA256)
		}
		if e.Size < 0 || e.Size > maxSafeInt {
			return fmt.Errorf("files: %s: size %d is not from 0 to 2^53-1", name, e.Size)
		}
		if h := blobName(name); h != "" && h != e.SHA256 {
			return fmt.Errorf("files: %s: listed with sha256 %s, but a blob is named by its own hash", name, e.SHA256)
		}
	}
	for _, name := range Layout {
		if _, ok := m.Files[name]; !ok {
			return fmt.Errorf("files: %s is missing", name)
		}
	}
	return nil
}

// Names returns the manifest's file names in sorted order.
func (m *Manifest) Names() []string {
	names := make([]string, 0, len(m.Files))
	for n := range m.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// canonical returns the RFC 8785 encoding of m, written member by member
// in canonical order: the digest and the signature when they are set, every
// file sorted by name. (Through encoding/json and journal.Canonical, a
// manifest of 20,000 files cost a peer a third of its time taking a change
// of 100.) A string that is not UTF-8 or a number beyond 2^53-1 is an
// error: no reader would get it back exactly.
func (m *Manifest) canonical() ([]byte, error) {
	names := make([]string, 0, len(m.Files))
	for name := range m.Files {
		names = append(names, name)
	}
	slices.SortFunc(names, journal.CompareMemberNames)
	w := canonicalWriter{b: make([]byte, 0, 256+len(names)*(len(`"":{"sha256":"","size":},`)+64+48))}
	w.raw(`{`)
	if m.Digest != "" {
		w.raw(`"digest":`)
		w.string(m.Digest)
		w.raw(`,`)
	}
	w.raw(`"files":{`)
	for i, name := range names {
		if i > 0 {
			w.raw(`,`)
		}
		e := m.Files[name]
		w.string(name)
		w.raw(`:{"sha256":`)
		w.string(e.SHA256)
		w.raw(`,"size":`)
		w.int(e.Size)
		w.raw(`}`)
	}
	w.raw(`},"format":`)
	w.string(m.Format)
	w.raw(`,"holder":{"epoch":`)
	w.uint(m.Holder.Epoch)
	w.raw(`,"peer":`)
	w.string(m.Holder.Peer)
	w.raw(`},"id":`)
	w.string(m.ID)
	if m.Signature != nil {
		w.raw(`,"signature":{"sig":`)
		w.string(m.Signature.Sig)
		w.raw(`,"signer":`)
		w.string(m.Signature.Signer)
		w.raw(`}`)
	}
	w.raw(`}`)
	return w.b, w.err
}

// canonicalWriter appends canonical JSON tokens, keeping the first error.
type canonicalWriter struct {
	b   []byte
	err error
}

func (w *canonicalWriter) raw(s string) { w.b = append(w.b, s...) }

func (w *canonicalWriter) string(s string) {
	b, err := journal.AppendCanonicalString(w.b, s)
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("manifest: %q: %w", s, err)
	}
	w.b = b
}

func (w *canonicalWriter) int(n int64) {
	if (n > maxSafeInt || n < -maxSafeInt) && w.err == nil {
		w.err = fmt.Errorf("manifest: %d is beyond 2^53-1", n)
	}
	w.b = strconv.AppendInt(w.b, n, 10)
}

func (w *canonicalWriter) uint(n uint64) {
	if n > maxSafeInt && w.err == nil {
		w.err = fmt.Errorf("manifest: %d is beyond 2^53-1", n)
	}
	w.b = strconv.AppendUint(w.b, n, 10)
}

func entryOf(data []byte) FileEntry {
	sum := sha256.Sum256(data)
	return FileEntry{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

// readCanonical reads data as Encode writes a manifest, member by member,
// or returns nil where it differs from that form or a string holds an
// escape (both left to encoding/json). Whatever it returns, the caller
// takes it only if it encodes back to data, so it need not check what
// Encode would write differently (the order of names, a leading zero, a
// name twice). Its strings share one copy of data.
func readCanonical(data []byte) *Manifest {
	r := canonicalReader{s: string(data), ok: true}
	// Room for the entries data can hold: each takes more than minEntry
	// bytes, whatever the count of "sha256" in it says.
	const minEntry = len(`"":{"sha256":"","size":0},`) + 64
	m := &Manifest{Files: make(map[string]FileEntry, min(bytes.Count(data, []byte(`"sha256"`)), len(data)/minEntry))}
	r.lit(`{"digest":`)
	m.Digest = r.str()
	r.lit(`,"files":{`)
	for more := !r.next('}'); more && r.ok; more = r.next(',') {
		name := r.str()
		r.lit(`:{"sha256":`)
		sum := r.str()
		r.lit(`,"size":`)
		m.Files[name] = FileEntry{SHA256: sum, Size: int64(r.num())}
		r.lit(`}`)
	}
	r.lit(`}`)
	r.lit(`,"format":`)
	m.Format = r.str()
	r.lit(`,"holder":{"epoch":`)
	m.Holder.Epoch = r.num()
	r.lit(`,"peer":`)
	m.Holder.Peer = r.str()
	r.lit(`},"id":`)
	m.ID = r.str()
	if r.next(',') {
		var sig Signature
		r.lit(`"signature":{"sig":`)
		sig.Sig = r.str()
		r.lit(`,"signer":`)
		sig.Signer = r.str()
		r.lit(`}`)
		m.Signature = &sig
	}
	r.lit(`}`)
	if !r.ok || r.i != len(r.s) {
		return nil
	}
	return m
}

// canonicalReader reads s from i on; ok turns false at the first byte
// that is not what was asked for, and stays false.
type canonicalReader struct {
	s  string
	i  int
	ok bool
}

// lit reads exactly want.
func (r *canonicalReader) lit(want string) {
	if !r.ok || !strings.HasPrefix(r.s[r.i:], want) {
		r.ok = false
		return
	}
	r.i += len(want)
}

// next reads c if it comes next and reports whether it did.
func (r *canonicalReader) next(c byte) bool {
	if r.ok && r.i < len(r.s) && r.s[r.i] == c {
		r.i++
		return true
	}
	return false
}

// str reads a string without escapes.
func (r *canonicalReader) str() string {
	if !r.next('"') {
		r.ok = false
		return ""
	}
	end := strings.IndexByte(r.s[r.i:], '"')
	if end < 0 {
		r.ok = false
		return ""
	}
	v := r.s[r.i : r.i+end]
	if strings.IndexByte(v, '\\') >= 0 {
		r.ok = false
		return ""
	}
	r.i += end + 1
	return v
}

// num reads a whole number of up to 16 digits (2^53-1 has 16).
func (r *canonicalReader) num() uint64 {
	var n uint64
	start := r.i
	for r.ok && r.i < len(r.s) && r.s[r.i] >= '0' && r.s[r.i] <= '9' && r.i-start < 16 {
		n = n*10 + uint64(r.s[r.i]-'0')
		r.i++
	}
	if r.i == start {
		r.ok = false
	}
	return n
}
