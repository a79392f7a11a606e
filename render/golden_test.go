package render

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// renderCase renders one catalogue conversation for provider p.
func renderCase(t testing.TB, c conversation, p Provider) (*Result, error) {
	t.Helper()
	target := targetFor(p)
	target.Window = c.window
	return Render(Request{Events: events(t, c.build(target)...), Agent: weatherAgent, Target: target, Blobs: testBlobs})
}

// goldenText is what a golden file holds: the notes, the count of events
// left out, and the body indented (same bytes otherwise).
func goldenText(r *Result) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# dropped %d, tokens %d\n", r.Dropped, r.Tokens)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "# note: %s\n", n)
	}
	json.Indent(&b, r.Body, "", "  ")
	b.WriteString("\n")
	return b.Bytes()
}

func TestGoldenBodiesMatchTestdata(t *testing.T) {
	for _, c := range catalogue {
		for _, p := range Providers() {
			t.Run(c.name+"/"+string(p), func(t *testing.T) {
				r, err := renderCase(t, c, p)
				if err != nil {
					t.Fatal(err)
				}
				got := goldenText(r)
				path := filepath.Join("testdata", c.name, string(p)+".golden")
				if *update {
					os.MkdirAll(filepath.Dir(path), 0o755)
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./render -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs (go test ./render -run %s -update rewrites it):\n%s", path, t.Name(), firstDiff(string(want), string(got)))
				}
			})
		}
	}
}

func TestEveryCatalogueBodyRoundTripsThroughTheOfficialSDK(t *testing.T) {
	for _, c := range catalogue {
		for _, p := range Providers() {
			t.Run(c.name+"/"+string(p), func(t *testing.T) {
				r, err := renderCase(t, c, p)
				if err != nil {
					t.Fatal(err)
				}
				if err := sdkRoundTrip(p, r.Body); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\nwant %s\ngot  %s", i+1, w, g)
		}
	}
	return "(no difference in lines)"
}
