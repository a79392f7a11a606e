package render

import (
	"strings"
	"testing"
)

func TestTheTokenEstimateIsConservative(t *testing.T) {
	cases := []struct {
		name string
		text string
		// atLeast is what the providers' tokenizers count, or more: English
		// runs about 4 bytes a token, JSON 3, a CJK character up to 1.5
		// tokens, an emoji up to 2.
		atLeast int
	}{
		{"empty text costs nothing", "", 0},
		{"English prose", strings.Repeat("The quick brown fox jumps. ", 40), 40 * 27 / 4},
		{"compact JSON", strings.Repeat(`{"a":1,"b":[2,3]},`, 50), 50 * 18 / 3},
		{"Chinese", strings.Repeat("数据", 100), 200 * 3 / 2},
		{"emoji", strings.Repeat("🙂", 100), 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Estimate([]byte(tc.text))
			if got < tc.atLeast {
				t.Fatalf("Estimate = %d, want at least %d", got, tc.atLeast)
			}
			if s := estimateString(tc.text); s != got {
				t.Fatalf("estimateString = %d, Estimate = %d", s, got)
			}
		})
	}
}

func TestEveryEventCountsItsBodyImagesAndOverhead(t *testing.T) {
	text := strings.Repeat("word ", 100)
	plain := events(t, user(text))
	withImage := events(t, image("user", text, pngCID, "image/png"))
	a := buildView(plain, &blobCache{}, &notes{})
	b := buildView(withImage, &blobCache{src: testBlobs}, &notes{})
	if a[0].tokens < EventOverhead+Estimate(plain[0].Body) {
		t.Fatalf("a message costs %d tokens, less than its body and overhead", a[0].tokens)
	}
	if b[0].tokens-a[0].tokens < ImageTokens {
		t.Fatalf("an image adds %d tokens, want at least %d", b[0].tokens-a[0].tokens, ImageTokens)
	}
}
