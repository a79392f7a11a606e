package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/crypto/argon2"
)

// fileFormat names the format of an encrypted file.
const fileFormat = "tern.secret/1"

// kdfParams are Argon2id's parameters: passes, memory in KiB, lanes.
type kdfParams struct {
	T uint32 `json:"t"`
	M uint32 `json:"m"`
	P uint8  `json:"p"`
}

// newKDF is what a new folder's files are sealed with: RFC 9106's second
// recommended choice (t=3, m=64 MiB, p=4), well above OWASP's minimum
// (t=2, m=19 MiB, p=1). OWASP's figures fit a server hashing many logins;
// these files can be copied and attacked offline, and tern derives the
// key about once per process (some 0.3 s on two cores). Tests lower it.
var newKDF = kdfParams{T: 3, M: 64 << 10, P: 4}

// Bounds on what a file may ask for, so that a damaged or hostile file
// cannot make tern spend unbounded memory or time.
const (
	maxKDFTime   = 16
	maxKDFMemory = 1 << 20 // KiB: 1 GiB
	maxKDFLanes  = 16
	saltSize     = 16
	keySize      = 32 // AES-256
	maxSealed    = 1 << 20
)

// sealedFile is the JSON content of an encrypted file: the value sealed
// with AES-256-GCM, under a key derived from the password by Argon2id,
// with the secret's name as additional data. []byte fields are base64.
type sealedFile struct {
	Format string `json:"format"`
	KDF    string `json:"kdf"`
	kdfParams
	Salt       []byte `json:"salt"`
	Nonce      []byte `json:"nonce"`
	Ciphertext []byte `json:"ciphertext"`
}

// kdfInput is what a key is derived from.
type kdfInput struct {
	password, salt string
	kdfParams
}

// newSealing returns the header of a new folder's files: a random salt
// and newKDF.
func newSealing() (*sealedFile, error) {
	salt := make([]byte, saltSize)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	return &sealedFile{Format: fileFormat, KDF: "argon2id", kdfParams: newKDF, Salt: salt}, nil
}

func (f *sealedFile) kdfInput(password string) kdfInput {
	return kdfInput{password, string(f.Salt), f.kdfParams}
}

func deriveKey(in kdfInput) []byte {
	return argon2.IDKey([]byte(in.password), []byte(in.salt), in.T, in.M, in.P, keySize)
}

// seal returns the file that holds plain for name, with like's salt and
// parameters, under key (derived from them).
func seal(key []byte, like *sealedFile, name string, plain []byte) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	f := *like
	f.Nonce = nonce
	f.Ciphertext = aead.Seal(nil, nonce, plain, []byte(name))
	data, err := json.Marshal(&f)
	return append(data, '\n'), err
}

// parseSealed reads an encrypted file and checks its header.
func parseSealed(data []byte) (*sealedFile, error) {
	var f sealedFile
	if len(data) > maxSealed {
		return nil, errors.New("too large")
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	switch {
	case f.Format != fileFormat:
		return nil, fmt.Errorf("format %q, not %s", f.Format, fileFormat)
	case f.KDF != "argon2id":
		return nil, fmt.Errorf("key derivation %q, not argon2id", f.KDF)
	case f.T < 1 || f.T > maxKDFTime || f.P < 1 || f.P > maxKDFLanes || f.M < 8*uint32(f.P) || f.M > maxKDFMemory:
		return nil, fmt.Errorf("argon2id parameters t=%d m=%d p=%d out of bounds (t 1 to %d, m 8p to %d KiB, p 1 to %d)",
			f.T, f.M, f.P, maxKDFTime, maxKDFMemory, maxKDFLanes)
	case len(f.Salt) < saltSize || len(f.Salt) > 64:
		return nil, fmt.Errorf("a salt of %d bytes", len(f.Salt))
	case len(f.Nonce) != 12:
		return nil, fmt.Errorf("a nonce of %d bytes, not 12", len(f.Nonce))
	}
	return &f, nil
}

// errDecrypt means the key does not open the file: a wrong password, or a
// file altered or renamed.
var errDecrypt = errors.New("does not decrypt")

// open returns what f holds for name, under key.
func (f *sealedFile) open(key []byte, name string) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	plain, err := aead.Open(nil, f.Nonce, f.Ciphertext, []byte(name))
	if err != nil {
		return nil, errDecrypt
	}
	return plain, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
