package capsule_test

// The test vectors under testdata/vectors are written by the code: fixed
// keys, fixed times and a fixed agent id, so the same code writes the same
// bytes. Without -update the tests fail if the code would write anything
// else, and check that the Go reader gives each vector the result
// expected.json names; the independent Python reader beside them,
// testdata/vectors/check.py, must give the same results.
//
//	go test ./capsule -run Vectors -update   # rewrite them; review the diff

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multibase"
	"github.com/multiformats/go-multihash"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors from what the code writes")

const vectorsDir = "../testdata/vectors"

// The checks a vector can fail, as expected.json and docs/FORMAT.md name
// them. "ok" means the reader accepts it.
const (
	checkOK              = "ok"
	checkInvalidEvent    = "invalid-event"
	checkNotCanonical    = "not-canonical"
	checkFutureFormat    = "future-format"
	checkBadSignature    = "bad-signature"
	checkBadID           = "bad-id"
	checkNotCapsule      = "not-capsule"
	checkInvalidManifest = "invalid-manifest"
	checkBadDigest       = "bad-digest"
	checkUnsafeTar       = "unsafe-tar"
	checkHashMismatch    = "hash-mismatch"
	checkTruncated       = "truncated"
	checkMissingFile     = "missing-file"
	checkUnlistedFile    = "unlisted-file"
	checkFork            = "fork"
	checkBrokenChain     = "broken-chain"
	checkNotMember       = "not-member"
	checkNoCustody       = "no-custody"
	checkInvalidContent  = "invalid-content"
	checkMissingBlob     = "missing-blob"
)

// vectorKey is a fixed ed25519 machine key, with every step from its seed
// to its peer ID.
type vectorKey struct {
	Name               string `json:"name"`
	Seed               string `json:"seed"`
	PublicKey          string `json:"public_key"`
	PublicKeyProtobuf  string `json:"public_key_protobuf"`
	Multihash          string `json:"multihash"`
	PeerID             string `json:"peer_id"`
	PrivateKeyProtobuf string `json:"private_key_protobuf"`

	priv ed25519.PrivateKey
}

func (k *vectorKey) Machine() string                 { return k.PeerID }
func (k *vectorKey) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(k.priv, msg), nil }

var _ journal.Signer = (*vectorKey)(nil)

