package stageone

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata"
)

// forms are the block functions this build has, by name.
func forms() map[string]func(*[BlockSize]byte) Masks {
	f := map[string]func(*[BlockSize]byte) Masks{"swar": BlockSWAR}
	if BlockSIMD != nil {
		f["simd"] = BlockSIMD
	}
	return f
}

// Every form marks the bytes the byte-at-a-time reference marks: on JSON,
// on random bytes (high bytes and the neighbours of the marked ones
// included, where a borrow or the | 0x20 fold would show), and on blocks
// of one byte repeated.
func TestFormsMarkWhatTheReferenceMarks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var blocks [][BlockSize]byte
	doc := []byte(benchdata.SearchResult(7, 4096))
	for i := 0; i+BlockSize <= len(doc); i += BlockSize {
		blocks = append(blocks, [BlockSize]byte(doc[i:i+BlockSize]))
	}
	near := []byte(`"\{}[]:,!#;<=>?Z^_z|~ ` + "\x00\x7f\x80\xa2\xdc\xfb\xfd\xff")
	for range 2000 {
		var b [BlockSize]byte
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = byte(rng.Uint32())
			} else {
				b[i] = near[rng.IntN(len(near))]
			}
		}
		blocks = append(blocks, b)
	}
	for c := range 256 {
		var b [BlockSize]byte
		for i := range b {
			b[i] = byte(c)
		}
		blocks = append(blocks, b)
	}
	for name, block := range forms() {
		for i := range blocks {
			if got, want := block(&blocks[i]), BlockScalar(&blocks[i]); got != want {
				t.Fatalf("%s on %q: %+v, want %+v", name, blocks[i][:], got, want)
			}
		}
	}
}

// Scan reads a document's tail as padded, and carries the in-string state
// from block to block: a structural byte inside a string that spans two
// blocks does not count.
func TestScanCarriesStringsAcrossBlocks(t *testing.T) {
	inside := make([]byte, 0, 3*BlockSize)
	inside = append(inside, '"')
	for len(inside) < BlockSize+10 {
		inside = append(inside, ',')
	}
	inside = append(inside, '"')
	outside := make([]byte, len(inside))
	copy(outside, inside)
	outside[0], outside[len(outside)-1] = ' ', ' '
	if got := Scan(inside, BlockScalar); got != 0 {
		t.Errorf("commas inside a string: %#x, want 0", got)
	}
	if got := Scan(outside, BlockScalar); got == 0 {
		t.Error("commas outside a string: 0")
	}
	for name, block := range forms() {
		doc := []byte(benchdata.SearchResult(3, 2048+17))
		if got, want := Scan(doc, block), Scan(doc, BlockScalar); got != want {
			t.Errorf("%s: Scan = %#x, want %#x", name, got, want)
		}
	}
}

var sink uint64

// BenchmarkStageOne is stage one's cost per byte on the canonicalization
// benchmark's dense 2 KiB search results, by form (simd only in a build
// with GOEXPERIMENT=simd on an AVX2 machine: make bench-stageone).
func BenchmarkStageOne(b *testing.B) {
	var docs [][]byte
	total := 0
	for i := range 64 {
		d := []byte(benchdata.SearchResult(uint64(i+1), 2<<10))
		docs = append(docs, d)
		total += len(d)
	}
	avg := float64(total) / float64(len(docs))
	all := forms()
	all["scalar"] = BlockScalar
	for _, name := range []string{"scalar", "swar", "simd"} {
		block, ok := all[name]
		if !ok {
			continue
		}
		b.Run(fmt.Sprintf("form=%s", name), func(b *testing.B) {
			b.SetBytes(int64(avg))
			for i := 0; b.Loop(); i++ {
				sink += Scan(docs[i%len(docs)], block)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/avg, "ns/byte")
		})
	}
}
