package journal

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multihash"
)

// replaceMember returns line with the member key set to the raw value
// (added in sorted place if absent), without re-signing.
func replaceMember(tb testing.TB, line []byte, key, value string) []byte {
	tb.Helper()
	ms, err := splitMembers(line)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := rawMember(key, []byte(value))
	if err != nil {
		tb.Fatal(err)
	}
	for i := range ms {
		if ms[i].key == key {
			ms[i] = m
			return joinMembers(ms)
		}
	}
	return joinMembers(insertMember(ms, m))
}

func dropMember(tb testing.TB, line []byte, key string) []byte {
	tb.Helper()
	ms, err := splitMembers(line)
	if err != nil {
		tb.Fatal(err)
	}
	return joinMembers(ms, key)
}

// sample returns the second event of a chain, with a session, a turn and a
// body full of things canonical JSON cares about.
func sample(tb testing.TB, s Signer) *Event {
	tb.Helper()
	first, err := NewEvent(s, Stamp{Seq: 1, Clock: 1, Time: testTime}, draft("test", `{}`))
	if err != nil {
		tb.Fatal(err)
	}
	d := Draft{Type: "message", Session: "s-1", Turn: "t-1", Body: []byte(`{"role":"user","content":[{"type":"text","text":"héllo \"you\"\n\u2028 😀"}],"n":1e3,"x":-0.5}`)}
	e, err := NewEvent(s, Stamp{Seq: 2, Prev: first.ID, Clock: 2, Epoch: 3, Time: testTime}, d)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func TestParseLineReadsWhatNewEventWrote(t *testing.T) {
	s := newSigner(t)
	e := sample(t, s)
	got, err := ParseLine(e.Line())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Line(), e.Line()) {
		t.Fatalf("line changed:\n%s\n%s", got.Line(), e.Line())
	}
	want := Event{ID: e.ID, V: 1, Machine: s.Machine(), Seq: 2, Prev: e.Prev, Clock: 2, Epoch: 3,
		Time: "2026-01-02T03:04:05.000000006Z", Session: "s-1", Turn: "t-1", Type: "message", Sig: e.Sig}
	body := got.Body
	got.Body, got.line = nil, ""
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("fields:\n got %+v\nwant %+v", *got, want)
	}
	if !bytes.Equal(body, e.Body) {
		t.Fatalf("body %s, want %s", body, e.Body)
	}
	if string(e.Body) != `{"content":[{"text":"héllo \"you\"\n`+"\u2028"+` 😀","type":"text"}],"n":1000,"role":"user","x":-0.5}` {
		t.Fatalf("body not canonical: %s", e.Body)
	}
	if !strings.HasPrefix(e.ID, "bagaaiera") {
		t.Fatalf("id %s is not a base32 CIDv1 json/sha2-256", e.ID)
	}
}

