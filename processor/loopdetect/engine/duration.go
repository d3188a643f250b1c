package engine

import (
	"math"
	"time"
)

// micros is d in whole microseconds, rounded up and clamped to a record's
// uint32 (71 minutes). Rounding up keeps every real overlap: the second
// copy of a span, started a few hundred nanoseconds after the first, must
// still fall inside the first's recorded interval.
func micros(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return uint32(min(us, math.MaxUint32))
}
