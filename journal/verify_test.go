package journal

import (
	"crypto/ed25519"
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// edgeKeys are public keys the standard library treats in ways a kept
// point must match: small-order points, a non-canonical encoding of y,
// and bytes that are not a point at all.
var edgeKeys = []string{
	"0100000000000000000000000000000000000000000000000000000000000000", // the identity
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", // order 8
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p+1, not canonical
	"0200000000000000000000000000000000000000000000000000000000000000", // not on the curve
	"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
}

func TestAKeptKeyVerifiesAsTheStandardLibraryDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seed := make([]byte, ed25519.SeedSize)
	for round := range 300 {
		for i := range seed {
			seed[i] = byte(rng.Uint32())
		}
		priv := ed25519.NewKeyFromSeed(seed)
		pub := priv.Public().(ed25519.PublicKey)
		msg := make([]byte, rng.IntN(300))
		for i := range msg {
			msg[i] = byte(rng.Uint32())
		}
		sig := ed25519.Sign(priv, msg)
		if round%50 == 0 {
			pub, _ = hex.DecodeString(edgeKeys[(round/50)%len(edgeKeys)])
		}
		k := newVerifyKey(pub)
		check := func(what string, msg, sig []byte) {
			t.Helper()
			if got, want := k.verify(msg, sig), ed25519.Verify(pub, msg, sig); got != want {
				t.Fatalf("round %d, %s: kept key says %v, crypto/ed25519 %v", round, what, got, want)
			}
		}
		check("as signed", msg, sig)
		bad := append([]byte(nil), sig...)
		bad[rng.IntN(len(bad))] ^= 1 << rng.IntN(8)
		check("a bit of the signature flipped", msg, bad)
		if len(msg) > 0 {
			m := append([]byte(nil), msg...)
			m[rng.IntN(len(m))] ^= 1
			check("a bit of the message flipped", m, sig)
		}
		check("S plus the group order", msg, addOrder(sig))
		high := append([]byte(nil), sig...)
		high[63] |= 0x80
		check("the top bits of S set", msg, high)
		check("short", msg, sig[:63])
		check("empty", msg, nil)
	}
}

// addOrder returns sig with L, the order of the group, added to S: the
// same scalar, not canonical, which both must refuse.
func addOrder(sig []byte) []byte {
	l := [32]byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 31: 0x10}
	out := append([]byte(nil), sig...)
	carry := 0
	for i := range 32 {
		v := int(out[32+i]) + int(l[i]) + carry
		out[32+i], carry = byte(v), v>>8
	}
	return out
}

// FuzzVerifyKeyAgreesWithTheStandardLibrary signs with a key made from
// seed, then flips the bits given in sigFlip and pubFlip: near-valid
// signatures and keys, where a difference would hide.
func FuzzVerifyKeyAgreesWithTheStandardLibrary(f *testing.F) {
	zero := make([]byte, ed25519.SeedSize)
	f.Add(zero, []byte("a message"), []byte(nil), []byte(nil))
	f.Add(zero, []byte(""), []byte{0, 0, 0, 1}, []byte(nil))
	f.Add(zero, []byte("x"), []byte(nil), []byte{1})
	f.Fuzz(func(t *testing.T, seed, msg, sigFlip, pubFlip []byte) {
		if len(seed) != ed25519.SeedSize {
			return
		}
		priv := ed25519.NewKeyFromSeed(seed)
		pub := append([]byte(nil), priv.Public().(ed25519.PublicKey)...)
		sig := ed25519.Sign(priv, msg)
		for i, b := range sigFlip {
			sig[i%len(sig)] ^= b
		}
		for i, b := range pubFlip {
			pub[i%len(pub)] ^= b
		}
		if got, want := newVerifyKey(pub).verify(msg, sig), ed25519.Verify(pub, msg, sig); got != want {
			t.Fatalf("key %x, message %x, signature %x: kept key says %v, crypto/ed25519 %v", pub, msg, sig, got, want)
		}
	})
}

// A signature of the identity by the identity key, [0]B = R with R the
// identity: valid for both (cofactorless, as crypto/ed25519 is), and only
// with that exact encoding of R.
func TestASmallOrderSignatureIsJudgedAsTheStandardLibraryJudgesIt(t *testing.T) {
	pub, _ := hex.DecodeString(edgeKeys[0])
	sig := make([]byte, ed25519.SignatureSize)
	sig[0] = 1
	for _, msg := range [][]byte{nil, []byte("anything")} {
		if got, want := newVerifyKey(pub).verify(msg, sig), ed25519.Verify(pub, msg, sig); got != want || !want {
			t.Fatalf("kept key %v, crypto/ed25519 %v, want both true", got, want)
		}
	}
	sig[31] = 0x80 // the identity with the sign bit set: another spelling of R
	if got, want := newVerifyKey(pub).verify(nil, sig), ed25519.Verify(pub, nil, sig); got != want {
		t.Fatalf("kept key %v, crypto/ed25519 %v", got, want)
	}
}
