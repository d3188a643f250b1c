package twostage

import (
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
)

// plainNormalizer is the canonicalizer without key sets, which stage two
// leaves out: the digests of the two must then be equal.
func plainNormalizer() *canon.Normalizer {
	cfg := canon.DefaultNormalizerConfig()
	cfg.VolatileArgKeys, cfg.VolatileResultKeys, cfg.TerminalKeys = nil, nil, nil
	cfg.MaxCanonicalBytes = 1 << 20
	return canon.NewNormalizer(cfg)
}

// Stage two computes the canonical digest: the one-pass scanner's, key
// sets apart, on the benchmark's documents and on the shapes that move a
// token's end (whitespace, escapes across blocks, surrogate pairs, empty
// and nested containers, literals).
func TestWalkIsTheCanonicalDigestWithoutKeySets(t *testing.T) {
	docs := []string{
		`{"a":1}`, `[]`, `{}`, `[[],{}]`, `{"a":{"b":{"c":[1,[2,[3]]]}}}`,
		`{"a":1,"b":null,"c":true,"d":false,"e":-1.5e3}`,
		"[ 1 , \"a\" , {\"k\" :\tfalse } ,\n null ]",
		`{"d":"x\ny","e":"\u00e9\ud83d\ude00\"\\\/"}`,
		`{"k":"  padded  ","\u006b2":"v"}`,
		`{"long":"abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789\n"}`,
		benchdata.FileRead(1, 1000),
	}
	for i := uint64(1); i <= 8; i++ {
		docs = append(docs, benchdata.SearchResult(i, 200), benchdata.SearchResult(i, 2<<10), benchdata.SearchResult(i, 64<<10))
	}
	norm := plainNormalizer()
	for _, vector := range []bool{false, true} {
		if vector && !hasAVX2 {
			continue
		}
		sc := New(vector)
		sc.filter = 0
		for i, d := range docs {
			got, err := sc.Digest(d)
			if err != nil {
				t.Fatalf("vector=%v doc %d: %v", vector, i, err)
			}
			if want := norm.Result("grep", d).Digest; got != want {
				t.Errorf("vector=%v doc %d (%d bytes): %x, canonical %x", vector, i, len(d), got, want)
			}
		}
	}
}
