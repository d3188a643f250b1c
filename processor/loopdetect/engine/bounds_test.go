package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// TestCraftedShardFloodDoesNotEvictBeforeMaxSessions: sessions that an
// attacker chose to hash into the victim's shard (xxhash % 16 was the shard
// function) used to fill that shard's 1/16 of max_sessions and evict the
// victim's loop in progress while the engine held few sessions. The bound is
// global: nothing is evicted before max_sessions sessions are tracked.
func TestCraftedShardFloodDoesNotEvictBeforeMaxSessions(t *testing.T) {
	const max = 1600
	e := mustEngine(t, func(c *Config) { c.MaxSessions = max })
	victim := newBuilder("victim-session")
	var calls []*ToolCall
	for i := 0; i < 3; i++ {
		calls = append(calls, victim.call(time.Duration(i)*time.Second, "bash", `{"c":"ls"}`, "same"))
	}
	observeAll(e, calls)
	target := xxhash.Sum64String("victim-session") % numShards
	crafted := 0
	for i := 0; crafted < max/2; i++ {
		key := fmt.Sprintf("attacker-%d", i)
		if xxhash.Sum64String(key)%numShards != target {
			continue
		}
		crafted++
		b := newBuilder(key)
		observeAll(e, []*ToolCall{b.call(5*time.Second, "t", `{}`, "r")})
	}
	if n := e.Stats().Evicted.Load(); n != 0 {
		t.Fatalf("%d sessions evicted with %d of %d tracked", n, e.Stats().Sessions.Load(), max)
	}
	if _, _, ok := e.Session("victim-session"); !ok {
		t.Fatal("the victim's session was evicted before max_sessions was reached")
	}
}

// TestMaxSessionsIsAGlobalBound: past max_sessions the least recently seen
// sessions go, and the count never exceeds the bound.
func TestMaxSessionsIsAGlobalBound(t *testing.T) {
	const max = 64
	e := mustEngine(t, func(c *Config) { c.MaxSessions = max })
	for i := 0; i < 10*max; i++ {
		b := newBuilder(fmt.Sprintf("s%d", i))
		observeAll(e, []*ToolCall{b.call(time.Duration(i)*time.Millisecond, "t", `{}`, "r")})
		if n := e.Stats().Sessions.Load(); n > max {
			t.Fatalf("%d sessions tracked, bound %d", n, max)
		}
	}
	if got := e.Stats().Evicted.Load(); got != 9*max {
		t.Fatalf("evicted %d, want %d", got, 9*max)
	}
}

// TestShardHashIsKeyedPerEngine: two engines place the same keys in
// different shards, so shard placement cannot be computed offline.
func TestShardHashIsKeyedPerEngine(t *testing.T) {
	a, b := mustEngine(t, nil), mustEngine(t, nil)
	differ := 0
	for i := 0; i < 64; i++ {
		k := fmt.Sprintf("k%d", i)
		if a.shardOf(k) != b.shardOf(k) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("shard placement is the same in two engines: the hash is not keyed")
	}
}

// TestToolNameTableIsBoundedAndRecovers: a flood of distinct tool names
// (once 16 × 65,536 kept forever, +155 MB for 1 M names, and every later
// tool read as "(other)") stays within the table's bound, and names unused
// for the idle timeout make room for new ones.
func TestToolNameTableIsBoundedAndRecovers(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.IdleTimeout = time.Minute })
	b := newBuilder("flood")
	const flood = 200_000
	for i := 0; i < flood; i++ {
		observeAll(e, []*ToolCall{b.call(time.Duration(i)*time.Microsecond, fmt.Sprintf("tool-%d", i), `{}`, "r")})
	}
	if n := e.internedNames(); n > maxInternedTotal {
		t.Fatalf("%d tool names kept, bound %d", n, maxInternedTotal)
	}
	// Within the idle timeout the flood's names stand: a new name reads
	// as "(other)".
	sh := &e.shards[e.shardOf("flood")]
	if id := sh.names.id("fresh-early", t0.Add(2*time.Second).UnixNano()); id != otherID {
		t.Fatalf("a full table gave a new name id %d within the idle timeout", id)
	}
	// Later, the least recently used names are evicted for new ones.
	later := newBuilder("flood")
	later.seq = flood + 1
	observeAll(e, []*ToolCall{later.call(2*time.Minute, "fresh", `{}`, "r")})
	id, ok := sh.names.ids["fresh"]
	if !ok || sh.names.name(id) != "fresh" {
		t.Fatal("a new tool name reads as (other) after the flood's names went idle")
	}
	if n := e.internedNames(); n > maxInternedTotal {
		t.Fatalf("%d tool names kept, bound %d", n, maxInternedTotal)
	}
}

// TestGlobalBoundUnderConcurrency: eviction across shards (a new session
// landing in an empty shard at the bound takes another shard's oldest)
// never deadlocks and keeps the count within the bound plus one per
// concurrent caller.
func TestGlobalBoundUnderConcurrency(t *testing.T) {
	const max, workers = 8, 8
	e := mustEngine(t, func(c *Config) { c.MaxSessions = max })
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				b := newBuilder(fmt.Sprintf("w%d-s%d", w, i))
				observeAll(e, []*ToolCall{b.call(time.Duration(i)*time.Millisecond, "t", `{}`, "r")})
			}
		}()
	}
	wg.Wait()
	if n := e.Stats().Sessions.Load(); n > max+workers {
		t.Fatalf("%d sessions tracked, bound %d (+%d concurrent)", n, max, workers)
	}
}
