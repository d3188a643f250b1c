package engine

import (
	"slices"
	"testing"
)

// TestCycleRingLaneTestIsExact: the four-lane test that lets the tracker
// skip its scan says a digest is in the ring exactly when it is, for
// digests in any lane, at the lanes' edges (0, 0x8000, 0xffff) and for
// neighbours that differ by one bit or by a borrow.
func TestCycleRingLaneTestIsExact(t *testing.T) {
	probes := []uint16{0, 1, 2, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff, 0x1234, 0x1235, 0x0100}
	for _, tc := range []struct {
		name string
		fill func(i int) uint16
	}{
		{"empty ring", func(int) uint16 { return 0 }},
		{"full ring of small values", func(i int) uint16 { return uint16(i + 1) }},
		{"lane edges", func(i int) uint16 { return []uint16{0xffff, 0x8000, 0x7fff, 0x0001}[i%4] }},
		{"one value in the last lane", func(i int) uint16 {
			if i == recentCalls-1 {
				return 0x1234
			}
			return 0x4321
		}},
		{"alternating zero and high", func(i int) uint16 { return uint16(i%2) * 0xfffe }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ct cycleTracker
			for i := range ct.recent {
				ct.recent[i] = tc.fill(i)
			}
			for _, d := range probes {
				if got, want := ct.mayHold(d), slices.Contains(ct.recent[:], d); got != want {
					t.Errorf("mayHold(%#x) = %v, ring holds it: %v", d, got, want)
				}
			}
		})
	}
}
