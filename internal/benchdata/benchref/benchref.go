// Package benchref times a fixed piece of work beside a benchmark's
// measurement, so that a report can tell the machine's speed from the
// code's cost.
package benchref

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The VMs these benchmarks run on switch between a fast and a slow speed
// for minutes at a time (the same binary, the same code, 1.5–1.7× apart),
// which a median over a run's -count hides. ReferenceNs times a fixed
// piece of work right beside a measurement, so that the report can tell
// the machine's mode from the code's cost: a figure divided by the
// reference stays put when only the machine changed. Two references tell
// two causes apart: ReferenceNs is arithmetic in the first-level cache
// (the core's speed), ReferenceMemNs a chain of loads from main memory
// (its latency, which page placement and a neighbour's traffic change).

// referenceBlock is the reference's input: 2 KiB, the size of a large
// tool result, filled once.
var referenceBlock = func() []byte {
	b := make([]byte, 2048)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}()

// referencePass mixes the block into four independent lanes: integer
// multiplies and L1 loads with the instruction-level parallelism of
// ordinary parsing code, the same instructions on every run.
func referencePass(b []byte) uint64 {
	const prime = 0x100000001b3
	var h0, h1, h2, h3 uint64 = 1, 2, 3, 4
	for i := 0; i+32 <= len(b); i += 32 {
		h0 = (h0 ^ binary.LittleEndian.Uint64(b[i:])) * prime
		h1 = (h1 ^ binary.LittleEndian.Uint64(b[i+8:])) * prime
		h2 = (h2 ^ binary.LittleEndian.Uint64(b[i+16:])) * prime
		h3 = (h3 ^ binary.LittleEndian.Uint64(b[i+24:])) * prime
	}
	return h0 ^ h1<<1 ^ h2<<2 ^ h3<<3
}

// ReferenceNs is the time of one pass of the fixed reference work over
// 2 KiB, in nanoseconds: the fastest of five timings of 2,000 passes, so
// that an interruption inflates none of them.
func ReferenceNs() float64 {
	const passes = 2000
	best := time.Duration(1<<63 - 1)
	for range 5 {
		t0 := time.Now()
		var h uint64
		for range passes {
			h += referencePass(referenceBlock)
		}
		if d := time.Since(t0); d < best {
			best = d
		}
		runtime.KeepAlive(h)
	}
	return float64(best.Nanoseconds()) / passes
}

// chaseSlots is the memory reference's ring: 16 Mi slots of 4 bytes
// (64 MiB), larger than this machine's last-level cache, mapped outside
// the Go heap so that it changes no benchmark's garbage collection.
const chaseSlots = 1 << 24

var chase = sync.OnceValue(func() []uint32 {
	b, err := syscall.Mmap(-1, 0, chaseSlots*4, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	ring := unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), chaseSlots)
	// One cycle through every slot in a fixed pseudo-random order (Sattolo's
	// shuffle), so each load's address depends on the one before and no
	// prefetcher can guess it.
	for i := range ring {
		ring[i] = uint32(i)
	}
	x := uint64(0x2545f4914f6cdd1d)
	for i := chaseSlots - 1; i > 0; i-- {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		j := int(x % uint64(i))
		ring[i], ring[j] = ring[j], ring[i]
	}
	return ring
})

// ReferenceMemNs is the time of one dependent load from main memory, in
// nanoseconds: the fastest of five chains of 20,000 loads through a 64 MiB
// ring; NaN when the ring cannot be mapped.
func ReferenceMemNs() float64 {
	ring := chase()
	if ring == nil {
		return math.NaN()
	}
	const loads = 20000
	best := time.Duration(1<<63 - 1)
	p := uint32(0)
	for range 5 {
		t0 := time.Now()
		for range loads {
			p = ring[p]
		}
		if d := time.Since(t0); d < best {
			best = d
		}
	}
	runtime.KeepAlive(p)
	return float64(best.Nanoseconds()) / loads
}

// Report stops b's timer and reports both references as the metrics
// ref-ns and ref-mem-ns of b's run: call it after b's own figures, which
// the references' time must not enter.
func Report(b *testing.B) {
	b.StopTimer()
	b.ReportMetric(ReferenceNs(), "ref-ns")
	b.ReportMetric(ReferenceMemNs(), "ref-mem-ns")
}