// newVectorKey derives a key from a seed given in hex. The seeds are the
// secret keys of RFC 8032's first three ed25519 test vectors, so a reader
// can check its ed25519 against the RFC as well.
func newVectorKey(t *testing.T, name, seedHex string) *vectorKey {
	t.Helper()
	seed, err := hex.DecodeString(seedHex)
	if err != nil {
		t.Fatal(err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	lk, err := crypto.UnmarshalEd25519PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubProto, err := crypto.MarshalPublicKey(lk.GetPublic())
	if err != nil {
		t.Fatal(err)
	}
	privProto, err := crypto.MarshalPrivateKey(lk)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(lk)
	if err != nil {
		t.Fatal(err)
	}
	return &vectorKey{
		Name:               name,
		Seed:               seedHex,
		PublicKey:          hex.EncodeToString(priv.Public().(ed25519.PublicKey)),
		PublicKeyProtobuf:  hex.EncodeToString(pubProto),
		Multihash:          hex.EncodeToString([]byte(id)),
		PeerID:             id.String(),
		PrivateKeyProtobuf: hex.EncodeToString(privProto),
		priv:               priv,
	}
}

// vectorSet is the files of testdata/vectors and what reading each gives.
type vectorSet struct {
	files    map[string][]byte // path under testdata/vectors → bytes
	expected map[string]any    // path → "ok", a check, a list of checks, or a journalRead
}

// journalRead is what expected.json records of a journal vector (a capsule
// vector named journal-…): the checks it fails, and what a reader reads of
// its journal: how many events are readable and quarantined (journal.Readable)
// and the version vector (journal.VectorOf).
type journalRead struct {
	Checks      []string       `json:"checks"`
	Readable    int            `json:"readable"`
	Quarantined int            `json:"quarantined"`
	Vector      journal.Vector `json:"vector"`
}

func (v *vectorSet) add(t *testing.T, name string, data []byte, expect ...string) {
	t.Helper()
	if _, dup := v.files[name]; dup {
		t.Fatalf("vector %s twice", name)
	}
	v.files[name] = data
	if len(expect) == 1 {
		v.expected[name] = expect[0]
	} else {
		slices.Sort(expect)
		v.expected[name] = expect
	}
}

var (
	vectorTime    = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	vectorAgentID = "0f8fad5b-d9cb-469f-a165-70867728950e"
)

// buildVectors writes every vector with the code under test.
func buildVectors(t *testing.T) *vectorSet {
	t.Helper()
	v := &vectorSet{files: map[string][]byte{}, expected: map[string]any{}}
	a := newVectorKey(t, "a", "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
	b := newVectorKey(t, "b", "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb")
	third := newVectorKey(t, "c", "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7")
	keys, err := json.MarshalIndent(map[string]any{"keys": []*vectorKey{a, b, third}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	v.files["keys.json"] = append(keys, '\n')
	eventVectors(t, v, a)
	c := newVectorCapsule(t, a, b)
	manifestVectors(t, v, a, c)
	capsuleVectors(t, v, a, c)
	healVectors(t, v, a, b, c)
	activationVectors(t, v, a, b, third, c)
	memberVectors(t, v, a, b, third, c)
	exp, err := json.MarshalIndent(v.expected, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	v.files["expected.json"] = append(exp, '\n')
	return v
}

// newEvent makes an event with the code under test.
func newEvent(t *testing.T, k *vectorKey, seq uint64, prev string, clock uint64, typ string, body string) *journal.Event {
	t.Helper()
	e, err := journal.NewEvent(k, journal.Stamp{Seq: seq, Prev: prev, Clock: clock, Time: vectorTime.Add(time.Duration(clock) * time.Second)},
		journal.Draft{Type: typ, Session: "s1", Turn: "t1", Body: json.RawMessage(body)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func lineOf(e *journal.Event) []byte { return append(e.Line(), '\n') }

// members decodes an event line or a manifest into its members.
func members(t *testing.T, line []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// canonicalOf is the RFC 8785 encoding of an object of members.
func canonicalOf(t *testing.T, m map[string]json.RawMessage) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// eventID is the event id of canonical bytes: CIDv1, json codec, sha2-256.
func eventID(t *testing.T, canon []byte) string {
	t.Helper()
	mh, err := multihash.Sum(canon, multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	return cid.NewCidV1(0x0200, mh).String() // 0x0200: the json multicodec.String()
}

// edited applies edit to an event line's members and writes the line as a
// writer would: signed again by k (unless the edit is to sig itself) and
// with the id of its new content. It plays a writer that breaks one rule.
func edited(t *testing.T, k *vectorKey, line []byte, edit func(m map[string]json.RawMessage)) []byte {
	t.Helper()
	m := members(t, bytes.TrimSuffix(line, []byte("\n")))
	oldSig := m["sig"]
	edit(m)
	delete(m, "id")
	if bytes.Equal(m["sig"], oldSig) {
		delete(m, "sig")
		m["sig"] = jsonString(base64.StdEncoding.EncodeToString(ed25519.Sign(k.priv, canonicalOf(t, m))))
	}
	m["id"] = jsonString(eventID(t, canonicalOf(t, m)))
	return append(canonicalOf(t, m), '\n')
}

// withID sets an event line's id without signing again.
func withID(t *testing.T, line []byte, id string) []byte {
	t.Helper()
	m := members(t, bytes.TrimSuffix(line, []byte("\n")))
	m["id"] = jsonString(id)
	return append(canonicalOf(t, m), '\n')
}

func replaceOnce(t *testing.T, b []byte, old, new string) []byte {
	t.Helper()
	if bytes.Count(b, []byte(old)) != 1 {
		t.Fatalf("%q is not once in %s", old, b)
	}
	return bytes.Replace(b, []byte(old), []byte(new), 1)
}

// otherPeerSpelling is a peer ID written as a CIDv1 (libp2p-key codec) in
// another base: the same key, a string the format refuses.
func otherPeerSpelling(t *testing.T, id string, base multibase.Encoding) string {
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

// secp256k1PeerID is the peer ID of a fixed secp256k1 key: a real libp2p
// peer ID that is not a machine's.
func secp256k1PeerID(t *testing.T) string {
	t.Helper()
	sum := sha256.Sum256([]byte("tern test vectors: a secp256k1 key"))
	k, err := crypto.UnmarshalSecp256k1PrivateKey(sum[:])
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

func eventVectors(t *testing.T, v *vectorSet, a *vectorKey) {
	ok := lineOf(newEvent(t, a, 1, "", 1, "message", `{"role":"user","content":[{"type":"text","text":"hello"}]}`))
	first := members(t, ok)
	var firstID string
	if err := json.Unmarshal(first["id"], &firstID); err != nil {
		t.Fatal(err)
	}
	second := lineOf(newEvent(t, a, 2, firstID, 2, "tool_call", `{"call_id":"c1","name":"read_file","arguments":{"path":"hello.txt"}}`))
	add := func(name string, line []byte, expect string) { v.add(t, "events/"+name+".jsonl", line, expect) }

	add("ok", ok, checkOK)
	add("ok-second-in-chain", second, checkOK)
	add("ok-canonical-json", lineOf(newEvent(t, a, 1, "", 1, "note",
		`{"text":"h\u00e9llo \"you\"\n\u2028 \ud83d\ude00 \u0001\u007f/","n":1e3,"x":-0.5,"f":0.1,"big":9007199254740991,"e":1e21,"tiny":1e-7,`+
			`"keys":{"\u00e9":1,"\ud83d\ude00":2,"\uff61":3,"a":4,"Z":5,"":6},"list":[true,false,null,[],{}]}`)), checkOK)
	add("ok-unknown-type-and-fields", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["type"] = jsonString("x.later.thing")
		m["body"] = json.RawMessage(`{"anything":[1,"two",{"three":null}]}`)
		m["zz_later"] = json.RawMessage(`{"added":"by a newer writer"}`)
		m["Alpha"] = json.RawMessage(`true`)
	}), checkOK)
	add("ok-type-of-64-bytes", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["type"] = jsonString("x.later-" + strings.Repeat("a", 55) + "9")
	}), checkOK)
	add("ok-time-with-offset", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["time"] = jsonString("2026-01-02T05:04:05.5+02:00")
	}), checkOK)
	add("ok-time-without-fraction", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["time"] = jsonString("2026-01-02T03:04:05Z")
	}), checkOK)

	sig, err := base64.StdEncoding.DecodeString(string(bytes.Trim(first["sig"], `"`)))
	if err != nil {
		t.Fatal(err)
	}
	flipped := slices.Clone(sig)
	flipped[0] ^= 0x01
	sigText := base64.StdEncoding.EncodeToString(sig)
	padded := []byte(sigText)
	padded[len(padded)-3]++ // the same 64 bytes, with padding bits set
	add("sig-byte-flipped", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["sig"] = jsonString(base64.StdEncoding.EncodeToString(flipped))
	}), checkBadSignature)
	add("sig-with-line-break", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["sig"] = jsonString(sigText[:44] + "\n" + sigText[44:])
	}), checkBadSignature)
	add("sig-padding-bits-set", edited(t, a, ok, func(m map[string]json.RawMessage) { m["sig"] = jsonString(string(padded)) }), checkBadSignature)
	add("sig-by-another-key", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["sig"] = jsonString(base64.StdEncoding.EncodeToString(ed25519.Sign(ed25519.NewKeyFromSeed(make([]byte, 32)), []byte("x"))))
	}), checkBadSignature)
	body := replaceOnce(t, ok, `"text":"hello"`, `"text":"hellp"`)
	m := members(t, bytes.TrimSuffix(body, []byte("\n")))
	delete(m, "id")
	add("body-byte-flipped", withID(t, body, eventID(t, canonicalOf(t, m))), checkBadSignature)
	id := []byte(firstID)
	id[len(id)-1] = map[bool]byte{true: 'b', false: 'a'}[id[len(id)-1] == 'a']
	add("id-byte-flipped", withID(t, ok, string(id)), checkBadID)
	add("id-of-another-event", withID(t, ok, string(bytes.Trim(members(t, second)["id"], `"`))), checkBadID)

	add("not-canonical-space", replaceOnce(t, ok, `"seq":1`, `"seq": 1`), checkNotCanonical)
	add("not-canonical-key-order", append([]byte(`{"v":1,`), replaceOnce(t, ok, `,"v":1}`, `}`)[1:]...), checkNotCanonical)
	add("not-canonical-escape", replaceOnce(t, ok, `"session":"s1"`, `"session":"\u00731"`), checkNotCanonical)
	add("not-canonical-crlf", append(slices.Clone(bytes.TrimSuffix(ok, []byte("\n"))), '\r', '\n'), checkNotCanonical)
	add("not-canonical-number", replaceOnce(t, ok, `"clock":1`, `"clock":1.0`), checkNotCanonical)

	add("future-version", edited(t, a, ok, func(m map[string]json.RawMessage) { m["v"] = json.RawMessage(`2`) }), checkFutureFormat)
	add("machine-as-cid", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["machine"] = jsonString(otherPeerSpelling(t, a.PeerID, multibase.Base32))
	}), checkInvalidEvent)
	add("machine-in-base36", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["machine"] = jsonString(otherPeerSpelling(t, a.PeerID, multibase.Base36))
	}), checkInvalidEvent)
	add("machine-secp256k1", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["machine"] = jsonString(secp256k1PeerID(t))
	}), checkInvalidEvent)
	add("missing-turn", edited(t, a, ok, func(m map[string]json.RawMessage) { delete(m, "turn") }), checkInvalidEvent)
	add("empty-type", edited(t, a, ok, func(m map[string]json.RawMessage) { m["type"] = jsonString("") }), checkInvalidEvent)
	add("type-with-a-line-break", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["type"] = jsonString("message\nid: 999999\nevent: turn.ended")
	}), checkInvalidEvent)
	add("type-in-upper-case", edited(t, a, ok, func(m map[string]json.RawMessage) { m["type"] = jsonString("Message") }), checkInvalidEvent)
	add("type-of-65-bytes", edited(t, a, ok, func(m map[string]json.RawMessage) { m["type"] = jsonString(strings.Repeat("x", 65)) }), checkInvalidEvent)
	add("seq-zero", edited(t, a, ok, func(m map[string]json.RawMessage) { m["seq"] = json.RawMessage(`0`) }), checkInvalidEvent)
	add("clock-over-max-safe-integer", edited(t, a, ok, func(m map[string]json.RawMessage) { m["clock"] = json.RawMessage(`9007199254740992`) }), checkInvalidEvent)
	add("session-not-a-string", edited(t, a, ok, func(m map[string]json.RawMessage) { m["session"] = json.RawMessage(`1`) }), checkInvalidEvent)
	add("seq-1-with-prev", edited(t, a, second, func(m map[string]json.RawMessage) { m["seq"] = json.RawMessage(`1`) }), checkInvalidEvent)
	add("prev-in-upper-case", edited(t, a, second, func(m map[string]json.RawMessage) {
		m["prev"] = jsonString(strings.ToUpper(firstID))
	}), checkInvalidEvent)
	add("time-with-comma", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["time"] = jsonString("2026-01-02T03:04:05,5Z")
	}), checkInvalidEvent)
	add("time-lower-case", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["time"] = jsonString("2026-01-02t03:04:05z")
	}), checkInvalidEvent)
	add("time-offset-24h", edited(t, a, ok, func(m map[string]json.RawMessage) {
		m["time"] = jsonString("2026-01-02T03:04:05+24:00")
	}), checkInvalidEvent)
	add("duplicate-key", replaceOnce(t, ok, `"turn":"t1"`, `"turn":"t1","turn":"t1"`), checkInvalidEvent)
	add("not-an-object", []byte("[1,2,3]\n"), checkInvalidEvent)
}

