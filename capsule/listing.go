package capsule

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// A listing is a parsed snapshot.json, shared and never changed: the same
// bytes are parsed once, however often commits, wants and rounds read them.
// (A 10,000-file listing takes about 23 ms to parse; a change of 100 of its
// files used to parse it five times on each node.)
type listing struct {
	snap  *Snapshot
	blobs []string // snap.Blobs()
}

// listings remembers the listings parsed last, by the sha256 of their
// bytes, up to maxListedEntries entries in all.
var listings = listingCache{byHash: map[string]*listing{}}

const maxListedEntries = 1 << 18 // about 100 MB of parsed entries

type listingCache struct {
	mu      sync.Mutex
	byHash  map[string]*listing
	order   []string // oldest first
	entries int
}

// parsedListing is ParseSnapshot of data, remembered by the sha256 of
// data (hashing a listing costs a fortieth of parsing it; a name the bytes
// were read under is not trusted). The result is shared: never change it.
func parsedListing(data []byte) (*listing, error) {
	h := sha256.Sum256(data)
	sum := hex.EncodeToString(h[:])
	if l := listings.get(sum); l != nil {
		return l, nil
	}
	s, err := ParseSnapshot(data)
	if err != nil {
		return nil, err
	}
	return listings.put(sum, s), nil
}

// rememberListing keeps s as the parse of the bytes it was just encoded
// to, whose sha256 hex is sum. s must not change afterwards.
func rememberListing(sum string, s *Snapshot) { listings.put(sum, s) }

func (c *listingCache) get(sum string) *listing {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byHash[sum]
}

func (c *listingCache) put(sum string, s *Snapshot) *listing {
	l := &listing{snap: s, blobs: s.Blobs()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if had := c.byHash[sum]; had != nil {
		return had
	}
	c.byHash[sum] = l
	c.order = append(c.order, sum)
	c.entries += len(s.Entries)
	for c.entries > maxListedEntries && len(c.order) > 1 {
		old := c.order[0]
		c.order = c.order[1:]
		c.entries -= len(c.byHash[old].snap.Entries)
		delete(c.byHash, old)
	}
	return l
}
