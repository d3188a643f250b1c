package benchref

import "testing"

// The reference work is the same on every run: its result over the
// fixed block is pinned, so a change to it (which would make reports
// from before and after incomparable) fails here.
func TestReferenceWorkIsFixed(t *testing.T) {
	if got, want := referencePass(referenceBlock), uint64(0x4269990ddae14ddc); got != want {
		t.Errorf("referencePass = %#x, want %#x", got, want)
	}
	if ns := ReferenceNs(); !(ns > 0) {
		t.Errorf("ReferenceNs = %v, want > 0", ns)
	}
	if ns := ReferenceMemNs(); !(ns > 0) {
		t.Errorf("ReferenceMemNs = %v, want > 0", ns)
	}
}
