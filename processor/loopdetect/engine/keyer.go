package engine

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// FingerprintVersion versions the progress fingerprint definition.
const FingerprintVersion = "fp-v1"

// Keyer turns in-memory digests into keyed digests that may leave the
// process: without the key they cannot be reversed by guessing inputs.
type Keyer struct {
	key []byte
}

// NewKeyer returns a Keyer for key; an empty key still yields digests, but
// the documentation tells operators to set one.
func NewKeyer(key []byte) *Keyer {
	return &Keyer{key: append([]byte(nil), key...)}
}

// Keyed returns the hex HMAC-SHA256 (first 16 bytes) of a digest in a
// domain such as "sig" or "fp".
func (k *Keyer) Keyed(domain string, d Digest) string {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte(domain))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(d))
	m.Write(b[:])
	return hex.EncodeToString(m.Sum(nil)[:16])
}
