package main

import (
	"bytes"
	"testing"

	"github.com/tern-dev/tern/api"
)

func TestAProgressLineSumsTheTransfersInFlight(t *testing.T) {
	for _, c := range []struct {
		ts   []api.Transfer
		want string
	}{
		{[]api.Transfer{{Done: 0, Size: 0}}, "blobs [>         ]   0%  0.0/0.0 MB  1 transfer"},
		{[]api.Transfer{{Done: 5e6, Size: 10e6}}, "blobs [=====>    ]  50%  5.0/10.0 MB  1 transfer"},
		{[]api.Transfer{{Done: 10e6, Size: 10e6}, {Done: 30e6, Size: 30e6}}, "blobs [==========] 100%  40.0/40.0 MB  2 transfers"},
	} {
		if got := progressLine(c.ts, 10); got != c.want {
			t.Errorf("progressLine(%+v)\n got %q\nwant %q", c.ts, got, c.want)
		}
	}
}

func TestProgressBarsStayOutOfPipesAndFiles(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf)
	p.show([]api.Transfer{{Done: 1, Size: 2}})
	p.done()
	if buf.Len() != 0 {
		t.Fatalf("a bar was drawn into a buffer: %q", buf.String())
	}
}