func TestParseLineRefusesTampering(t *testing.T) {
	s, other := newSigner(t), newSigner(t)
	e := sample(t, s)
	line := e.Line()
	swap := func(old, new string) []byte {
		t.Helper()
		if !bytes.Contains(line, []byte(old)) {
			t.Fatalf("%q not in %s", old, line)
		}
		return bytes.Replace(line, []byte(old), []byte(new), 1)
	}
	sig := []byte(e.Sig)
	sig[10] ^= 1 // still base64, another signature
	tests := []struct {
		name string
		line []byte
		want error
	}{
		{"a changed body fails the signature", swap(`"role":"user"`, `"role":"user2"`), ErrBadSignature},
		{"a changed signature fails", swap(e.Sig, string(sig)), ErrBadSignature},
		{"a signature that is not base64 fails", swap(e.Sig, "not base64!"), ErrBadSignature},
		{"a changed id fails the id check", swap(e.ID, e.ID[:20]+flip(e.ID[20])+e.ID[21:]), ErrBadID},
		{"a changed seq fails the signature", swap(`"seq":2`, `"seq":3`), ErrBadSignature},
		{"a changed clock fails the signature", swap(`"clock":2`, `"clock":9`), ErrBadSignature},
		{"a changed epoch fails the signature", swap(`"epoch":3`, `"epoch":4`), ErrBadSignature},
		{"a changed prev fails the signature", swap(e.Prev, e.ID), ErrBadSignature},
		{"a changed time fails the signature", swap(`05.000000006Z`, `05.000000007Z`), ErrBadSignature},
		{"a changed session fails the signature", swap(`"session":"s-1"`, `"session":"s-2"`), ErrBadSignature},
		{"a changed turn fails the signature", swap(`"turn":"t-1"`, `"turn":"t-2"`), ErrBadSignature},
		{"a changed type fails the signature", swap(`"type":"message"`, `"type":"messagf"`), ErrBadSignature},
		{"an added unknown field fails the signature", replaceMember(t, line, "zzz", `1`), ErrBadSignature},
		{"another machine's peer ID fails the signature", swap(s.Machine(), other.Machine()), ErrBadSignature},
		{"a machine that is not a peer ID is invalid", swap(s.Machine(), "not-a-peer"), ErrInvalidEvent},
		{"a newer format version is refused", replaceMember(t, line, "v", `2`), ErrFutureFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseLine(tt.line)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// resigned returns line with the member key set to the raw value, signed
// again by s and given its new id: a line a writer could really produce.
func resigned(tb testing.TB, s *testSigner, line []byte, key, value string) []byte {
	tb.Helper()
	ms, err := splitMembers(replaceMember(tb, line, key, value))
	if err != nil {
		tb.Fatal(err)
	}
	if key != "sig" {
		sig, err := s.Sign(joinMembers(ms, "id", "sig"))
		if err != nil {
			tb.Fatal(err)
		}
		ms, err = splitMembers(replaceMember(tb, joinMembers(ms), "sig", `"`+base64.StdEncoding.EncodeToString(sig)+`"`))
		if err != nil {
			tb.Fatal(err)
		}
	}
	return replaceMember(tb, joinMembers(ms), "id", `"`+idOf(joinMembers(ms, "id"))+`"`)
}

func TestParseLineReadsEveryTimeTheFormatAllows(t *testing.T) {
	s := newSigner(t)
	line := sample(t, s).Line()
	for _, tm := range []string{
		"2026-01-02T03:04:05Z",
		"2026-01-02T03:04:05.5Z",
		"2026-01-02T03:04:05.123456789123Z",
		"2026-01-02T05:04:05.000000006+02:00",
		"2026-01-02T03:04:05-00:00",
		"2024-02-29T23:59:59+23:59",
	} {
		if _, err := ParseLine(resigned(t, s, line, "time", `"`+tm+`"`)); err != nil {
			t.Errorf("time %s: %v", tm, err)
		}
	}
}

func TestParseLineRefusesAPeerIDThatEncodesItsKeyAnotherWay(t *testing.T) {
	s := newSigner(t)
	raw, err := s.key.GetPublic().Raw()
	if err != nil {
		t.Fatal(err)
	}
	// The protobuf PublicKey with its two fields swapped: Data, then Type.
	proto := append(append([]byte{0x12, 0x20}, raw...), 0x08, 0x01)
	mh, err := multihash.Encode(proto, multihash.IDENTITY)
	if err != nil {
		t.Fatal(err)
	}
	other := peer.ID(mh).String()
	if other == s.Machine() {
		t.Fatal("the swapped encoding gave the same peer ID")
	}
	_, err = ParseLine(resigned(t, s, sample(t, s).Line(), "machine", `"`+other+`"`))
	if !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), "does not encode its key as libp2p does") {
		t.Fatalf("got %v, want %v", err, ErrInvalidEvent)
	}
	if _, err := MachineKey(other); err == nil {
		t.Fatal("MachineKey accepted it")
	}
}

func TestParseLineRefusesAnotherSpellingOfASignature(t *testing.T) {
	s := newSigner(t)
	e := sample(t, s)
	raw, err := base64.StdEncoding.DecodeString(e.Sig)
	if err != nil {
		t.Fatal(err)
	}
	last := []byte(e.Sig)
	last[len(last)-3]++ // "…w==" to "…x==": the same 64 bytes with padding bits set
	for name, sig := range map[string]string{
		"a line break inside":                `"` + e.Sig[:40] + `\n` + e.Sig[40:] + `"`,
		"a carriage return and a line break": `"` + e.Sig[:40] + `\r\n` + e.Sig[40:] + `"`,
		"padding bits set":                   `"` + string(last) + `"`,
		"no padding":                         `"` + base64.RawStdEncoding.EncodeToString(raw) + `"`,
	} {
		t.Run(name, func(t *testing.T) {
			// The id is right for the new spelling: only the signature's
			// spelling is wrong, and it would make a second event, a fork
			// of the machine's chain, out of one signature.
			_, err := ParseLine(resigned(t, s, e.Line(), "sig", sig))
			if !errors.Is(err, ErrBadSignature) {
				t.Fatalf("got %v, want %v", err, ErrBadSignature)
			}
		})
	}
}

func TestNewEventRefusesALineOverTheLimit(t *testing.T) {
	s := newSigner(t)
	st := Stamp{Seq: 1, Clock: 1, Time: testTime}
	small, err := NewEvent(s, st, draft("note", `{"t":""}`))
	if err != nil {
		t.Fatal(err)
	}
	fill := MaxLineSize - len(small.Line())
	e, err := NewEvent(s, st, draft("note", `{"t":"`+strings.Repeat("a", fill)+`"}`))
	if err != nil {
		t.Fatalf("a line of exactly %d bytes: %v", MaxLineSize, err)
	}
	if len(e.Line()) != MaxLineSize {
		t.Fatalf("line is %d bytes, want %d", len(e.Line()), MaxLineSize)
	}
	if _, err := NewEvent(s, st, draft("note", `{"t":"`+strings.Repeat("a", fill+1)+`"}`)); !errors.Is(err, ErrInvalidDraft) {
		t.Fatalf("a line of %d bytes: got %v, want %v", MaxLineSize+1, err, ErrInvalidDraft)
	}
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

func TestParseLineCatchesEveryFlippedBit(t *testing.T) {
	e := sample(t, newSigner(t))
	line := e.Line()
	sentinels := []error{ErrInvalidEvent, ErrNotCanonical, ErrBadSignature, ErrBadID, ErrFutureFormat}
	for i := range line {
		for _, bit := range []byte{0x01, 0x20} {
			b := bytes.Clone(line)
			b[i] ^= bit
			_, err := ParseLine(b)
			if err == nil {
				t.Fatalf("flipping bit %#x of byte %d (%q) went unnoticed", bit, i, line[i])
			}
			known := false
			for _, s := range sentinels {
				known = known || errors.Is(err, s)
			}
			if !known {
				t.Fatalf("byte %d: error %v wraps no sentinel", i, err)
			}
		}
	}
}

func TestParseLineRefusesBadLines(t *testing.T) {
	s := newSigner(t)
	e := sample(t, s)
	line := e.Line()
	pid, err := peer.Decode(s.Machine())
	if err != nil {
		t.Fatal(err)
	}
	cidSpelling := peer.ToCid(pid).String()
	tests := []struct {
		name string
		line []byte
		want error
		says string
	}{
		{"an empty line is not JSON", nil, ErrInvalidEvent, "not JSON"},
		{"text is not JSON", []byte("hello"), ErrInvalidEvent, "not JSON"},
		{"a truncated line is not JSON", line[:len(line)-5], ErrInvalidEvent, "not JSON"},
		{"an array is not an event", []byte(`[1,2]`), ErrInvalidEvent, "not a JSON object"},
		{"a number is not an event", []byte(`1`), ErrInvalidEvent, "not a JSON object"},
		{"a line with spaces is not canonical", bytes.Replace(line, []byte(`"seq":2`), []byte(`"seq": 2`), 1), ErrNotCanonical, "not RFC 8785 canonical JSON"},
		{"a trailing newline is not canonical", append(bytes.Clone(line), '\n'), ErrNotCanonical, ""},
		{"a carriage return is not canonical", append(bytes.Clone(line), '\r'), ErrNotCanonical, ""},
		{"unsorted keys are not canonical", append([]byte(`{"v":1,`), line[1:]...), ErrInvalidEvent, "Duplicate key"},
		{"a needless escape is not canonical", bytes.Replace(line, []byte(`"s-1"`), []byte(`"\u0073-1"`), 1), ErrNotCanonical, ""},
		{"a float written long is not canonical", replaceMember(t, line, "zzz", `1.50`), ErrNotCanonical, ""},
		{"a duplicate key is refused", bytes.Replace(line, []byte(`"turn":"t-1"`), []byte(`"turn":"t-1","turn":"t-1"`), 1), ErrInvalidEvent, "Duplicate key"},
		{"invalid UTF-8 is refused", bytes.Replace(line, []byte(`s-1`), []byte("s\xff1"), 1), ErrInvalidEvent, "not JSON"},
		{"format version 2 asks for an upgrade", replaceMember(t, line, "v", `2`), ErrFutureFormat, "event format 2 is newer than this tern understands (1): upgrade tern"},
		{"a newer version is reported even when not canonical", []byte(`{"v": 7}`), ErrFutureFormat, "event format 7 is newer"},
		{"version 0 is invalid", replaceMember(t, line, "v", `0`), ErrInvalidEvent, `"v"`},
		{"a string version is invalid", replaceMember(t, line, "v", `"1"`), ErrInvalidEvent, `"v"`},
		{"a missing version is invalid", dropMember(t, line, "v"), ErrInvalidEvent, `missing field "v"`},
		{"seq 0 is invalid", replaceMember(t, line, "seq", `0`), ErrInvalidEvent, `"seq"`},
		{"a string seq is invalid", replaceMember(t, line, "seq", `"2"`), ErrInvalidEvent, `"seq"`},
		{"a fractional clock is invalid", replaceMember(t, line, "clock", `1.5`), ErrInvalidEvent, `"clock"`},
		{"a negative epoch is invalid", replaceMember(t, line, "epoch", `-1`), ErrInvalidEvent, `"epoch"`},
		{"a clock above 2^53-1 is invalid", replaceMember(t, line, "clock", `9007199254740992`), ErrInvalidEvent, `"clock"`},
		{"a huge clock is invalid", replaceMember(t, line, "clock", `1e+21`), ErrInvalidEvent, `"clock"`},
		{"an empty type is invalid", replaceMember(t, line, "type", `""`), ErrInvalidEvent, `"type"`},
		{"a type with a line break is invalid", replaceMember(t, line, "type", `"message\nid: 999999"`), ErrInvalidEvent, `field "type": type "message\nid: 999999": byte 8 is '\n'`},
		{"a null session is invalid", replaceMember(t, line, "session", `null`), ErrInvalidEvent, `"session"`},
		{"a time that is not RFC 3339 is invalid", replaceMember(t, line, "time", `"yesterday"`), ErrInvalidEvent, `"time"`},
		{"a time with a comma before its fraction is invalid", replaceMember(t, line, "time", `"2026-01-02T03:04:05,5Z"`), ErrInvalidEvent, `"time"`},
		{"a time with an offset of 24 hours is invalid", replaceMember(t, line, "time", `"2026-01-02T03:04:05+24:00"`), ErrInvalidEvent, `"time"`},
		{"a time with an offset of 60 minutes is invalid", replaceMember(t, line, "time", `"2026-01-02T03:04:05+02:60"`), ErrInvalidEvent, `"time"`},
		{"a time with a lower-case z is invalid", replaceMember(t, line, "time", `"2026-01-02T03:04:05z"`), ErrInvalidEvent, `"time"`},
		{"a time with an empty fraction is invalid", replaceMember(t, line, "time", `"2026-01-02T03:04:05.Z"`), ErrInvalidEvent, `"time"`},
		{"a time on a day that does not exist is invalid", replaceMember(t, line, "time", `"2026-02-29T03:04:05Z"`), ErrInvalidEvent, `"time"`},
		{"a leap second is invalid", replaceMember(t, line, "time", `"2026-01-02T03:04:60Z"`), ErrInvalidEvent, `"time"`},
		{"seq 1 with a prev is invalid", replaceMember(t, line, "seq", `1`), ErrInvalidEvent, "seq 1 has prev"},
		{"a prev that is not an id is invalid", replaceMember(t, line, "prev", `"abc"`), ErrInvalidEvent, `"prev"`},
		{"a machine too long for a peer ID is refused before decoding", replaceMember(t, line, "machine", `"1`+strings.Repeat("2", 1<<20)+`"`), ErrInvalidEvent, "too long for a peer ID"},
		{"a non-canonical machine spelling is invalid", replaceMember(t, line, "machine", `"`+cidSpelling+`"`), ErrInvalidEvent, "not in its canonical form"},
	}
	for _, name := range []string{"id", "machine", "seq", "prev", "clock", "epoch", "time", "session", "turn", "type", "body", "sig"} {
		tests = append(tests, struct {
			name string
			line []byte
			want error
			says string
		}{"a line without " + name + " is invalid", dropMember(t, line, name), ErrInvalidEvent, `missing field "` + name + `"`})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseLine(tt.line)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("error %q does not say %q", err, tt.says)
			}
		})
	}
}

