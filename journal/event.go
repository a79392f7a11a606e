package journal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multihash"
)

// FormatVersion is the envelope format this package reads and writes.
const FormatVersion = 1

// codecJSON is the multicodec of event ids (json, 0x0200).
const codecJSON = 0x0200

// timeLayout is how Append and NewEvent write the time field: RFC 3339,
// UTC, always nine fractional digits.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// MaxLineSize bounds one event line, without its newline: NewEvent refuses
// a longer event, so that every event fits one sync frame (8 MiB, a tag
// byte included). ParseLine reads longer lines.
const MaxLineSize = 8<<20 - 1

// Event is one journal entry. Events come from ParseLine, Decode, NewEvent
// or a Log; the exported fields are a decoded view of Line, so changing
// them changes nothing else (and a hand-built Event has no Line). An Event
// is immutable and safe to share between goroutines.
type Event struct {
	ID      string
	V       int
	Machine string
	Seq     uint64
	Prev    string
	Clock   uint64
	Epoch   uint64
	Time    string
	Session string
	Turn    string
	Type    string          // a token: [a-z][a-z0-9_.-]*, at most MaxTypeLen bytes
	Body    json.RawMessage // canonical JSON of the body
	Sig     string

	// line is the canonical envelope, unknown fields included. The string
	// fields above are substrings of it, so an event costs one copy.
	line string
}

// Line returns a copy of the canonical bytes of the whole envelope, without
// a trailing newline. It is what ParseLine read, byte for byte.
func (e *Event) Line() []byte { return []byte(e.line) }

// String names the event for logs and errors.
func (e *Event) String() string {
	return fmt.Sprintf("%s (machine %s seq %d clock %d type %s)", e.ID, e.Machine, e.Seq, e.Clock, e.Type)
}

