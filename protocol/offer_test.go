package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestAnOfferIsTakenOnlyWhenItIsWellFormed(t *testing.T) {
	h := strings.Repeat("ab", 32)
	tooMany := make([]string, MaxOffer+1)
	for i := range tooMany {
		tooMany[i] = h
	}
	for _, tc := range []struct {
		name  string
		offer Offer
		ok    bool
	}{
		{"one blob", Offer{Agent: "a", Blobs: []string{h}}, true},
		{"no agent", Offer{Blobs: []string{h}}, false},
		{"no blob", Offer{Agent: "a"}, false},
		{"over the limit", Offer{Agent: "a", Blobs: tooMany}, false},
		{"not a sha256", Offer{Agent: "a", Blobs: []string{"../../etc/passwd"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, _ := json.Marshal(tc.offer)
			var frame bytes.Buffer
			WriteFrame(&frame, data)
			var took []Offer
			err := ServeOffer(&frame, func(o Offer) { took = append(took, o) })
			if tc.ok != (err == nil) || tc.ok != (len(took) == 1) {
				t.Fatalf("ServeOffer: %v, took %d; want ok %v", err, len(took), tc.ok)
			}
			if !tc.ok && !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("refused with %v, not a protocol error", err)
			}
		})
	}
}

// The names a snapshot stores go out in offers of at most offerBatch, all
// of them, each once, and end returns once the last is sent.
func TestBlobsStoredAreOfferedInBatches(t *testing.T) {
	var mu sync.Mutex
	var sent [][]string
	add, end := OfferAsStored(func(b []string) {
		mu.Lock()
		sent = append(sent, slices.Clone(b))
		mu.Unlock()
	})
	var all []string
	for i := range 3*offerBatch + 7 {
		h := strings.Repeat(string(rune('a'+i%26)), 3) + string(rune(i))
		all = append(all, h)
		add(h)
	}
	end()
	var got []string
	for _, b := range sent {
		if len(b) == 0 || len(b) > offerBatch {
			t.Fatalf("an offer of %d names", len(b))
		}
		got = append(got, b...)
	}
	if !slices.Equal(got, all) {
		t.Fatalf("offered %d names, want the %d stored, in order", len(got), len(all))
	}
}