func TestUnknownFieldsAndTypesSurviveParsing(t *testing.T) {
	s := newSigner(t)
	extra := []member{}
	for _, kv := range [][2]string{
		{"zeta", `{"a":"x","b":[1,2,{"c":null}]}`},
		{"Alpha", `true`},
		{"ünïcode", `"é"`},
		{"\U0001F600", `1`}, // sorts after ü in UTF-16 order, not in code point order
		{"\uff61", `2`},
	} {
		m, err := rawMember(kv[0], []byte(kv[1]))
		if err != nil {
			t.Fatal(err)
		}
		extra = append(extra, m)
	}
	e, err := newEvent(s, Stamp{Seq: 1, Clock: 1, Time: testTime}, draft("future.thing", `{}`), []byte(`{"anything":[true]}`), extra)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := Canonical([]byte(e.line))
	if err != nil || string(canon) != e.line {
		t.Fatalf("built line is not canonical (%v):\n%s\n%s", err, e.line, canon)
	}
	got, err := ParseLine(e.Line())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Line(), e.Line()) || got.Type != "future.thing" {
		t.Fatalf("changed: %s", got.Line())
	}
	for _, want := range []string{`"zeta":{"a":"x","b":[1,2,{"c":null}]}`, `"Alpha":true`, `"ünïcode":"é"`} {
		if !bytes.Contains(got.Line(), []byte(want)) {
			t.Fatalf("%s lost from %s", want, got.Line())
		}
	}
}