// vectorCapsule is the capsule every manifest and capsule vector starts
// from: two machines, a conversation, a workspace snapshot with a binary
// file, written in a folder and packed by the code under test.
type vectorCapsule struct {
	manifest *capsule.Manifest // unsigned
	tar      []byte            // Pack
	signed   []byte            // Pack, signed by machine a
	lines    [][]byte          // the journal's lines in total order, newlines included
	// Lines that are not in the journal: a's next event, another event at
	// a's seq 3 (a fork), and two seq 4s that break the chain.
	next, fork, badPrev, lowClock []byte
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func newVectorCapsule(t *testing.T, a, b *vectorKey) *vectorCapsule {
	t.Helper()
	hello := []byte("hello, world\n")
	bin := []byte{0x00, 0x01, 0x02, 0xfe, 0xff, '\n'}
	snap := &capsule.Snapshot{Entries: map[string]capsule.SnapshotEntry{
		"hello.txt":    {Type: "file", Mode: "0644", CID: capsule.BlobCID(sha256Hex(hello)), Size: int64(len(hello))},
		"src":          {Type: "dir", Mode: "0755"},
		"src/data.bin": {Type: "file", Mode: "0600", CID: capsule.BlobCID(sha256Hex(bin)), Size: int64(len(bin))},
	}}
	snapData, err := snap.Encode()
	if err != nil {
		t.Fatal(err)
	}
	agent, err := capsule.DefaultAgent("vectors").Encode()
	if err != nil {
		t.Fatal(err)
	}
	env, err := capsule.DefaultEnvSpec().Encode()
	if err != nil {
		t.Fatal(err)
	}
	snapBody, err := json.Marshal(capsule.SnapshotEventBody{Snapshot: capsule.BlobCID(sha256Hex(snapData)), Files: 2, Bytes: int64(len(hello) + len(bin))})
	if err != nil {
		t.Fatal(err)
	}
	a1 := newEvent(t, a, 1, "", 1, "message", `{"role":"user","content":[{"type":"text","text":"hello"}]}`)
	b1 := newEvent(t, b, 1, "", 2, "message", `{"role":"assistant","content":[{"type":"text","text":"hi there"}]}`)
	a2 := newEvent(t, a, 2, a1.ID, 2, capsule.SnapshotEventType, string(snapBody))
	a3 := newEvent(t, a, 3, a2.ID, 3, "tool_call", `{"call_id":"c1","name":"read_file","arguments":{"path":"hello.txt"}}`)
	result := `{"call_id":"c1","content":[{"type":"text","text":"hello, world\n"}],"is_error":false}`
	c := &vectorCapsule{
		next:     lineOf(newEvent(t, a, 4, a3.ID, 4, "tool_result", result)),
		fork:     lineOf(newEvent(t, a, 3, a2.ID, 3, "tool_call", `{"call_id":"c1","name":"list_files","arguments":{}}`)),
		badPrev:  lineOf(newEvent(t, a, 4, a2.ID, 4, "tool_result", result)),
		lowClock: lineOf(newEvent(t, a, 4, a3.ID, 3, "tool_result", result)),
	}
	var journalData []byte
	for _, e := range journal.Merge([]*journal.Event{a1, b1, a2, a3}, nil) {
		c.lines = append(c.lines, lineOf(e))
		journalData = append(journalData, lineOf(e)...)
	}

	dir := filepath.Join(t.TempDir(), "capsule")
	files := map[string][]byte{
		capsule.AgentFile:                     agent,
		capsule.EnvironmentFile:               env,
		capsule.NotesFile:                     {},
		capsule.IndexFile:                     []byte("{\"entries\":[]}\n"),
		capsule.SnapshotFile:                  snapData,
		capsule.JournalFile:                   journalData,
		capsule.BlobPath(sha256Hex(hello)):    hello,
		capsule.BlobPath(sha256Hex(bin)):      bin,
		capsule.BlobPath(sha256Hex(snapData)): snapData,
	}
	m := &capsule.Manifest{ID: vectorAgentID, Holder: capsule.Holder{Peer: a.PeerID}, Files: map[string]capsule.FileEntry{}}
	for name, data := range files {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(name)), data)
		m.Files[name] = capsule.FileEntry{SHA256: sha256Hex(data), Size: int64(len(data))}
	}
	mdata, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, capsule.ManifestFile), mdata)

	opened, err := capsule.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	c.manifest = opened.Manifest()
	var plain, signed bytes.Buffer
	if err := capsule.Pack(opened, &plain, capsule.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := capsule.Pack(opened, &signed, capsule.PackOptions{Signer: a}); err != nil {
		t.Fatal(err)
	}
	c.tar, c.signed = plain.Bytes(), signed.Bytes()
	return c
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// encodeManifest encodes a copy of m, with its own files map, after edit.
func encodeManifest(t *testing.T, m capsule.Manifest, edit func(m *capsule.Manifest)) []byte {
	t.Helper()
	m.Files = maps.Clone(m.Files)
	if m.Signature != nil {
		sig := *m.Signature
		m.Signature = &sig
	}
	edit(&m)
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// manifestWithDigest sets a manifest's digest to the hash of its other
// members, whatever they are (a writer that breaks some other rule).
func manifestWithDigest(t *testing.T, data []byte, edit func(m map[string]json.RawMessage)) []byte {
	t.Helper()
	m := members(t, data)
	edit(m)
	delete(m, "digest")
	m["digest"] = jsonString(sha256Hex(canonicalOf(t, m)))
	return canonicalOf(t, m)
}

func manifestVectors(t *testing.T, v *vectorSet, a *vectorKey, c *vectorCapsule) {
	add := func(name string, data []byte, expect string) { v.add(t, "manifests/"+name+".json", data, expect) }
	none := func(*capsule.Manifest) {}
	ok := encodeManifest(t, *c.manifest, none)
	add("ok", ok, checkOK)
	signedM := *c.manifest
	signedM.Files = maps.Clone(signedM.Files)
	if err := signedM.Sign(a); err != nil {
		t.Fatal(err)
	}
	signed := encodeManifest(t, signedM, none)
	add("signed", signed, checkOK)
	sig, err := base64.StdEncoding.DecodeString(signedM.Signature.Sig)
	if err != nil {
		t.Fatal(err)
	}
	sig[0] ^= 0x01
	add("signed-sig-byte-flipped", encodeManifest(t, signedM, func(m *capsule.Manifest) {
		m.Signature.Sig = base64.StdEncoding.EncodeToString(sig)
	}), checkBadSignature)
	add("signed-then-changed", encodeManifest(t, signedM, func(m *capsule.Manifest) { m.Holder.Epoch = 1 }), checkBadSignature)
	add("signed-sig-with-line-break", encodeManifest(t, signedM, func(m *capsule.Manifest) {
		m.Signature.Sig = m.Signature.Sig[:44] + "\n" + m.Signature.Sig[44:]
	}), checkBadSignature)
	add("signer-as-cid", encodeManifest(t, signedM, func(m *capsule.Manifest) {
		m.Signature.Signer = otherPeerSpelling(t, a.PeerID, multibase.Base32)
	}), checkInvalidManifest)
	add("holder-as-cid", encodeManifest(t, *c.manifest, func(m *capsule.Manifest) {
		m.Holder.Peer = otherPeerSpelling(t, a.PeerID, multibase.Base32)
	}), checkInvalidManifest)
	add("holder-secp256k1", encodeManifest(t, *c.manifest, func(m *capsule.Manifest) { m.Holder.Peer = secp256k1PeerID(t) }), checkInvalidManifest)
	add("holder-epoch-over-max-safe-integer", manifestWithDigest(t, ok, func(m map[string]json.RawMessage) { // Encode refuses it
		m["holder"] = json.RawMessage(`{"epoch":9007199254740992,"peer":` + string(jsonString(c.manifest.Holder.Peer)) + `}`)
	}), checkInvalidManifest)
	add("agent-id-upper-case", encodeManifest(t, *c.manifest, func(m *capsule.Manifest) { m.ID = strings.ToUpper(m.ID) }), checkInvalidManifest)
	add("missing-environment-spec", encodeManifest(t, *c.manifest, func(m *capsule.Manifest) { delete(m.Files, capsule.EnvironmentFile) }), checkInvalidManifest)
	add("path-outside-layout", encodeManifest(t, *c.manifest, func(m *capsule.Manifest) {
		m.Files["notes.txt"] = m.Files[capsule.NotesFile]
	}), checkInvalidManifest)
	add("blob-listed-under-another-hash", encodeManifest(t, *c.manifest, func(m *capsule.Manifest) {
		for _, name := range m.Names() {
			if strings.HasPrefix(name, capsule.BlobDir+"/") {
				m.Files[name] = capsule.FileEntry{SHA256: sha256Hex([]byte("something else")), Size: m.Files[name].Size}
				return
			}
		}
	}), checkInvalidManifest)
	add("sha256-upper-case", encodeManifest(t, *c.manifest, func(m *capsule.Manifest) {
		e := m.Files[capsule.AgentFile]
		m.Files[capsule.AgentFile] = capsule.FileEntry{SHA256: strings.ToUpper(e.SHA256), Size: e.Size}
	}), checkInvalidManifest)
	add("negative-size", encodeManifest(t, *c.manifest, func(m *capsule.Manifest) {
		e := m.Files[capsule.NotesFile]
		m.Files[capsule.NotesFile] = capsule.FileEntry{SHA256: e.SHA256, Size: -1}
	}), checkInvalidManifest)
	add("unknown-field", manifestWithDigest(t, ok, func(m map[string]json.RawMessage) { m["comment"] = jsonString("added by hand") }), checkInvalidManifest)
	// The decoded content of the next two is that of "ok", and so is their
	// digest: only the spelling of a member is wrong.
	add("field-name-in-other-case", canonicalOf(t, func() map[string]json.RawMessage {
		m := members(t, ok)
		m["holder"] = replaceOnce(t, m["holder"], `"epoch"`, `"Epoch"`)
		return m
	}()), checkInvalidManifest)
	add("null-signature", canonicalOf(t, func() map[string]json.RawMessage {
		m := members(t, ok)
		m["signature"] = json.RawMessage(`null`)
		return m
	}()), checkInvalidManifest)
	digest := []byte(c.manifest.Digest)
	digest[0] = map[bool]byte{true: '1', false: '0'}[digest[0] == '0']
	add("digest-flipped", replaceOnce(t, ok, c.manifest.Digest, string(digest)), checkBadDigest)
	add("trailing-newline", append(slices.Clone(ok), '\n'), checkNotCanonical)
	var indented bytes.Buffer
	if err := json.Indent(&indented, ok, "", "  "); err != nil {
		t.Fatal(err)
	}
	add("indented", indented.Bytes(), checkNotCanonical)
	add("format-2", manifestWithDigest(t, ok, func(m map[string]json.RawMessage) { m["format"] = jsonString("tern.capsule/2") }), checkFutureFormat)
	add("format-of-another-tool", manifestWithDigest(t, ok, func(m map[string]json.RawMessage) { m["format"] = jsonString("other.tool/1") }), checkNotCapsule)
	add("no-format", manifestWithDigest(t, ok, func(m map[string]json.RawMessage) { delete(m, "format") }), checkNotCapsule)
}

// tarFile is one entry of a tar, as the vectors rewrite it.
type tarFile struct {
	hdr  tar.Header
	data []byte
}

func readTarFiles(t *testing.T, data []byte) []tarFile {
	t.Helper()
	var out []tarFile
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarFile{hdr: *h, data: b})
	}
}

