package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tern-dev/tern/api"
)

// isTerminal reports whether w is a terminal: progress bars redraw in
// place there, and are left out of pipes and files.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressLine renders blob transfers in flight as one bar of width
// cells, their bytes summed: "blobs [=======>      ]  52%  140.0/268.4 MB  2 transfers".
func progressLine(ts []api.Transfer, width int) string {
	var done, size int64
	for _, t := range ts {
		done += t.Done
		size += t.Size
	}
	frac := 0.0
	if size > 0 {
		frac = min(float64(done)/float64(size), 1)
	}
	filled := int(frac * float64(width))
	bar := strings.Repeat("=", filled)
	if filled < width {
		bar += ">" + strings.Repeat(" ", width-filled-1)
	}
	noun := "transfers"
	if len(ts) == 1 {
		noun = "transfer"
	}
	return fmt.Sprintf("blobs [%s] %3.0f%%  %.1f/%.1f MB  %d %s", bar, frac*100, float64(done)/1e6, float64(size)/1e6, len(ts), noun)
}

// progress redraws one line on a terminal; on anything else it writes
// nothing.
type progress struct {
	w     io.Writer
	shown bool
}

func newProgress(w io.Writer) *progress {
	if !isTerminal(w) {
		return &progress{}
	}
	return &progress{w: w}
}

// show draws ts, or clears the line when nothing moves.
func (p *progress) show(ts []api.Transfer) {
	if p.w == nil {
		return
	}
	switch {
	case len(ts) > 0:
		fmt.Fprintf(p.w, "\r\x1b[K%s", progressLine(ts, 30))
		p.shown = true
	case p.shown:
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// done leaves the terminal on a clean line.
func (p *progress) done() { p.show(nil) }
