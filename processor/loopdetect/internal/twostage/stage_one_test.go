package twostage

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata"
)

// near are the bytes where a form of stage one could go wrong: the marked
// ones, their neighbours (a borrow, the | 0x20 fold), high bytes.
var near = []byte(`"\{}[]:,!#;<=>?Z^_z|~ ` + "\t\n\r\x00\x1f\x21\x7f\x80\xa0\xa2\xdc\xfb\xfd\xff")

// randomDoc returns n bytes, half drawn from near.
func randomDoc(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		if rng.IntN(2) == 0 {
			b[i] = byte(rng.Uint32())
		} else {
			b[i] = near[rng.IntN(len(near))]
		}
	}
	return b
}

// Every form of stage one marks the bytes the byte-at-a-time reference
// marks: on JSON, on random bytes and on blocks of one byte repeated.
func TestBlockFormsMarkWhatTheReferenceMarks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var docs [][]byte
	docs = append(docs, []byte(benchdata.SearchResult(7, 4096)[:4096]))
	for range 500 {
		docs = append(docs, randomDoc(rng, 256))
	}
	for c := range 256 {
		b := make([]byte, 64)
		for i := range b {
			b[i] = byte(c)
		}
		docs = append(docs, b)
	}
	forms := map[string]func([]byte, []rawMasks){"swar": blocksSWAR}
	if hasAVX2 {
		forms["avx2"] = func(b []byte, out []rawMasks) { blocksAVX2(unsafe.SliceData(b), len(out), &out[0]) }
	}
	for name, form := range forms {
		for _, d := range docs {
			// One guard block after the blocks asked for: a form must
			// write those and nothing past them.
			n := len(d) / 64
			out := make([]rawMasks, n+1)
			form(d, out[:n])
			for k := range out[:n] {
				if want := blockScalar(d[64*k:]); out[k] != want {
					t.Fatalf("%s on %q: %+v, want %+v", name, d[64*k:64*k+64], out[k], want)
				}
			}
			if out[n] != (rawMasks{}) {
				t.Fatalf("%s wrote past block %d: %+v", name, n, out[n])
			}
		}
	}
}

// indexByteAtATime is index.build a byte at a time: a backslash escapes the
// next byte wherever it is; a quote that is not escaped opens or closes a
// string; events are the structural bytes outside strings, the quotes and
// the backslashes inside strings that start an escape; delimiters are the
// structural and space bytes outside strings.
func indexByteAtATime(s string) (events, delims []uint64) {
	n := (len(s) + 63) / 64
	events, delims = make([]uint64, n), make([]uint64, n)
	escapeNext, in := false, false
	for i := 0; i < n*64; i++ {
		c := byte(' ')
		if i < len(s) {
			c = s[i]
		}
		bit := uint64(1) << (i & 63)
		escaped := escapeNext
		escapeNext = c == '\\' && !escaped
		switch {
		case c == '"' && !escaped:
			in = !in
			events[i>>6] |= bit
		case c == '\\' && !escaped && in:
			events[i>>6] |= bit
		case !in && (c == '{' || c == '}' || c == '[' || c == ']' || c == ':' || c == ','):
			events[i>>6] |= bit
			delims[i>>6] |= bit
		case !in && c <= ' ':
			delims[i>>6] |= bit
		}
	}
	return events, delims
}

// Stage one's index carries escapes and strings from block to block: runs
// of backslashes of every parity, strings that span blocks, structural
// bytes inside them, on documents of every length around a block.
func TestIndexMatchesTheByteAtATimeReading(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var docs []string
	for run := 60; run <= 68; run++ {
		// A run of run backslashes crossing a block's end, then a quote
		// that is escaped or not by the run's parity.
		docs = append(docs, `{"a":"`+strings.Repeat(`\`, run)+`"},"x":[1]}`)
	}
	for _, n := range []int{1, 63, 64, 65, 127, 128, 129, 300} {
		for range 60 {
			b := randomDoc(rng, n)
			for i := range b {
				if rng.IntN(3) == 0 {
					b[i] = `\"`[rng.IntN(2)]
				}
			}
			docs = append(docs, string(b))
		}
	}
	docs = append(docs, benchdata.SearchResult(5, 2048+17), benchdata.FileRead(2, 1000))
	for _, vector := range []bool{false, true} {
		if vector && !hasAVX2 {
			continue
		}
		for _, d := range docs {
			var ix index
			ix.build(d, vector, make([]rawMasks, (len(d)+63)/64))
			events, delims := indexByteAtATime(d)
			for k := range events {
				if ix.events[k] != events[k] || ix.delims[k] != delims[k] {
					t.Fatalf("vector=%v, block %d of %q: events %064b delims %064b, want %064b %064b",
						vector, k, d, ix.events[k], ix.delims[k], events[k], delims[k])
				}
			}
		}
	}
}
