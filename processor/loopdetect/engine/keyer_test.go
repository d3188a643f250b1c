package engine

import "testing"

func TestKeyedDigestsDependOnTheKey(t *testing.T) {
	a := NewKeyer([]byte("k1")).Keyed("sig", 42)
	b := NewKeyer([]byte("k2")).Keyed("sig", 42)
	c := NewKeyer([]byte("k1")).Keyed("fp", 42)
	if a == b || a == c || len(a) != 32 {
		t.Fatalf("keyed digests: %s %s %s", a, b, c)
	}
}