func writeTarFiles(t *testing.T, files []tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := f.hdr
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// entry returns a regular file entry as Pack writes one.
func entry(name string, data []byte) tarFile {
	return tarFile{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}, data: data}
}

// tarEdit is a capsule tar's entries being changed.
type tarEdit struct {
	t     *testing.T
	files []tarFile
}

func editTar(t *testing.T, data []byte) *tarEdit { return &tarEdit{t: t, files: readTarFiles(t, data)} }

func (e *tarEdit) index(name string) int {
	i := slices.IndexFunc(e.files, func(f tarFile) bool { return f.hdr.Name == name })
	if i < 0 {
		e.t.Fatalf("no %s in the tar", name)
	}
	return i
}

func (e *tarEdit) get(name string) []byte { return e.files[e.index(name)].data }

func (e *tarEdit) set(name string, data []byte) *tarEdit {
	e.files[e.index(name)].data = data
	return e
}

func (e *tarEdit) remove(name string) *tarEdit {
	e.files = slices.Delete(e.files, e.index(name), e.index(name)+1)
	return e
}

func (e *tarEdit) append(f tarFile) *tarEdit {
	e.files = append(e.files, f)
	return e
}

// reseal lists the named files' current bytes in the manifest (or drops
// them from it, when the tar no longer holds them) and encodes it again.
func (e *tarEdit) reseal(names ...string) *tarEdit {
	m, err := capsule.ParseManifest(e.get(capsule.ManifestFile))
	if err != nil {
		e.t.Fatal(err)
	}
	e.set(capsule.ManifestFile, encodeManifest(e.t, *m, func(m *capsule.Manifest) {
		for _, name := range names {
			if i := slices.IndexFunc(e.files, func(f tarFile) bool { return f.hdr.Name == name }); i >= 0 {
				m.Files[name] = capsule.FileEntry{SHA256: sha256Hex(e.files[i].data), Size: int64(len(e.files[i].data))}
			} else {
				delete(m.Files, name)
			}
		}
	}))
	return e
}

func (e *tarEdit) headers(edit func(h *tar.Header)) *tarEdit {
	for i := range e.files {
		edit(&e.files[i].hdr)
	}
	return e
}

func (e *tarEdit) bytes() []byte { return writeTarFiles(e.t, e.files) }

// readJournal reads the journal of a capsule tar as the code under test
// does: what is readable, what is quarantined, and the version vector.
func readJournal(t *testing.T, tarData []byte) (view, quarantined []*journal.Event, vec journal.Vector) {
	t.Helper()
	events, _, _ := journal.Decode(editTar(t, tarData).get(capsule.JournalFile))
	view, quarantined = journal.Readable(events)
	return view, quarantined, journal.VectorOf(events)
}

// addJournal adds the journal vector capsules/NAME.tar, a capsule tar whose
// journal's events a reader reads as readable or quarantined in the
// numbers given, and records its version vector as the code computes it.
func (v *vectorSet) addJournal(t *testing.T, name string, data []byte, readable, quarantined int, expect ...string) {
	t.Helper()
	view, q, vec := readJournal(t, data)
	if len(view) != readable || len(q) != quarantined {
		t.Fatalf("%s: the code reads %d events and quarantines %d, not %d and %d", name, len(view), len(q), readable, quarantined)
	}
	name = "capsules/" + name + ".tar"
	v.add(t, name, data, expect...)
	slices.Sort(expect)
	v.expected[name] = journalRead{Checks: expect, Readable: readable, Quarantined: quarantined, Vector: vec}
}