func TestNewEventRefusesWhatCannotBeRead(t *testing.T) {
	s := newSigner(t)
	first := chainOf(t, s, 1)[0]
	impostor := &testSigner{key: newSigner(t).key, machine: s.Machine()}
	failing := &testSigner{key: s.key, machine: s.machine, fail: errors.New("keyring locked")}
	tests := []struct {
		name   string
		signer Signer
		stamp  Stamp
		draft  Draft
		want   error
	}{
		{"seq 0 is refused", s, Stamp{Seq: 0, Clock: 1}, draft("test", ``), ErrInvalidEvent},
		{"clock 0 is refused", s, Stamp{Seq: 1, Clock: 0}, draft("test", ``), ErrInvalidEvent},
		{"a clock above 2^53-1 is refused", s, Stamp{Seq: 1, Clock: 1 << 53}, draft("test", ``), ErrInvalidEvent},
		{"seq 2 without prev is refused", s, Stamp{Seq: 2, Clock: 1}, draft("test", ``), ErrInvalidEvent},
		{"seq 1 with a prev is refused", s, Stamp{Seq: 1, Prev: first.ID, Clock: 1}, draft("test", ``), ErrInvalidEvent},
		{"a prev that is not an id is refused", s, Stamp{Seq: 2, Prev: "x", Clock: 1}, draft("test", ``), ErrInvalidEvent},
		{"an empty type is refused", s, Stamp{Seq: 1, Clock: 1}, draft("", ``), ErrInvalidDraft},
		{"a body that is not JSON is refused", s, Stamp{Seq: 1, Clock: 1}, draft("test", `{"a":`), ErrInvalidDraft},
		{"a body integer beyond 2^53-1 is refused", s, Stamp{Seq: 1, Clock: 1}, draft("test", `{"big":123456789012345678901234}`), ErrInvalidDraft},
		{"a session that is not UTF-8 is refused", s, Stamp{Seq: 1, Clock: 1}, Draft{Type: "test", Session: "\xff"}, ErrInvalidDraft},
		{"a signer whose key is not its machine's is caught", impostor, Stamp{Seq: 1, Clock: 1}, draft("test", ``), ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewEvent(tt.signer, tt.stamp, tt.draft)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("a signer's error is returned", func(t *testing.T) {
		_, err := NewEvent(failing, Stamp{Seq: 1, Clock: 1}, draft("test", ``))
		if err == nil || !strings.Contains(err.Error(), "keyring locked") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("an empty body becomes {}", func(t *testing.T) {
		e, err := NewEvent(s, Stamp{Seq: 1, Clock: 1}, Draft{Type: "test"})
		if err != nil || string(e.Body) != "{}" {
			t.Fatalf("got %v %s", err, e.Body)
		}
	})
	t.Run("control characters in strings are escaped canonically", func(t *testing.T) {
		e, err := NewEvent(s, Stamp{Seq: 1, Clock: 1}, Draft{Type: "x", Session: "é\u2028", Turn: "x\x01\x1f\t\"\\/"})
		if err != nil {
			t.Fatal(err)
		}
		if e.Turn != "x\x01\x1f\t\"\\/" || !strings.Contains(e.line, `"turn":"x\u0001\u001f\t\"\\/"`) {
			t.Fatalf("got %q in %s", e.Turn, e.line)
		}
	})
}

func TestKeySigner(t *testing.T) {
	t.Run("an ed25519 key signs events that verify", func(t *testing.T) {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		ks, err := NewKeySigner(k)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewEvent(ks, Stamp{Seq: 1, Clock: 1}, draft("test", `{}`)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a secp256k1 key is refused", func(t *testing.T) {
		k, _, err := crypto.GenerateSecp256k1Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewKeySigner(k); err == nil || !strings.Contains(err.Error(), "ed25519") {
			t.Fatalf("got %v", err)
		}
	})
}
