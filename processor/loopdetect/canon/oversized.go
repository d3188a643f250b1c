package canon

import (
	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// OversizedSignature digests arguments that were cut at a bound before
// they reached the normalizer (a structured value too deep or too large to
// render): the digest and quality Signature gives arguments over its size
// cap, over the bounded text.
func (n *Normalizer) OversizedSignature(tool, args string) uint64 {
	return hash64.Mix(xxhash.Sum64String(tool)^sigSeed) ^ hash64.Mix(xxhash.Sum64String(args)^hash64.TagOpaque)
}

// OversizedResult is Result for a result cut at a bound: an opaque digest
// of the bounded text.
func (n *Normalizer) OversizedResult(result string) ResultFingerprint {
	return ResultFingerprint{Digest: hash64.Mix(xxhash.Sum64String(result) ^ hash64.TagOpaque), Opaque: true}
}
