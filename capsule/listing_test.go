package capsule

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
)

func listingOf(t *testing.T, files int, salt string) []byte {
	t.Helper()
	s := Snapshot{Entries: map[string]SnapshotEntry{}}
	for i := range files {
		sum := sha256.Sum256([]byte(salt + fmt.Sprint(i)))
		s.Entries[fmt.Sprintf("f%d", i)] = SnapshotEntry{Type: "file", Mode: "0644", CID: BlobCID(hex.EncodeToString(sum[:])), Size: 1}
	}
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The same bytes are parsed once and shared; other bytes are parsed on
// their own, and a listing that does not parse is an error every time.
func TestAListingIsParsedOnceForTheSameBytes(t *testing.T) {
	a, b := listingOf(t, 3, "a"), listingOf(t, 3, "b")
	la, err := parsedListing(a)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := parsedListing(append([]byte(nil), a...)); again != la {
		t.Error("the same bytes were parsed again")
	}
	lb, err := parsedListing(b)
	if err != nil {
		t.Fatal(err)
	}
	if lb == la || lb.blobs[0] == la.blobs[0] {
		t.Error("other bytes got the first listing")
	}
	if len(la.blobs) != 3 {
		t.Errorf("blobs: %v", la.blobs)
	}
	for range 2 {
		if _, err := parsedListing([]byte(`{"entries":{"/abs":{"type":"dir","mode":"0755"}}}`)); err == nil {
			t.Fatal("a bad listing parsed")
		}
	}
}

// The cache keeps the newest listings, up to its bound in entries.
func TestTheListingsKeptAreBounded(t *testing.T) {
	c := listingCache{byHash: map[string]*listing{}}
	big := &Snapshot{Entries: map[string]SnapshotEntry{}}
	for i := range maxListedEntries/2 + 1 {
		big.Entries[fmt.Sprint(i)] = SnapshotEntry{Type: "dir", Mode: "0755"}
	}
	c.put("one", big)
	c.put("two", big)
	if c.get("one") != nil || c.get("two") == nil {
		t.Fatalf("kept one %v, two %v: want only the newest", c.get("one") != nil, c.get("two") != nil)
	}
	c.put("three", big)
	if c.get("two") != nil || c.get("three") == nil || c.entries != len(big.Entries) {
		t.Fatalf("kept two %v, three %v, %d entries", c.get("two") != nil, c.get("three") != nil, c.entries)
	}
}

// Encode writes what json.MarshalIndent writes, whatever the paths, modes
// and CIDs hold (the bytes name the listing's blob).
func FuzzSnapshotEncodeIsMarshalIndent(f *testing.F) {
	f.Add("src/a.go", "file", "0644", "bafkrei", int64(7), "src", "dir", "0755")
	f.Add("<&>\u2028\"\\\x01é", "", "", "", int64(-1), "\xff", "x", "\t")
	f.Fuzz(func(t *testing.T, p1, t1, m1, c1 string, size int64, p2, t2, m2 string) {
		for _, s := range []Snapshot{{}, {Entries: map[string]SnapshotEntry{}}, {Entries: map[string]SnapshotEntry{
			p1: {Type: t1, Mode: m1, CID: c1, Size: size}, p2: {Type: t2, Mode: m2},
		}}} {
			got, err := s.Encode()
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.MarshalIndent(s, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if want = append(want, '\n'); !bytes.Equal(got, want) {
				t.Fatalf("Encode wrote\n%s\nMarshalIndent\n%s", got, want)
			}
		}
	})
}
