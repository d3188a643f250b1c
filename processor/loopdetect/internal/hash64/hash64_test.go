package hash64

import "testing"

// TestHashesArePinned: the hashes give the values the canonical digests,
// wait owners and cycle keys were made with before they were shared.
func TestHashesArePinned(t *testing.T) {
	for _, tc := range []struct{ x, want uint64 }{
		{0, 0}, {1, 0x5692161d100b05e5}, {42, 0xa759ea27d4727622}, {0xdeadbeefcafebabe, 0x7ad6664f09ffe52c},
	} {
		if got := Mix(tc.x); got != tc.want {
			t.Errorf("Mix(%#x) = %#x, want %#x", tc.x, got, tc.want)
		}
	}
	for _, tc := range []struct {
		s    string
		want uint64
	}{
		{"", 0x1ff5c2923a788d2c}, {"a", 0x674d34464fd4908a}, {"gh", 0xb00b13650c71dd05}, {"run", 0x2478357d83ccc258},
		{"make", 0xa508b71e6ac9eebb}, {"kubectl", 0xb0888ec8411ee93e}, {"12345678", 0x339a964e28fa113f},
		{"watch-status-x", 0x7a46a1f67a0a2961}, {"a-string-longer-than-16", 0xb797e3db8001d30},
	} {
		if got := String(tc.s); got != tc.want {
			t.Errorf("String(%q) = %#x, want %#x", tc.s, got, tc.want)
		}
	}
}
