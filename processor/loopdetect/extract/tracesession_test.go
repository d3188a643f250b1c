package extract

import (
	"encoding/hex"
	"testing"
)

// A session keyed by its trace is the trace id in lower-case hex, for
// every byte value, whether the scratch spelled another trace before or
// the same one.
func TestTraceSessionIsTheTraceIDInHex(t *testing.T) {
	var ids [][16]byte
	for first := 0; first < 256; first += 16 {
		var id [16]byte
		for i := range id {
			id[i] = byte(first + i)
		}
		ids = append(ids, id)
	}
	ids = append(ids, [16]byte{}, [16]byte{0: 0xff, 15: 0x01})
	var sc Scratch
	for _, id := range ids {
		want := hex.EncodeToString(id[:])
		for range 2 { // the second time from the memo
			if got := sc.traceSession(id); got != want {
				t.Fatalf("traceSession(%x) = %q, want %q", id, got, want)
			}
		}
	}
}