// ParseLine reads one journal line (without its newline) and checks all of
// it: a JSON object in RFC 8785 canonical form, format version, every
// field's type and range (the event type a token, docs/FORMAT.md "Types"),
// the id, and the signature with the public key embedded in the machine's
// peer ID. Errors wrap ErrInvalidEvent,
// ErrFutureFormat, ErrNotCanonical, ErrBadSignature or ErrBadID. ParseLine
// keeps no reference to line.
func ParseLine(line []byte) (*Event, error) {
	canon, err := Canonical(line)
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrInvalidEvent, err)
	}
	ms, err := splitMembers(canon)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	// The version decides how to read everything else, so it comes first:
	// a newer writer is told to upgrade rather than told its line is bad.
	var vraw []byte
	for _, m := range ms {
		if m.key == "v" {
			vraw = m.val
		}
	}
	if vraw == nil {
		return nil, fmt.Errorf("%w: missing field \"v\"", ErrInvalidEvent)
	}
	v, ok := parseSafeInt(vraw)
	if !ok || v == 0 {
		return nil, fmt.Errorf("%w: field \"v\" must be the integer %d, got %.40s", ErrInvalidEvent, FormatVersion, vraw)
	}
	if v > FormatVersion {
		return nil, futureFormatError{v}
	}
	if !bytes.Equal(canon, line) {
		return nil, fmt.Errorf("%w: re-encoding changes it at byte %d", ErrNotCanonical, firstDifference(canon, line))
	}

	ls := string(canon)
	e := &Event{V: int(v), line: ls}
	var seen uint16
	const (
		fID = 1 << iota
		fMachine
		fSeq
		fPrev
		fClock
		fEpoch
		fTime
		fSession
		fTurn
		fType
		fBody
		fSig
		all = 1<<iota - 1
	)
	var machineRaw []byte
	for _, m := range ms {
		var err error
		switch m.key {
		case "id":
			seen |= fID
			e.ID, err = stringField(m, ls)
		case "machine":
			seen |= fMachine
			machineRaw = m.val
		case "seq":
			seen |= fSeq
			e.Seq, err = intField(m, 1)
		case "prev":
			seen |= fPrev
			e.Prev, err = stringField(m, ls)
		case "clock":
			seen |= fClock
			e.Clock, err = intField(m, 1)
		case "epoch":
			seen |= fEpoch
			e.Epoch, err = intField(m, 0)
		case "time":
			seen |= fTime
			e.Time, err = stringField(m, ls)
			if err == nil && !validTime(e.Time) {
				err = fmt.Errorf("%w: field \"time\" is not an RFC 3339 time: %q", ErrInvalidEvent, e.Time)
			}
		case "session":
			seen |= fSession
			e.Session, err = stringField(m, ls)
		case "turn":
			seen |= fTurn
			e.Turn, err = stringField(m, ls)
		case "type":
			seen |= fType
			e.Type, err = stringField(m, ls)
			if err == nil && e.Type == "" {
				err = fmt.Errorf("%w: field \"type\" is empty", ErrInvalidEvent)
			} else if err == nil {
				if terr := checkType(e.Type); terr != nil {
					err = fmt.Errorf("%w: field \"type\": %v", ErrInvalidEvent, terr)
				}
			}
		case "body":
			seen |= fBody
			e.Body = json.RawMessage(bytes.Clone(m.val))
		case "sig":
			seen |= fSig
			e.Sig, err = stringField(m, ls)
		}
		if err != nil {
			return nil, err
		}
	}
	if seen != all {
		for _, name := range []string{"id", "machine", "seq", "prev", "clock", "epoch", "time", "session", "turn", "type", "body", "sig"} {
			if !slices.ContainsFunc(ms, func(m member) bool { return m.key == name }) {
				return nil, fmt.Errorf("%w: missing field %q", ErrInvalidEvent, name)
			}
		}
	}
	if machineRaw[0] != '"' {
		return nil, fmt.Errorf("%w: field \"machine\" must be a string", ErrInvalidEvent)
	}
	machine, key, err := machineKey(machineRaw[1 : len(machineRaw)-1])
	if err != nil {
		return nil, fmt.Errorf("%w: field \"machine\": %v", ErrInvalidEvent, err)
	}
	e.Machine = machine
	if e.Seq == 1 && e.Prev != "" {
		return nil, fmt.Errorf("%w: machine %s seq 1 has prev %q; the first event of a chain has prev \"\"", ErrInvalidEvent, e.Machine, e.Prev)
	}
	if e.Seq > 1 && !validID(e.Prev) {
		return nil, fmt.Errorf("%w: machine %s seq %d: field \"prev\" is not an event id: %q", ErrInvalidEvent, e.Machine, e.Seq, e.Prev)
	}

	// Only the one standard spelling: the decoder would also skip line
	// breaks, and every other spelling of a signature would give the same
	// content another id.
	sig, err := base64.StdEncoding.Strict().DecodeString(e.Sig)
	if err != nil || len(sig) != ed25519.SignatureSize || base64.StdEncoding.EncodeToString(sig) != e.Sig {
		return nil, fmt.Errorf("%w for machine %s seq %d: field \"sig\" is not a standard base64 ed25519 signature", ErrBadSignature, e.Machine, e.Seq)
	}
	if !key.verify(joinMembers(ms, "id", "sig"), sig) {
		return nil, fmt.Errorf("%w for machine %s seq %d: the signature does not verify (content changed or signed by another key)", ErrBadSignature, e.Machine, e.Seq)
	}
	if want := idOf(joinMembers(ms, "id")); e.ID != want {
		return nil, fmt.Errorf("%w: machine %s seq %d: id is %q, content hashes to %q", ErrBadID, e.Machine, e.Seq, e.ID, want)
	}
	return e, nil
}