func capsuleVectors(t *testing.T, v *vectorSet, a *vectorKey, c *vectorCapsule) {
	add := func(name string, data []byte, expect ...string) { v.add(t, "capsules/"+name+".tar", data, expect...) }
	addJournal := func(name string, data []byte, readable, quarantined int, expect ...string) {
		t.Helper()
		v.addJournal(t, name, data, readable, quarantined, expect...)
	}
	ed := func() *tarEdit { return editTar(t, c.tar) }
	jf := capsule.JournalFile
	joined := func(lines ...[]byte) []byte { return bytes.Join(lines, nil) }
	journalData := joined(c.lines...)
	var helloBlob, binBlob string
	for name, e := range c.manifest.Files {
		switch {
		case !strings.HasPrefix(name, capsule.BlobDir+"/"):
		case e.Size == int64(len("hello, world\n")):
			helloBlob = name
		case e.Size == 6:
			binBlob = name
		}
	}

	add("ok", c.tar, checkOK)
	add("signed", c.signed, checkOK)
	add("gnu-headers", ed().headers(func(h *tar.Header) { h.Format = tar.FormatGNU }).bytes(), checkOK)
	add("pax-headers", ed().headers(func(h *tar.Header) {
		h.Format = tar.FormatPAX
		h.PAXRecords = map[string]string{"TERN.vector": "pax"}
	}).bytes(), checkOK)
	dotSlash := ed().headers(func(h *tar.Header) { h.Name = "./" + h.Name })
	dotSlash.files = append([]tarFile{{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}}}, dotSlash.files...)
	add("names-with-dot-slash", dotSlash.bytes(), checkOK)
	last := ed()
	last.files = append(last.files[1:], last.files[0])
	add("manifest-last", last.bytes(), checkOK)
	noDirs := ed()
	noDirs.files = slices.DeleteFunc(noDirs.files, func(f tarFile) bool { return f.hdr.Typeflag == tar.TypeDir })
	add("no-folder-entries", noDirs.bytes(), checkOK)

	addJournal("journal-in-reverse-order", ed().set(jf, joined(reversedLines(c.lines)...)).reseal(jf).bytes(), 4, 0, checkOK)
	addJournal("journal-line-twice", ed().set(jf, joined(append(slices.Clone(c.lines), c.lines[1])...)).reseal(jf).bytes(), 4, 0, checkOK)
	addJournal("journal-appended-after-seal", ed().set(jf, joined(journalData, c.next)).bytes(), 5, 0, checkOK)
	addJournal("journal-torn-tail-after-seal", ed().set(jf, joined(journalData, c.next[:len(c.next)/2])).bytes(), 4, 0, checkOK)
	addJournal("journal-bad-line-after-seal", ed().set(jf, joined(journalData, edited(t, a, c.next, func(m map[string]json.RawMessage) {
		m["sig"] = jsonString(base64.StdEncoding.EncodeToString(make([]byte, 64)))
	}))).bytes(), 4, 0, checkBadSignature)
	addJournal("journal-truncated", ed().set(jf, joined(c.lines[:len(c.lines)-1]...)).bytes(), 3, 0, checkTruncated)
	addJournal("journal-cut-inside-a-line", ed().set(jf, journalData[:len(journalData)-10]).bytes(), 3, 0, checkTruncated)
	addJournal("journal-sealed-without-final-newline", ed().set(jf, bytes.TrimSuffix(journalData, []byte("\n"))).reseal(jf).bytes(), 3, 0, checkTruncated)
	changed := replaceOnce(t, journalData, `"text":"hello"`, `"text":"hellp"`)
	// The changed line is left out of the chains, so the events after it
	// in a's chain follow a gap.
	addJournal("journal-line-changed", ed().set(jf, changed).bytes(), 1, 2, checkBadSignature, checkBrokenChain, checkHashMismatch)
	addJournal("journal-line-changed-and-resealed", ed().set(jf, changed).reseal(jf).bytes(), 1, 2, checkBadSignature, checkBrokenChain)
	addJournal("journal-crlf", ed().set(jf, bytes.ReplaceAll(journalData, []byte("\n"), []byte("\r\n"))).reseal(jf).bytes(), 0, 0, checkNotCanonical)
	addJournal("journal-fork", ed().set(jf, joined(journalData, c.fork)).reseal(jf).bytes(), 3, 2, checkFork)
	addJournal("journal-gap", ed().set(jf, joined(slices.DeleteFunc(slices.Clone(c.lines), func(l []byte) bool {
		return bytes.Contains(l, []byte(`"type":"workspace.snapshot"`))
	})...)).reseal(jf).bytes(), 2, 1, checkBrokenChain)
	addJournal("journal-wrong-prev", ed().set(jf, joined(journalData, c.badPrev)).reseal(jf).bytes(), 4, 1, checkBrokenChain)
	addJournal("journal-clock-not-rising", ed().set(jf, joined(journalData, c.lowClock)).reseal(jf).bytes(), 4, 1, checkBrokenChain)

	hello := slices.Clone(ed().get(helloBlob))
	hello[0] ^= 0x20
	add("blob-changed", ed().set(helloBlob, hello).bytes(), checkHashMismatch)
	add("file-missing", ed().remove(capsule.AgentFile).bytes(), checkMissingFile)
	extra := []byte("not listed\n")
	add("file-not-listed", ed().append(entry(capsule.BlobPath(sha256Hex(extra)), extra)).bytes(), checkUnlistedFile)
	add("snapshot-blob-missing", ed().remove(binBlob).reseal(binBlob).bytes(), checkMissingBlob)
	mdata := ed().get(capsule.ManifestFile)
	m, err := capsule.ParseManifest(mdata)
	if err != nil {
		t.Fatal(err)
	}
	digest := []byte(m.Digest)
	digest[0] = map[bool]byte{true: '1', false: '0'}[digest[0] == '0']
	add("manifest-digest-flipped", ed().set(capsule.ManifestFile, replaceOnce(t, mdata, m.Digest, string(digest))).bytes(), checkBadDigest)
	add("manifest-not-canonical", ed().set(capsule.ManifestFile, append(slices.Clone(mdata), '\n')).bytes(), checkNotCanonical)
	sm, err := capsule.ParseManifest(editTar(t, c.signed).get(capsule.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(sm.Signature.Sig)
	if err != nil {
		t.Fatal(err)
	}
	sig[63] ^= 0x01
	add("signed-sig-byte-flipped", editTar(t, c.signed).set(capsule.ManifestFile, encodeManifest(t, *sm, func(m *capsule.Manifest) {
		m.Signature.Sig = base64.StdEncoding.EncodeToString(sig)
	})).bytes(), checkBadSignature)
	add("agent-without-name", ed().set(capsule.AgentFile, []byte("{\n  \"name\": \"\",\n  \"instructions\": \"\",\n  \"provider\": \"offline\",\n  \"model\": \"tern-offline\",\n  \"tools\": []\n}\n")).reseal(capsule.AgentFile).bytes(), checkInvalidContent)
	add("environment-with-a-secret-value", ed().set(capsule.EnvironmentFile, []byte("{\n  \"workdir\": \"workspace\",\n  \"packages\": [],\n  \"env\": {\n    \"GITHUB_TOKEN\": \"ghp_…\"\n  },\n  \"secrets\": []\n}\n")).reseal(capsule.EnvironmentFile).bytes(), checkInvalidContent)
	add("index-not-an-object", ed().set(capsule.IndexFile, []byte("[]\n")).reseal(capsule.IndexFile).bytes(), checkInvalidContent)
	add("snapshot-path-escapes", ed().set(capsule.SnapshotFile, replaceOnce(t, ed().get(capsule.SnapshotFile), `"hello.txt"`, `"../hello.txt"`)).reseal(capsule.SnapshotFile).bytes(), checkInvalidContent)

	special := func(name string, typ byte, link string) tarFile {
		return tarFile{hdr: tar.Header{Typeflag: typ, Name: name, Linkname: link, Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}}
	}
	add("unsafe-symbolic-link", ed().append(special("artifacts/link", tar.TypeSymlink, "/etc/passwd")).bytes(), checkUnsafeTar)
	add("unsafe-hard-link", ed().append(special("artifacts/link", tar.TypeLink, capsule.AgentFile)).bytes(), checkUnsafeTar)
	add("unsafe-fifo", ed().append(special("memory/pipe", tar.TypeFifo, "")).bytes(), checkUnsafeTar)
	add("unsafe-parent-path", ed().append(entry("../evil", []byte("x"))).bytes(), checkUnsafeTar)
	add("unsafe-absolute-path", ed().append(entry("/tmp/evil", []byte("x"))).bytes(), checkUnsafeTar)
	add("unsafe-duplicate-entry", ed().append(entry(capsule.AgentFile, ed().get(capsule.AgentFile))).bytes(), checkUnsafeTar)
	add("unsafe-file-outside-layout", ed().append(entry("notes.txt", []byte("x"))).bytes(), checkUnsafeTar)
	add("unsafe-folder-outside-layout", ed().append(special("workspace/", tar.TypeDir, "")).bytes(), checkUnsafeTar)
	global := ed()
	global.files = append([]tarFile{{hdr: tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "made by git archive, say"}}}}, global.files...)
	add("unsafe-pax-global-header", global.bytes(), checkUnsafeTar)
	add("unsafe-blob-name-upper-case", ed().append(entry(capsule.BlobDir+"/"+strings.ToUpper(sha256Hex(extra)), extra)).bytes(), checkUnsafeTar)
	// Cut inside the journal's data: the archive ends before its entries do.
	at := bytes.Index(c.tar, journalData[:64])
	add("unsafe-truncated-archive", slices.Clone(c.tar[:at+100]), checkUnsafeTar)
	// Cut after the manifest's data, inside its padding: every byte of the
	// manifest is there, but the archive is not whole blocks.
	add("unsafe-cut-inside-padding", slices.Clone(c.tar[:512+len(mdata)]), checkUnsafeTar)
	// Cut between two entries, a tar is whole and shorter; an empty file is
	// an empty archive.
	add("cut-between-entries", slices.Clone(c.tar[:512+(len(mdata)+511)/512*512]), checkMissingFile)
	add("empty-file", []byte{}, checkNotCapsule)
}

