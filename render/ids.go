package render

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
)

// Tool-call ids. The journal keeps the id a call was made with (the
// neutral id); each provider gets an id in its own alphabet. The mapping is
// deterministic (the same journal gives the same ids) and reversible
// (Result.CallIDs maps every id that changed back to the neutral one).
//
// All providers get ids from [A-Za-z0-9_-] (Anthropic's alphabet, and safe
// for the others), at most 40 characters for OpenAI Chat Completions
// (which refuses longer ones) and 64 for the rest:
//
//   - an id that already fits is kept as it is;
//   - otherwise it becomes "t64-" + its unpadded base64url, when that fits
//     (decodable without the table);
//   - otherwise "tsha-" + the first 32 hex digits of its SHA-256;
//   - a second call reusing an id already given out (the journal should not
//     have one, but a merge may) gets "tsha-" + the hash of the id and its
//     occurrence number.
//
// Neutral ids that begin with "t64-" or "tsha-" are always encoded, so
// that decoding is never ambiguous.

const (
	idPrefix64   = "t64-"
	idPrefixHash = "tsha-"
)

// maxIDLen is the longest tool-call id p accepts.
func maxIDLen(p Provider) int {
	if p == OpenAIChat {
		return 40
	}
	return 64
}

// idMap hands out provider ids for one render. Ids are unique without a
// set of those given out: kept ids are distinct neutral ids, "t64-" ids
// encode distinct neutral ids and nothing else starts with "t64-", and a
// repeated neutral id is hashed with its occurrence number ("tsha-" ids
// differ unless SHA-256 collides in 128 bits).
type idMap struct {
	max  int
	back map[string]string // provider id -> neutral id, for ids that changed
}

func newIDMap(p Provider) *idMap {
	return &idMap{max: maxIDLen(p)}
}

// of returns the provider id of call c, assigning it on first use.
func (m *idMap) of(c *entry) string {
	if c.pid != "" {
		return c.pid
	}
	id := m.encode(c.callID)
	if c.repeat > 0 {
		id = m.hashed(c.callID + "\x00" + strconv.Itoa(c.repeat+1))
	}
	if id != c.callID {
		if m.back == nil {
			m.back = make(map[string]string)
		}
		m.back[id] = c.callID
	}
	c.pid = id
	return id
}

func (m *idMap) encode(neutral string) string {
	if m.fits(neutral) && !strings.HasPrefix(neutral, idPrefix64) && !strings.HasPrefix(neutral, idPrefixHash) {
		return neutral
	}
	if n := len(idPrefix64) + base64.RawURLEncoding.EncodedLen(len(neutral)); n <= m.max && len(neutral) > 0 {
		return idPrefix64 + base64.RawURLEncoding.EncodeToString([]byte(neutral))
	}
	return m.hashed(neutral)
}

func (m *idMap) hashed(s string) string {
	sum := sha256.Sum256([]byte(s))
	return idPrefixHash + hex.EncodeToString(sum[:16])
}

func (m *idMap) fits(id string) bool {
	if id == "" || len(id) > m.max {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
