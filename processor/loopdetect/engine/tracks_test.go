package engine

import (
	"strings"
	"testing"
	"time"
)

// Tracks answers what AddTokens acts on: a session exists from its first
// tool call on, long session keys included.
func TestTracksOnlySessionsWithAToolCall(t *testing.T) {
	for _, key := range []string{"s", strings.Repeat("k", maxKept+1)} {
		e := mustEngine(t, nil)
		if e.Tracks(key) {
			t.Fatalf("%d-byte key tracked before any tool call", len(key))
		}
		e.AddTokens(key, 10, t0, nil)
		if e.Tracks(key) {
			t.Fatalf("%d-byte key tracked after model calls alone", len(key))
		}
		c := newBuilder(key).call(time.Second, "read_file", `{"p":1}`, "r")
		e.Observe(c, c.End, nil)
		if !e.Tracks(key) {
			t.Fatalf("%d-byte key not tracked after its first tool call", len(key))
		}
	}
}