// validTime reports whether s is a time as the envelope allows it: RFC 3339
// date-time "YYYY-MM-DDTHH:MM:SS", then optionally "." and one or more
// digits, then "Z" or an offset "+HH:MM" or "-HH:MM" (hours 00-23, minutes
// 00-59); upper-case T and Z, a real calendar date, no leap second.
func validTime(s string) bool {
	if len(s) < 20 || s[10] != 'T' {
		return false
	}
	i := 19
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
		if j == i+1 {
			return false
		}
		i = j
	}
	switch zone := s[i:]; {
	case zone == "Z":
	case len(zone) == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':':
		h, m := zone[1:3], zone[4:6]
		if !isDigits(h) || !isDigits(m) || h > "23" || m > "59" {
			return false
		}
	default:
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, s) // the date, clock and their ranges
	return err == nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// stringField reads a string member of the object whose text is obj;
// without escapes the result shares obj's memory.
func stringField(m member, obj string) (string, error) {
	if len(m.val) < 2 || m.val[0] != '"' {
		return "", fmt.Errorf("%w: field %q must be a string, got %.40s", ErrInvalidEvent, m.key, m.val)
	}
	if bytes.IndexByte(m.val, '\\') < 0 && m.off+len(m.val) <= len(obj) {
		return obj[m.off+1 : m.off+len(m.val)-1], nil // valid UTF-8: the canonicalizer checked it
	}
	s, err := decodeString(m.val)
	if err != nil {
		return "", fmt.Errorf("%w: field %q: %v", ErrInvalidEvent, m.key, err)
	}
	return s, nil
}

func intField(m member, least uint64) (uint64, error) {
	n, ok := parseSafeInt(m.val)
	if !ok || n < least {
		return 0, fmt.Errorf("%w: field %q must be an integer from %d to 2^53-1, got %.40s", ErrInvalidEvent, m.key, least, m.val)
	}
	return n, nil
}

// idOf is the event id of the canonical bytes b: CIDv1, json codec,
// sha2-256, base32 string.
func idOf(b []byte) string {
	sum := sha256.Sum256(b)
	mh := make([]byte, 0, 2+len(sum))
	mh = append(mh, multihash.SHA2_256, byte(len(sum)))
	mh = append(mh, sum[:]...)
	return cid.NewCidV1(codecJSON, mh).String()
}

// validID reports whether s is spelled as an event id: a CIDv1 with the json
// codec and a sha2-256 multihash, in its base32 string form.
func validID(s string) bool {
	if len(s) > maxMachineLen {
		return false
	}
	c, err := cid.Decode(s)
	if err != nil || c.Version() != 1 || c.Type() != codecJSON {
		return false
	}
	p := c.Prefix()
	return p.MhType == multihash.SHA2_256 && p.MhLength == sha256.Size && c.String() == s
}

// keyCache remembers the public keys of machines already seen. Journals hold
// few machines; the cache is emptied when it grows past keyCacheSize so that
// hostile input cannot make it grow without bound.
var keyCache struct {
	sync.Mutex
	m map[string]machineEntry
}

const keyCacheSize = 1024

type machineEntry struct {
	name string
	key  verifyKey
}

// maxMachineLen bounds the machine field before it is decoded (base58
// decoding takes time quadratic in the length). An ed25519 peer ID has 52
// characters.
const maxMachineLen = 128

// MachineKey returns the ed25519 public key embedded in a machine's peer
// ID. It accepts only what a machine's peer ID is in the format: the
// base58btc string (as peer.ID.String writes it; the CID spelling "bafz…"
// and every other base are refused) of the identity multihash of the key's
// libp2p protobuf encoding, exactly 00 24 08 01 12 20 followed by the 32
// key bytes. The error says what is wrong.
func MachineKey(id string) (ed25519.PublicKey, error) {
	name, key, err := machineKey([]byte(id)) // reads id as the inside of a JSON string
	if err == nil && name != id {
		err = fmt.Errorf("peer ID %q is not in its canonical form", id)
	}
	return key.raw, err
}