// parseEvent reads one journal line, its newline included, with the code
// under test.
func parseEvent(t *testing.T, line []byte) *journal.Event {
	t.Helper()
	e, err := journal.ParseLine(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// events returns the events of the small capsule's journal: a1, b1, a2, a3.
func (c *vectorCapsule) events(t *testing.T) []*journal.Event {
	t.Helper()
	var out []*journal.Event
	for _, l := range c.lines {
		out = append(out, parseEvent(t, l))
	}
	return out
}

// eventAt returns k's event at seq among events.
func eventAt(t *testing.T, events []*journal.Event, k *vectorKey, seq uint64) *journal.Event {
	t.Helper()
	i := slices.IndexFunc(events, func(e *journal.Event) bool { return e.Machine == k.PeerID && e.Seq == seq })
	if i < 0 {
		t.Fatalf("no event of %s at seq %d", k.Name, seq)
	}
	return events[i]
}

// withJournal is the small capsule with a journal of these events, written
// as an export writes it: in total order, each once, sealed whole.
func (c *vectorCapsule) withJournal(t *testing.T, sets ...[]*journal.Event) []byte {
	t.Helper()
	var events []*journal.Event
	for _, s := range sets {
		events = journal.Merge(events, s)
	}
	var data []byte
	for _, e := range events {
		data = append(data, lineOf(e)...)
	}
	return editTar(t, c.tar).set(capsule.JournalFile, data).reseal(capsule.JournalFile).bytes()
}

// healVectors are journal vectors of the small capsule whose machine a
// forked its chain and healed it with a chain.healed event (journal.Heal),
// and of heals a reader must not apply.
func healVectors(t *testing.T, v *vectorSet, a, b *vectorKey, c *vectorCapsule) {
	parse := func(line []byte) *journal.Event { return parseEvent(t, line) }
	base := c.events(t) // a1, b1, a2, a3
	at := func(k *vectorKey, seq uint64) *journal.Event { return eventAt(t, base, k, seq) }
	a2, a3, b1 := at(a, 2), at(a, 3), at(b, 1)
	fork, a4 := parse(c.fork), parse(c.next) // a3's other side, and a3's next
	healTime := vectorTime.Add(time.Hour)
	heal := func(events []*journal.Event) []*journal.Event {
		t.Helper()
		out, err := journal.Heal(events, a, healTime)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// healEvent is a chain.healed event signed by k, naming ids.
	healEvent := func(k *vectorKey, seq uint64, prev string, clock uint64, replaced ...journal.Replacement) *journal.Event {
		t.Helper()
		slices.SortFunc(replaced, func(x, y journal.Replacement) int { return strings.Compare(x.ID, y.ID) })
		body, err := json.Marshal(journal.HealBody{Replaced: replaced})
		if err != nil {
			t.Fatal(err)
		}
		e, err := journal.NewEvent(k, journal.Stamp{Seq: seq, Prev: prev, Clock: clock, Time: healTime}, journal.Draft{Type: journal.HealType, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	named := func(h *journal.Event) []string {
		t.Helper()
		var body journal.HealBody
		if h.Type != journal.HealType || json.Unmarshal(h.Body, &body) != nil {
			t.Fatalf("%s is not a heal", h.ID)
		}
		var ids []string
		for _, r := range body.Replaced {
			ids = append(ids, r.ID)
		}
		return ids
	}
	ids := func(events ...*journal.Event) []string {
		var out []string
		for _, e := range events {
			out = append(out, e.ID)
		}
		slices.Sort(out)
		return out
	}
	tarOf := func(sets ...[]*journal.Event) []byte { return c.withJournal(t, sets...) }

	// a3 and its other side each have a next event; a3's side goes on to
	// seq 5, so the heal keeps it and sets the other side's two events
	// aside, signed again at seqs 6 and 7, with the heal at seq 8.
	a4x := newEvent(t, a, 4, fork.ID, 4, "tool_result", `{"call_id":"c1","content":[{"type":"text","text":"hello.txt\nsrc\n"}],"is_error":false}`)
	a5 := newEvent(t, a, 5, a4.ID, 5, "message", `{"role":"assistant","content":[{"type":"text","text":"It says hello, world."}]}`)
	forked := append(slices.Clone(base), fork, a4x, a4, a5)
	healed := heal(forked)
	h := healed[len(healed)-1]
	if h.Seq != 8 || !slices.Equal(named(h), ids(fork, a4x)) {
		t.Fatalf("the heal is at seq %d and names %v, not at seq 8 naming the shorter side %v", h.Seq, named(h), ids(fork, a4x))
	}
	v.addJournal(t, "journal-fork-healed", tarOf(forked, healed), 9, 2, checkOK)

	// The same heal naming b's first event too: a heal sets aside only its
	// own machine's events, so b's chain stays whole (setting b1 aside would
	// leave b2 after a gap).
	b2 := newEvent(t, b, 2, b1.ID, 3, "message", `{"role":"user","content":[{"type":"text","text":"Thanks."}]}`)
	var body journal.HealBody
	if err := json.Unmarshal(h.Body, &body); err != nil {
		t.Fatal(err)
	}
	greedy := healEvent(a, h.Seq, h.Prev, h.Clock, append(body.Replaced, journal.Replacement{ID: b1.ID})...)
	v.addJournal(t, "journal-heal-names-another-machines-event",
		tarOf(forked, healed[:len(healed)-1], []*journal.Event{b2, greedy}), 10, 2, checkOK)

	// b signs a heal naming a's fork: nobody heals another machine's chain,
	// so a's fork stays.
	byB := healEvent(b, 2, b1.ID, 4, journal.Replacement{ID: fork.ID})
	v.addJournal(t, "journal-fork-healed-by-another-machine", tarOf(base, []*journal.Event{fork, byB}), 4, 2, checkFork)

	// Copy X heals the fork at seq 3 (h1: the side it drops signed again at
	// seq 4, h1 at 5). Copy Y holds the side h1 kept and goes on to seq 6.
	// Merged, they fork at seq 4; the heal of that (h2) keeps Y's longer
	// line and sets aside X's events after seq 3: h1 and the event it
	// signed again (signing that content once more, at seq 7). What a heal
	// sets aside stays aside even when the heal itself is set aside, so
	// the side of seq 3 that h1 set aside stays out, and the chain is
	// whole: a's 8 events and b's 1 are read, 3 are set aside.
	X := append(slices.Clone(base), fork)
	h1 := heal(X)
	kept := a3
	if slices.Contains(named(h1[len(h1)-1]), a3.ID) {
		kept = fork
	}
	y4 := newEvent(t, a, 4, kept.ID, 4, "message", `{"role":"user","content":[{"type":"text","text":"Go on."}]}`)
	y5 := newEvent(t, a, 5, y4.ID, 5, "message", `{"role":"assistant","content":[{"type":"text","text":"Going on."}]}`)
	y6 := newEvent(t, a, 6, y5.ID, 6, "message", `{"role":"user","content":[{"type":"text","text":"Thanks."}]}`)
	Y := []*journal.Event{at(a, 1), a2, b1, kept, y4, y5, y6}
	h2 := heal(slices.Concat(X, h1, Y))
	if got := named(h2[len(h2)-1]); !slices.Equal(got, ids(h1...)) {
		t.Fatalf("the second heal names %v, not the first heal and the event it signed again %v", got, ids(h1...))
	}
	v.addJournal(t, "journal-heal-set-aside-by-later-heal", tarOf(X, h1, Y, h2), 9, 3, checkOK)
}

// activationVectors are journal vectors of the small capsule after machine
// a ran the agent under epoch 1 and b activated it at epoch 2 with a
// holder.activated event (journal.ActivatedBody): what a wrote under
// epoch 1 after the seq the activation names is set aside, and activations
// a reader must not count.
func activationVectors(t *testing.T, v *vectorSet, a, b, third *vectorKey, c *vectorCapsule) {
	base := c.events(t) // a1, b1, a2, a3: all at epoch 0
	a3, b1 := eventAt(t, base, a, 3), eventAt(t, base, b, 1)
	event := func(k *vectorKey, seq uint64, prev string, clock, epoch uint64, typ, body string) *journal.Event {
		t.Helper()
		e, err := journal.NewEvent(k, journal.Stamp{Seq: seq, Prev: prev, Clock: clock, Epoch: epoch, Time: vectorTime.Add(time.Duration(clock) * time.Second)},
			journal.Draft{Type: typ, Session: "s1", Turn: "t2", Body: json.RawMessage(body)})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// activation is k's holder.activated event at epoch, with the body
	// given: holder, and from (the old holder's machine, epoch and seq).
	activation := func(k *vectorKey, seq uint64, prev string, clock, epoch uint64, holder, from journal.Bound) *journal.Event {
		t.Helper()
		body, err := json.Marshal(journal.ActivatedBody{Holder: holder, From: from})
		if err != nil {
			t.Fatal(err)
		}
		return event(k, seq, prev, clock, epoch, journal.ActivatedType, string(body))
	}
	message := func(role, text string) string {
		return `{"role":"` + role + `","content":[{"type":"text","text":"` + text + `"}]}`
	}
	// a runs the agent under epoch 1 (a4, a5); b activates epoch 2,
	// saying a's epoch 1 ended at seq 5; a runs on under epoch 1 (a6), or
	// is edited offline at epoch 0 (a6edit).
	a4 := event(a, 4, a3.ID, 4, 1, "message", message("user", "Run the tests."))
	a5 := event(a, 5, a4.ID, 5, 1, "message", message("assistant", "Running them."))
	ran := []*journal.Event{a4, a5}
	endsAt5 := activation(b, 2, b1.ID, 6, 2, journal.Bound{Peer: b.PeerID, Epoch: 2}, journal.Bound{Peer: a.PeerID, Epoch: 1, Seq: 5})
	a6 := event(a, 6, a5.ID, 7, 1, "message", message("assistant", "All tests pass."))
	a6edit := event(a, 6, a5.ID, 7, 0, "message", message("user", "An edit made offline."))

	// add adds a journal vector and checks that exactly the events named
	// are kept aside.
	add := func(name string, data []byte, aside []*journal.Event, readable int, expect ...string) {
		t.Helper()
		_, q, _ := readJournal(t, data)
		var got, want []string
		for _, e := range q {
			got = append(got, e.ID)
		}
		for _, e := range aside {
			want = append(want, e.ID)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: the code keeps aside %v, not %v", name, got, want)
		}
		v.addJournal(t, name, data, readable, len(aside), expect...)
	}
	none := []*journal.Event(nil)

	add("journal-activation-sets-aside-a-stale-event", c.withJournal(t, base, ran, []*journal.Event{endsAt5, a6}),
		[]*journal.Event{a6}, 7, checkOK)
	add("journal-activation-leaves-an-offline-edit", c.withJournal(t, base, ran, []*journal.Event{endsAt5, a6edit}),
		none, 8, checkOK)
	// a6 and a6edit, both at a's seq 6, are no fork: the activation sets
	// a6 aside before the chain is checked, and the edit stands.
	add("journal-activation-sets-aside-one-side-of-a-fork", c.withJournal(t, base, ran, []*journal.Event{endsAt5, a6, a6edit}),
		[]*journal.Event{a6}, 8, checkOK)

	// Activations that count for nothing, so a6 stands: one written by a
	// third machine naming b as the holder; one naming a's epoch 1 from
	// epoch 1 (from.epoch not below its own); one whose holder.epoch is not
	// the epoch it was written at.
	byThird := activation(third, 1, "", 6, 2, journal.Bound{Peer: b.PeerID, Epoch: 2}, journal.Bound{Peer: a.PeerID, Epoch: 1, Seq: 5})
	add("journal-activation-by-a-third-machine", c.withJournal(t, base, ran, []*journal.Event{byThird, a6}), none, 8, checkOK)
	sameEpoch := activation(b, 2, b1.ID, 6, 1, journal.Bound{Peer: b.PeerID, Epoch: 1}, journal.Bound{Peer: a.PeerID, Epoch: 1, Seq: 5})
	add("journal-activation-from-its-own-epoch", c.withJournal(t, base, ran, []*journal.Event{sameEpoch, a6}), none, 8, checkOK)
	otherEpoch := activation(b, 2, b1.ID, 6, 3, journal.Bound{Peer: b.PeerID, Epoch: 2}, journal.Bound{Peer: a.PeerID, Epoch: 1, Seq: 5})
	add("journal-activation-at-another-epoch-than-it-names", c.withJournal(t, base, ran, []*journal.Event{otherEpoch, a6}), none, 8, checkOK)

	// An activation naming a's epoch 0 counts for nothing either: offline
	// edits always stand, so a3 (at epoch 0, above the seq named) does.
	fromZero := activation(b, 2, b1.ID, 4, 1, journal.Bound{Peer: b.PeerID, Epoch: 1}, journal.Bound{Peer: a.PeerID, Epoch: 0, Seq: 2})
	add("journal-activation-from-epoch-0", c.withJournal(t, base, []*journal.Event{fromZero}), none, 5, checkOK)

	// Three activations end a's epoch 1 at seqs 5, 4 and 6, in total
	// order: the lowest wins, whoever wrote it, so a5 and a6 are set aside.
	endsAt4 := activation(third, 1, "", 7, 3, journal.Bound{Peer: third.PeerID, Epoch: 3}, journal.Bound{Peer: a.PeerID, Epoch: 1, Seq: 4})
	endsAt6 := activation(b, 3, endsAt5.ID, 8, 2, journal.Bound{Peer: b.PeerID, Epoch: 2}, journal.Bound{Peer: a.PeerID, Epoch: 1, Seq: 6})
	add("journal-activation-lowest-of-three-seqs-wins", c.withJournal(t, base, ran, []*journal.Event{endsAt5, endsAt4, endsAt6, a6}),
		[]*journal.Event{a5, a6}, 8, checkOK)

	// An activation whose body leaves seq out (the old holder had written
	// nothing, as b saw it) ends the epoch at seq 0: all of a's epoch 1.
	endsAt0 := activation(b, 2, b1.ID, 6, 2, journal.Bound{Peer: b.PeerID, Epoch: 2}, journal.Bound{Peer: a.PeerID, Epoch: 1})
	if bytes.Contains(endsAt0.Body, []byte(`"seq"`)) {
		t.Fatalf("an activation from seq 0 writes its seq: %s", endsAt0.Body)
	}
	add("journal-activation-without-seq", c.withJournal(t, base, ran, []*journal.Event{endsAt0}), []*journal.Event{a4, a5}, 5, checkOK)

	// An activation counts wherever it stands in its writer's chain: this
	// one follows a gap in b's chain (b's seq 2 is missing), so it is
	// quarantined, and still sets a6 aside.
	b2 := event(b, 2, b1.ID, 6, 2, "message", message("assistant", "Taking over."))
	afterGap := activation(b, 3, b2.ID, 7, 2, journal.Bound{Peer: b.PeerID, Epoch: 2}, journal.Bound{Peer: a.PeerID, Epoch: 1, Seq: 5})
	add("journal-activation-after-a-gap", c.withJournal(t, base, ran, []*journal.Event{afterGap, a6}),
		[]*journal.Event{afterGap, a6}, 6, checkBrokenChain)

	// An offline edit chained after a stale event: the stale event is set
	// aside, so the edit follows a gap in a's chain (Check says seq 6 is
	// missing): a broken chain, and the edit is quarantined with it.
	a7edit := event(a, 7, a6.ID, 8, 0, "message", message("user", "An edit made offline."))
	add("journal-activation-offline-edit-after-a-stale-event", c.withJournal(t, base, ran, []*journal.Event{endsAt5, a6, a7edit}),
		[]*journal.Event{a6, a7edit}, 7, checkBrokenChain)

	// a's home is restored from a backup made when its chain stood at seq
	// 3, and runs on alone under epoch 1 from there (r4, r5): a branch
	// beside a4 and a5, which a had written before it handed the agent
	// on. An activation that names a's head by id (a5) makes the restored
	// branch stale, not a fork: a4 and a5 read on.
	r4 := event(a, 4, a3.ID, 6, 1, "message", message("user", "Written by a restored backup."))
	r5 := event(a, 5, r4.ID, 7, 1, "message", message("assistant", "Written by a restored backup."))
	endsAtA5 := activation(b, 2, b1.ID, 6, 2, journal.Bound{Peer: b.PeerID, Epoch: 2}, journal.Bound{Peer: a.PeerID, Epoch: 1, Seq: 5, ID: a5.ID})
	add("journal-activation-by-id-sets-aside-a-restored-branch", c.withJournal(t, base, ran, []*journal.Event{endsAtA5, r4, r5}),
		[]*journal.Event{r4, r5}, 7, checkOK)
	// The same without the id (an older writer): only the seq says, so the
	// two branches are a fork from seq 4 on.
	add("journal-activation-by-seq-leaves-a-restored-branch-a-fork", c.withJournal(t, base, ran, []*journal.Event{endsAt5, r4, r5}),
		[]*journal.Event{a4, a5, r4, r5}, 5, checkFork)
	// a, restored, wrote r4 alone, and healed the fork with a4 before the
	// activation reached it: the heal keeps the longer branch (a4, a5) and
	// signs r4's content again at epoch 0 (h6) before the heal event
	// (h7). Content a heal signed again of a stale event is stale too, so
	// h6 is set aside with r4, and h7 follows a gap: a broken chain until a
	// heals again.
	h, err := journal.Heal(slices.Concat(base, ran, []*journal.Event{r4}), a, vectorTime.Add(time.Hour))
	if err != nil || len(h) != 2 {
		t.Fatalf("the heal wrote %d events (%v), want r4 signed again and the heal", len(h), err)
	}
	add("journal-activation-by-id-sets-aside-what-a-heal-signed-again", c.withJournal(t, base, ran, []*journal.Event{endsAtA5, r4}, h),
		[]*journal.Event{r4, h[0], h[1]}, 7, checkBrokenChain)
}

func reversedLines(lines [][]byte) [][]byte {
	out := slices.Clone(lines)
	slices.Reverse(out)
	return out
}

// vectorFiles lists the files of testdata/vectors the generator owns: all
// but the Python reader.
func vectorFiles(t *testing.T) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(vectorsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(vectorsDir, p)
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); rel != "check.py" && !strings.Contains(rel, "__pycache__") {
			names = append(names, rel)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return names
}

func TestVectorsAreWhatTheCodeWrites(t *testing.T) {
	v := buildVectors(t)
	if *update {
		for _, name := range vectorFiles(t) {
			if _, ok := v.files[name]; !ok {
				if err := os.Remove(filepath.Join(vectorsDir, filepath.FromSlash(name))); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, data := range v.files {
			writeFile(t, filepath.Join(vectorsDir, filepath.FromSlash(name)), data)
		}
		return
	}
	for _, name := range slices.Sorted(maps.Keys(v.files)) {
		got, err := os.ReadFile(filepath.Join(vectorsDir, filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("%s: %v (go test ./capsule -run Vectors -update writes the vectors)", name, err)
			continue
		}
		if !bytes.Equal(got, v.files[name]) {
			t.Errorf("%s: the code now writes other bytes than the committed vector: a change of the format, or of the vectors (review, then go test ./capsule -run Vectors -update)", name)
		}
	}
	for _, name := range vectorFiles(t) {
		if _, ok := v.files[name]; !ok {
			t.Errorf("%s: committed, but no longer written (go test ./capsule -run Vectors -update removes it)", name)
		}
	}
}

// readExpected reads expected.json: path → the checks, and for a journal
// vector what a reader reads of its journal.
func readExpected(t *testing.T, dir string) map[string]journalRead {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	out := map[string]journalRead{}
	for name, r := range raw {
		var one string
		if json.Unmarshal(r, &one) == nil {
			out[name] = journalRead{Checks: []string{one}}
			continue
		}
		var many []string
		if json.Unmarshal(r, &many) == nil {
			out[name] = journalRead{Checks: many}
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		var read journalRead
		if err := dec.Decode(&read); err != nil || read.Checks == nil || read.Vector == nil {
			t.Fatalf("expected.json: %s: neither checks nor a journal read (%v)", name, err)
		}
		out[name] = read
	}
	return out
}

func TestGoReaderGivesEveryVectorItsExpectedResult(t *testing.T) {
	expected := readExpected(t, vectorsDir)
	if len(expected) == 0 {
		t.Fatal("expected.json names no vectors")
	}
	for _, name := range slices.Sorted(maps.Keys(expected)) {
		t.Run(name, func(t *testing.T) {
			want := expected[name]
			p := filepath.Join(vectorsDir, filepath.FromSlash(name))
			var got []string
			switch path.Dir(name) {
			case "events":
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				line, ok := bytes.CutSuffix(data, []byte("\n"))
				if !ok || bytes.Contains(line, []byte("\n")) {
					t.Fatalf("an event vector is one line ending in a newline")
				}
				_, err = journal.ParseLine(line)
				got = []string{eventCheck(err)}
			case "manifests":
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				m, err := capsule.ParseManifest(data)
				if err == nil {
					_, err = m.CheckSignature()
				}
				got = []string{manifestCheck(err)}
			case "capsules":
				rep, err := capsule.Verify(p, capsule.VerifyOptions{})
				if err != nil {
					t.Fatal(err)
				}
				got = problemChecks(rep)
				if want.Vector != nil {
					checkJournalRead(t, p, rep, want)
				}
			default:
				t.Fatalf("no reader for %s", name)
			}
			if !slices.Equal(got, want.Checks) {
				t.Errorf("got %v, want %v", got, want.Checks)
			}
		})
	}
}

// checkJournalRead checks that the code reads the journal of the capsule
// tar at p as expected.json records: the counts of readable and
// quarantined events (through journal.Readable and capsule.Verify's
// report) and the version vector.
func checkJournalRead(t *testing.T, p string, rep *capsule.Report, want journalRead) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	view, quarantined, vec := readJournal(t, data)
	if len(view) != want.Readable || len(quarantined) != want.Quarantined {
		t.Errorf("journal.Readable: %d readable, %d quarantined; want %d and %d", len(view), len(quarantined), want.Readable, want.Quarantined)
	}
	if rep.Quarantined != want.Quarantined {
		t.Errorf("capsule.Verify reports %d quarantined, want %d", rep.Quarantined, want.Quarantined)
	}
	if !maps.Equal(vec, want.Vector) {
		t.Errorf("journal.VectorOf: got %v, want %v", vec, want.Vector)
	}
}

// eventCheck names the check journal.ParseLine failed.
func eventCheck(err error) string {
	switch {
	case err == nil:
		return checkOK
	case errors.Is(err, journal.ErrFutureFormat):
		return checkFutureFormat
	case errors.Is(err, journal.ErrNotCanonical):
		return checkNotCanonical
	case errors.Is(err, journal.ErrBadSignature):
		return checkBadSignature
	case errors.Is(err, journal.ErrBadID):
		return checkBadID
	case errors.Is(err, journal.ErrInvalidEvent):
		return checkInvalidEvent
	}
	return "unexpected: " + err.Error()
}

// manifestCheck names the check capsule.ParseManifest or CheckSignature
// failed.
func manifestCheck(err error) string {
	switch {
	case err == nil:
		return checkOK
	case errors.Is(err, capsule.ErrFutureFormat):
		return checkFutureFormat
	case errors.Is(err, capsule.ErrNotCapsule):
		return checkNotCapsule
	case errors.Is(err, capsule.ErrNotCanonical):
		return checkNotCanonical
	case errors.Is(err, capsule.ErrInvalidManifest):
		return checkInvalidManifest
	case errors.Is(err, capsule.ErrBadDigest):
		return checkBadDigest
	case errors.Is(err, capsule.ErrBadSignature):
		return checkBadSignature
	}
	return "unexpected: " + err.Error()
}

// problemChecks names the checks a Verify report failed, sorted, each
// once; "ok" when it found no problem.
func problemChecks(rep *capsule.Report) []string {
	set := map[string]bool{}
	for _, p := range rep.Problems {
		set[problemCheck(p)] = true
	}
	if len(set) == 0 {
		return []string{checkOK}
	}
	return slices.Sorted(maps.Keys(set))
}

func problemCheck(p capsule.Problem) string {
	var le *journal.LineError
	switch err := p.Err; {
	case errors.Is(err, capsule.ErrUnsafeTar):
		return checkUnsafeTar
	case p.File == capsule.ManifestFile:
		return manifestCheck(err)
	case errors.As(err, &le):
		return eventCheck(le.Err)
	case errors.Is(err, journal.ErrFork):
		return checkFork
	case errors.Is(err, journal.ErrBrokenChain):
		return checkBrokenChain
	case errors.Is(err, journal.ErrNotMember):
		return checkNotMember
	case errors.Is(err, journal.ErrNoCustody):
		return checkNoCustody
	}
	// The file checks of capsule.Verify carry no sentinel errors; these
	// are their messages.
	msg := p.Err.Error()
	switch {
	case strings.HasPrefix(msg, "missing"):
		return checkMissingFile
	case strings.HasPrefix(msg, "truncated") || strings.Contains(msg, "cut short inside the sealed part"):
		return checkTruncated
	case strings.HasPrefix(msg, "size is") || strings.HasPrefix(msg, "content does not match"):
		return checkHashMismatch
	case msg == "not listed in the manifest":
		return checkUnlistedFile
	case strings.Contains(msg, "which the capsule does not hold"):
		return checkMissingBlob
	case slices.Contains([]string{capsule.AgentFile, capsule.EnvironmentFile, capsule.IndexFile, capsule.SnapshotFile}, p.File):
		return checkInvalidContent
	}
	return "unexpected: " + p.String()
}

// TestPythonReaderGivesEveryVectorItsExpectedResult runs the independent
// reader, testdata/vectors/check.py (Python 3.11, standard library only),
// over the vectors and the golden capsule.
func TestPythonReaderGivesEveryVectorItsExpectedResult(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH, so the independent reader (testdata/vectors/check.py) was not run")
	}
	cmd := exec.Command(python, filepath.Join(vectorsDir, "check.py"), vectorsDir, goldenDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Log(lines[len(lines)-1])
}

// TestFormatDocShowsTheVectors keeps the vectors docs/FORMAT.md shows
// inline the same as the committed ones.
func TestFormatDocShowsTheVectors(t *testing.T) {
	doc, err := os.ReadFile("../docs/FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	var keys struct{ Keys []vectorKey }
	data, err := os.ReadFile(filepath.Join(vectorsDir, "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &keys); err != nil {
		t.Fatal(err)
	}
	line, err := os.ReadFile(filepath.Join(vectorsDir, "events", "ok.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(vectorsDir, "manifests", "signed.json"))
	if err != nil {
		t.Fatal(err)
	}
	a := keys.Keys[0]
	event := members(t, bytes.TrimSuffix(line, []byte("\n")))
	delete(event, "id")
	idSum := sha256.Sum256(canonicalOf(t, event))
	delete(event, "sig")
	unsigned := members(t, manifest)
	delete(unsigned, "digest")
	delete(unsigned, "signature")
	for _, want := range []string{
		a.Seed, a.PublicKey, a.PublicKeyProtobuf, a.Multihash, a.PeerID,
		string(bytes.TrimSuffix(line, []byte("\n"))), string(canonicalOf(t, event)),
		hex.EncodeToString(idSum[:]), "0180041220" + hex.EncodeToString(idSum[:]),
		string(manifest), sha256Hex(canonicalOf(t, unsigned)),
	} {
		if !bytes.Contains(doc, []byte(want)) {
			t.Errorf("docs/FORMAT.md (Test vectors) does not show %.80s…; copy it from testdata/vectors", want)
		}
	}
}
