package engine

import (
	"fmt"
	"testing"
	"time"
)

// A count is exact below 15 and sticks at 15: a saturated bucket answers
// "maybe" for ever, never a wrong "no".
func TestPresenceCountsAndSaturates(t *testing.T) {
	var p presence
	p.init(16)
	const h = 3 * numShards // bucket 3
	if p.mayHave(h) {
		t.Fatal("an empty bucket says maybe")
	}
	for i := 0; i < 14; i++ {
		p.add(h)
	}
	for i := 0; i < 14; i++ {
		if !p.mayHave(h) {
			t.Fatalf("after %d of 14 removals the bucket says no", i)
		}
		p.remove(h)
	}
	if p.mayHave(h) {
		t.Fatal("a bucket emptied says maybe")
	}
	for i := 0; i < 20; i++ {
		p.add(h)
	}
	for i := 0; i < 20; i++ {
		p.remove(h)
	}
	if !p.mayHave(h) {
		t.Fatal("a saturated bucket says no after as many removals as additions")
	}
	for b := uint64(0); b < 16; b++ {
		if b != 3 && p.mayHave(b*numShards) {
			t.Fatalf("bucket %d, never added to, says maybe", b)
		}
	}
}

// Tracks and AddTokens answer as the session table does through creation,
// eviction at max_sessions and idle expiry, with few enough buckets that
// many keys share one.
func TestTracksFollowsTheSessionTable(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.MaxSessions = 40; c.IdleTimeout = time.Minute })
	seen := map[string]bool{}
	check := func(when string) {
		t.Helper()
		for key := range seen {
			_, _, tracked := e.Session(key)
			if got := e.Tracks(key); got != tracked {
				t.Fatalf("%s: Tracks(%s) = %v, the table says %v", when, key, got, tracked)
			}
		}
	}
	for i := 0; i < 200; i++ {
		key := fmt.Sprintf("s%d", i)
		seen[key] = true
		observeAll(e, []*ToolCall{newBuilder(key).call(time.Duration(i)*time.Millisecond, "t", `{}`, "r")})
		if i%10 == 0 {
			check(fmt.Sprintf("after %d sessions", i+1))
		}
	}
	if e.Stats().Evicted.Load() == 0 {
		t.Fatal("no session was evicted: the test does not cover removal")
	}
	e.Tick(t0.Add(time.Hour), nil)
	if n := e.Stats().Sessions.Load(); n != 0 {
		t.Fatalf("%d sessions left after the idle timeout", n)
	}
	check("after the idle timeout")
	for i := range e.shards {
		for w := range e.shards[i].present.words {
			if v := e.shards[i].present.words[w].Load(); v != 0 {
				t.Fatalf("shard %d still counts sessions (%x) with none tracked", i, v)
			}
		}
	}
	for key := range seen {
		if out := e.AddTokens(key, 10, t0, nil); len(out) != 0 {
			t.Fatalf("AddTokens on expired %s: %v", key, out)
		}
	}
}