// machineKey checks that b is a libp2p peer ID, spelled in its canonical
// form, that embeds an ed25519 public key, and returns the ID and the key.
func machineKey(b []byte) (string, verifyKey, error) {
	if len(b) > maxMachineLen {
		return "", verifyKey{}, fmt.Errorf("%d bytes long: too long for a peer ID", len(b))
	}
	keyCache.Lock()
	ent, ok := keyCache.m[string(b)]
	keyCache.Unlock()
	if ok {
		return ent.name, ent.key, nil
	}
	s, err := decodeString(append(append([]byte{'"'}, b...), '"'))
	if err != nil {
		return "", verifyKey{}, err
	}
	id, err := peer.Decode(s)
	if err != nil {
		return "", verifyKey{}, fmt.Errorf("not a peer ID: %q", s)
	}
	if id.String() != s {
		return "", verifyKey{}, fmt.Errorf("peer ID %q is not in its canonical form %q", s, id.String())
	}
	pk, err := id.ExtractPublicKey()
	if err != nil {
		return "", verifyKey{}, fmt.Errorf("peer ID %q does not embed a public key", s)
	}
	if pk.Type() != pb.KeyType_Ed25519 {
		return "", verifyKey{}, fmt.Errorf("peer ID %q has a %s key, not ed25519", s, pk.Type())
	}
	raw, err := pk.Raw()
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return "", verifyKey{}, fmt.Errorf("peer ID %q: bad ed25519 key", s)
	}
	// The key's protobuf could be written another way (fields in another
	// order, say), which would give one key a second peer ID.
	if canon, err := peer.IDFromPublicKey(pk); err != nil || canon != id {
		return "", verifyKey{}, fmt.Errorf("peer ID %q does not encode its key as libp2p does", s)
	}
	ent = machineEntry{name: s, key: newVerifyKey(ed25519.PublicKey(raw))}
	keyCache.Lock()
	if len(keyCache.m) >= keyCacheSize || keyCache.m == nil {
		keyCache.m = make(map[string]machineEntry)
	}
	keyCache.m[s] = ent
	keyCache.Unlock()
	return ent.name, ent.key, nil
}

// Stamp says where a new event goes: its place in the writer's chain, its
// Lamport clock, the holder epoch and the wall-clock time.
type Stamp struct {
	Seq   uint64 // from 1
	Prev  string // id of the writer's event Seq-1; "" when Seq is 1
	Clock uint64 // from 1; one more than the highest clock the writer has seen
	Epoch uint64
	Time  time.Time // written in UTC with nanoseconds
}

// NewEvent makes and signs one event from a draft. It is pure: the caller
// chooses the stamp (Log.Append does it for the file it owns). The result is
// checked with ParseLine, so a signer whose key does not match its Machine
// is caught here, before anything is written. Errors wrap ErrInvalidDraft,
// ErrInvalidEvent (a bad stamp) or ErrBadSignature, or are the signer's.
func NewEvent(s Signer, st Stamp, d Draft) (*Event, error) {
	if s == nil {
		return nil, errors.New("new event: no signer")
	}
	body, err := d.canonicalBody()
	if err != nil {
		return nil, err
	}
	return newEvent(s, st, d, body, nil)
}

// newEvent builds and verifies an event from a draft whose body is already
// canonical, plus extra members (tests use them to play a newer writer).
func newEvent(s Signer, st Stamp, d Draft, body []byte, extra []member) (*Event, error) {
	e, err := buildEvent(s, st, d, body, extra)
	if err != nil {
		return nil, err
	}
	if err := e.verifyBuilt(); err != nil {
		return nil, err
	}
	return e, nil
}

