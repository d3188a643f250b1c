// The engine's digests: what a tool call carries (the caller makes them,
// with package canon in this repository), and the arithmetic the engine
// hashes its own keys with (cycle keys, wait owners, failure digests).

package engine

import (
	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// Digest is a fixed-size, non-cryptographic digest of canonical content. It
// never leaves the process unkeyed: see Keyer for the form that does.
type Digest uint64

// ArgsQuality says how much an action signature can be trusted.
type ArgsQuality uint8

// The argument qualities.
const (
	// ArgsJSON: arguments parsed and canonicalized.
	ArgsJSON ArgsQuality = iota
	// ArgsOpaque: arguments present but not JSON; hashed as trimmed text.
	ArgsOpaque
	// ArgsOversized: arguments over the size cap; hashed as raw bytes.
	ArgsOversized
	// ArgsAbsent: no arguments recorded; the signature is the tool name only
	// and low-confidence.
	ArgsAbsent
)

// FailureDigest is a failed call's progress fingerprint: its error class,
// cut to maxErrorClass bytes, joined to text, the hash of its masked error
// text and result (0: none; canon's Normalizer.Failure makes it). It is
// the engine's because the engine makes the class-only digest itself for
// a failure nobody normalized, and the two must agree.
func FailureDigest(class string, text uint64) Digest {
	return failureDigest(truncate(class, maxErrorClass), text)
}

// failureDigest is FailureDigest of a class already cut.
func failureDigest(class string, text uint64) Digest {
	d := hash64.Mix(xxhash.Sum64String(class) ^ tagFailure)
	if text != 0 {
		d = hash64.Mix(d ^ text)
	}
	return Digest(d)
}
