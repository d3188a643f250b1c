package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestSessionFloodBetweenCallsDoesNotHideALoop: between each of a victim's
// identical calls, a sender opens more fresh sessions than max_sessions
// holds (102,000 for 100,000 once evicted the victim every time, so its
// loop was never seen). Fresh sessions now evict their own newest members,
// never an older session that is still calling: the loop is caught.
func TestSessionFloodBetweenCallsDoesNotHideALoop(t *testing.T) {
	const max = 10_000
	for _, flood := range []int{max + max/50, 2 * max} { // 102,000 for 100,000 (scaled), and twice the table
		t.Run(fmt.Sprint(flood), func(t *testing.T) { floodBetweenCalls(t, max, flood) })
	}
}

func floodBetweenCalls(t *testing.T, max, flood int) {
	e := mustEngine(t, func(c *Config) { c.MaxSessions = max })
	victim := newBuilder("victim-session")
	var stuck bool
	n := 0
	for call := 0; call < 8 && !stuck; call++ {
		at := time.Duration(call) * 20 * time.Second
		for _, tr := range observeAll(e, []*ToolCall{victim.call(at, "bash", `{"command":"npm test"}`, "1 failing test")}) {
			stuck = stuck || tr.To == StateStuck
		}
		for i := 0; i < flood; i++ {
			n++
			b := newBuilder(fmt.Sprintf("flood-%d", n))
			observeAll(e, []*ToolCall{b.call(at+time.Second+time.Duration(i)*time.Microsecond, "read", fmt.Sprintf(`{"n":%d}`, n), "r")})
			if s := e.Stats().Sessions.Load(); s > int64(max) {
				t.Fatalf("%d sessions tracked, max_sessions %d", s, max)
			}
		}
	}
	if !stuck {
		t.Fatalf("the victim's loop was not caught: %d flood sessions, %d evicted", n, e.Stats().Evicted.Load())
	}
	if e.Stats().Evicted.Load() == 0 {
		t.Fatal("the flood evicted nothing: it did not reach max_sessions")
	}
}

// TestStaleSessionsMakeRoomFirst: at the bound, a session without a call
// for staleAfter goes before any other, so a table full of finished
// agents' sessions still takes new ones in order.
func TestStaleSessionsMakeRoomFirst(t *testing.T) {
	const max = 64
	e := mustEngine(t, func(c *Config) { c.MaxSessions = max })
	for i := 0; i < max; i++ {
		b := newBuilder(fmt.Sprintf("old-%d", i))
		observeAll(e, []*ToolCall{b.call(time.Duration(i)*time.Millisecond, "t", `{}`, "r")})
	}
	later := maxStaleAfter + time.Minute
	for i := 0; i < max; i++ {
		b := newBuilder(fmt.Sprintf("new-%d", i))
		observeAll(e, []*ToolCall{b.call(later+time.Duration(i)*time.Millisecond, "t", `{}`, "r")})
	}
	for i := 0; i < max; i++ {
		if _, _, ok := e.Session(fmt.Sprintf("new-%d", i)); !ok {
			t.Fatalf("new-%d was not kept though every older session was stale", i)
		}
	}
}

// TestSessionsNeverPassTheBound: with every shard admitting at once, the
// tracked count (the sessions gauge) never exceeds max_sessions.
func TestSessionsNeverPassTheBound(t *testing.T) {
	const max, workers = 8, 8
	e := mustEngine(t, func(c *Config) { c.MaxSessions = max })
	stop := make(chan struct{})
	var peak int64
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			select {
			case <-stop:
				return
			default:
				peak = max64(peak, e.Stats().Sessions.Load())
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				b := newBuilder(fmt.Sprintf("w%d-s%d", w, i))
				observeAll(e, []*ToolCall{b.call(time.Duration(i)*time.Millisecond, "t", `{}`, "r")})
			}
		}()
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	if peak > max {
		t.Fatalf("the sessions count reached %d, max_sessions %d", peak, max)
	}
	tracked := len(e.sessions())
	if int64(tracked) != e.Stats().Sessions.Load() {
		t.Fatalf("count %d, sessions in the table %d", e.Stats().Sessions.Load(), tracked)
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
