package render

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// Token estimates. Window fitting needs a size for every event before
// anything is rendered, for every provider alike, without a tokenizer. The
// estimate is deliberately conservative (it should exceed what any of the
// providers' tokenizers count) and costs one pass over the bytes:
//
//   - text, and any JSON an event carries, counts one token per 3 ASCII
//     bytes plus one token per 2 bytes of everything else. English runs
//     about 4 bytes a token, code and JSON about 3; a CJK character (3 bytes
//     in UTF-8) counts 1.5 and an emoji (4 bytes) 2. The whole event body is
//     counted, keys and ids included, which covers the provider's own
//     framing of a message;
//   - every event adds EventOverhead for roles, separators and ids;
//   - an image counts ImageTokens whatever its size: the most any provider
//     charges for one image after its own downscaling (Anthropic caps an
//     image at about 1,600 tokens, OpenAI at 1,105 for high detail, Gemini
//     at 258 per tile);
//   - a file counts like text over its bytes (a PDF's pages cost less than
//     its bytes suggest, so this overestimates);
//   - a request adds RequestOverhead, and its instructions and tool
//     definitions are counted like text.
const (
	ImageTokens     = 1600
	EventOverhead   = 8
	RequestOverhead = 16
)

// Estimate is the token estimate of the bytes b (text or JSON), as
// described above.
func Estimate(b []byte) int {
	other, i := 0, 0
	for ; i+8 <= len(b); i += 8 { // count high bits eight bytes at a time
		other += bits.OnesCount64(binary.LittleEndian.Uint64(b[i:]) & 0x8080808080808080)
	}
	for ; i < len(b); i++ {
		if b[i] >= utf8.RuneSelf {
			other++
		}
	}
	ascii := len(b) - other
	// ceil(ascii/3 + other/2) in integers.
	return (2*ascii + 3*other + 5) / 6
}

// estimateCounts is Estimate of n bytes of which nonASCII are not ASCII.
func estimateCounts(n, nonASCII int) int {
	return (2*(n-nonASCII) + 3*nonASCII + 5) / 6
}

// estimateString is Estimate for a string.
func estimateString(s string) int {
	ascii, other := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] < utf8.RuneSelf {
			ascii++
		} else {
			other++
		}
	}
	return (2*ascii + 3*other + 5) / 6
}
