package nodebench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// The measurements run at tiny sizes: these tests check that each one
// moves what it should and reports it, never how fast.

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestBlobMovesTheWholeBlobAndComparesItWithBothLimits(t *testing.T) {
	const size = 4 << 20
	r, err := Blob(testContext(t), size, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The file's blob and the snapshot's listing, a few hundred bytes.
	if r.Bytes != size || r.BytesReceived < size || r.BytesReceived > size+64<<10 {
		t.Errorf("bytes %d, received %d; want %d and a listing", r.Bytes, r.BytesReceived, size)
	}
	for name, v := range map[string]float64{"end to end": r.EndToEnd, "libp2p": r.Libp2p, "disk": r.Disk, "sha256": r.SHA256, "seconds": r.EndToEndSeconds} {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s = %v, want a positive figure", name, v)
		}
	}
	slower := map[string]float64{"libp2p": r.Libp2p, "disk": r.Disk}[r.Limit]
	if slower != min(r.Libp2p, r.Disk) || math.Abs(r.Ratio-r.EndToEnd/slower) > 1e-9 {
		t.Errorf("limit %q, ratio %v; libp2p %v, disk %v, end to end %v", r.Limit, r.Ratio, r.Libp2p, r.Disk, r.EndToEnd)
	}
}

func TestBadSizesAreRefusedBeforeAnythingRuns(t *testing.T) {
	ctx := testContext(t)
	opt := Options{Dir: t.TempDir() + "/does-not-exist"} // would fail if anything ran
	cases := []struct {
		name string
		run  func() error
	}{
		{"an empty blob", func() error { _, err := Blob(ctx, 0, opt); return err }},
		{"a blob over the limit", func() error { _, err := Blob(ctx, MaxBlobSize+1, opt); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), "want") {
				t.Fatalf("err = %v, want one that says what is wanted", err)
			}
		})
	}
}
