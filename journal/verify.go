package journal

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"

	"filippo.io/edwards25519"
)

// verifyKey is a machine's ed25519 public key, decoded once: the standard
// library's ed25519.Verify decompresses the key's point again for every
// signature, about a tenth of each check (BenchmarkParseLine).
type verifyKey struct {
	raw    ed25519.PublicKey
	minusA *edwards25519.Point // the key's point, negated; nil if it is not on the curve
}

func newVerifyKey(pub ed25519.PublicKey) verifyKey {
	k := verifyKey{raw: pub}
	if a, err := new(edwards25519.Point).SetBytes(pub); err == nil {
		k.minusA = new(edwards25519.Point).Negate(a)
	}
	return k
}

// verify reports whether sig is a valid signature of message by the key.
// It is crypto/ed25519.Verify step for step (the same library underneath:
// cofactorless, S canonical, the key decoded as SetBytes decodes it, R
// compared as bytes), only with the key's point kept; a differential test
// and fuzz hold the two to the same answers.
func (k verifyKey) verify(message, sig []byte) bool {
	if k.minusA == nil || len(sig) != ed25519.SignatureSize || sig[63]&224 != 0 {
		return false
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(k.raw)
	h.Write(message)
	var digest [sha512.Size]byte
	kScalar, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		return false
	}
	s, err := edwards25519.NewScalar().SetCanonicalBytes(sig[32:])
	if err != nil {
		return false
	}
	// [S]B = R + [k]A, so [k](-A) + [S]B = R.
	r := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(kScalar, k.minusA, s)
	return bytes.Equal(sig[:32], r.Bytes())
}