// buildEvent assembles and signs the envelope. It does not check the
// result; verifyBuilt does (Log.Append runs that outside its lock).
func buildEvent(s Signer, st Stamp, d Draft, body []byte, extra []member) (*Event, error) {
	switch {
	case st.Seq < 1 || st.Seq > maxSafeInt:
		return nil, fmt.Errorf("%w: seq %d out of range", ErrInvalidEvent, st.Seq)
	case st.Clock < 1 || st.Clock > maxSafeInt:
		return nil, fmt.Errorf("%w: clock %d out of range", ErrInvalidEvent, st.Clock)
	case st.Epoch > maxSafeInt:
		return nil, fmt.Errorf("%w: epoch %d out of range", ErrInvalidEvent, st.Epoch)
	case (st.Seq == 1) != (st.Prev == ""):
		return nil, fmt.Errorf("%w: seq %d with prev %q: prev is \"\" exactly for seq 1", ErrInvalidEvent, st.Seq, st.Prev)
	}
	e := &Event{
		V:       FormatVersion,
		Machine: s.Machine(),
		Seq:     st.Seq,
		Prev:    st.Prev,
		Clock:   st.Clock,
		Epoch:   st.Epoch,
		Time:    st.Time.UTC().Format(timeLayout),
		Session: d.Session,
		Turn:    d.Turn,
		Type:    d.Type,
		Body:    json.RawMessage(body),
	}
	ms := make([]member, 0, 13+len(extra))
	ms = append(ms,
		uintMember("v", FormatVersion),
		uintMember("seq", e.Seq),
		uintMember("clock", e.Clock),
		uintMember("epoch", e.Epoch),
	)
	for _, f := range [...]struct{ k, v string }{
		{"machine", e.Machine},
		{"prev", e.Prev},
		{"time", e.Time},
		{"session", e.Session},
		{"turn", e.Turn},
		{"type", e.Type},
	} {
		m, err := stringMember(f.k, f.v)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidDraft, err)
		}
		ms = append(ms, m)
	}
	bm, err := rawMember("body", body)
	if err != nil {
		return nil, err
	}
	ms = append(ms, bm)
	ms = append(ms, extra...)
	slices.SortFunc(ms, func(a, b member) int { return CompareMemberNames(a.key, b.key) })

	sig, err := s.Sign(joinMembers(ms))
	if err != nil {
		return nil, fmt.Errorf("sign event as machine %s: %w", e.Machine, err)
	}
	e.Sig = base64.StdEncoding.EncodeToString(sig)
	sm, err := stringMember("sig", e.Sig)
	if err != nil {
		return nil, err
	}
	ms = insertMember(ms, sm)
	e.ID = idOf(joinMembers(ms))
	im, err := stringMember("id", e.ID)
	if err != nil {
		return nil, err
	}
	e.line = string(joinMembers(insertMember(ms, im)))
	if len(e.line) > MaxLineSize {
		return nil, fmt.Errorf("%w: type %q: the event would be %d bytes, over the limit of %d; keep large content in a blob and name it by its CID", ErrInvalidDraft, d.Type, len(e.line), MaxLineSize)
	}
	return e, nil
}

// verifyBuilt checks a built event the way a reader will: its line must
// parse (canonical, signature by the machine's key, id) back to the same
// fields. It catches a signer whose key is not its machine's.
func (e *Event) verifyBuilt() error {
	p, err := ParseLine([]byte(e.line))
	if err != nil {
		return fmt.Errorf("new event as machine %s: %w", e.Machine, err)
	}
	if p.ID != e.ID || p.Machine != e.Machine || p.Seq != e.Seq || p.Prev != e.Prev || p.Clock != e.Clock ||
		p.Epoch != e.Epoch || p.Time != e.Time || p.Session != e.Session || p.Turn != e.Turn || p.Type != e.Type ||
		p.Sig != e.Sig || !bytes.Equal(p.Body, e.Body) {
		return fmt.Errorf("%w: new event as machine %s seq %d does not read back as written", ErrInvalidEvent, e.Machine, e.Seq)
	}
	return nil
}

// insertMember puts m into the sorted members ms at its place.
func insertMember(ms []member, m member) []member {
	i, _ := slices.BinarySearchFunc(ms, m, func(a, b member) int { return CompareMemberNames(a.key, b.key) })
	return slices.Insert(ms, i, m)
}
