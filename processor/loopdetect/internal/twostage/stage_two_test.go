package twostage

import (
	"math/rand/v2"
	"strings"
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
		`[{},"x"]`, `[[{}],"x"]`, `{"a":[{}, "b"],"c":{"d":{}},"e":"f"}`,
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

// jsonBytes are the bytes malformed documents are mostly drawn from.
const jsonBytes = `{}[]:,"\ 1tn`

// Malformed input gives an error or some digest, never a panic: random
// bytes drawn mostly from JSON's own, and truncations of a document.
func TestWalkDoesNotPanicOnMalformedInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	docs := []string{`"abc"`, `,`, `:`, `}`, `]`, `{"a"`, `{"a":`, `[1,`, `{"a":1,}`, `["\u12"]`, `["\ud83d"]`, `[` + strings.Repeat(`[`, 100)}
	full := benchdata.SearchResult(3, 2048)
	for n := 1; n < len(full); n += 7 {
		docs = append(docs, full[:n])
	}
	for range 3000 {
		b := randomDoc(rng, 1+rng.IntN(200))
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = jsonBytes[rng.IntN(len(jsonBytes))]
			}
		}
		docs = append(docs, string(b))
	}
	for _, vector := range []bool{false, true} {
		if vector && !hasAVX2 {
			continue
		}
		sc := New(vector)
		for _, d := range docs {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("vector=%v, %q: panic %v", vector, d, r)
					}
				}()
				_, _ = sc.Digest(d)
			}()
		}
	}
}
