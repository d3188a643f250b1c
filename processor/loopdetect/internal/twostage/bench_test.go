package twostage

import (
	"math/bits"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
)

var sink uint64

// eventSum is the least stage two can do: visit stage one's events in
// order, reading each one's byte. Its two nested loops were the fastest
// form measured (internal/benchdata/changes/14-two-stage-ceiling,
// event-visit-forms.txt).
func eventSum(sc *Scanner, doc string) uint64 {
	sc.index(doc)
	var acc uint64
	for blk, w := range sc.ix.events {
		for ; w != 0; w &= w - 1 {
			acc += uint64(doc[blk<<6|bits.TrailingZeros64(w)])
		}
	}
	return acc
}

// BenchmarkTwoStage times, per JSON byte, on the canonicalization
// benchmark's dense search results: the product's one-pass canonical
// digest (default key sets); stage one alone; stage one and a visit of its
// events that does nothing else (the floor of any stage two); stage one
// and stage two. Each with the SWAR and the AVX2 stage one (make
// bench-twostage).
func BenchmarkTwoStage(b *testing.B) {
	cfg := canon.DefaultNormalizerConfig()
	cfg.MaxCanonicalBytes = 1 << 20
	norm := canon.NewNormalizer(cfg)
	for _, size := range []struct {
		name string
		n    int
	}{{"200B", 200}, {"2KiB", 2 << 10}, {"64KiB", 64 << 10}} {
		corpus := make([]string, 64)
		total := 0
		for i := range corpus {
			corpus[i] = benchdata.SearchResult(uint64(i+1), size.n)
			total += len(corpus[i])
		}
		avg := float64(total) / float64(len(corpus))
		// events: stage one's events a document, which the walk visits.
		events := 0
		counter := New(false)
		for _, d := range corpus {
			counter.index(d)
			for _, w := range counter.ix.events {
				events += bits.OnesCount64(w)
			}
		}
		run := func(name string, f func(string) uint64) {
			b.Run("size="+size.name+"/impl="+name, func(b *testing.B) {
				b.SetBytes(int64(avg))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					sink = f(corpus[i%len(corpus)])
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/avg, "ns/byte")
				b.ReportMetric(float64(events)/float64(len(corpus)), "events/doc")
			})
		}
		run("onepass", func(d string) uint64 { return norm.Result("grep", d).Digest })
		for _, vector := range []bool{false, true} {
			if vector && !hasAVX2 {
				continue
			}
			form := map[bool]string{false: "swar", true: "avx2"}[vector]
			sc := New(vector)
			run("stageone-"+form, func(d string) uint64 {
				sc.index(d)
				return sc.ix.events[0]
			})
			run("events-"+form, func(d string) uint64 { return eventSum(sc, d) })
			run("twostage-"+form, func(d string) uint64 {
				v, _ := sc.Digest(d)
				return v
			})
		}
	}
}
