package engine

import (
	"fmt"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
)

// TestSessionFloodBetweenCallsDoesNotHideALoop: between each of a victim's
// identical calls, a sender opens more fresh sessions than max_sessions
// holds (102,000 for 100,000 once evicted the victim every time, so its
// loop was never seen). The flood's sessions evict one another, never an
// older session that is still calling: the loop is caught, whether the
// flood's sessions share a sender (they then hold the most of every shard)
// or each names its own (the shard's newest session goes).
func TestSessionFloodBetweenCallsDoesNotHideALoop(t *testing.T) {
	const max = 10_000
	for _, tc := range []struct {
		name   string
		flood  int
		sender func(n int) target.Process
	}{
		{"102,000 for 100,000 (scaled)", max + max/50, func(int) target.Process { return target.Process{} }},
		{"twice the table", 2 * max, func(int) target.Process { return target.Process{} }},
		{"twice the table, a sender per flood session", 2 * max, func(n int) target.Process { return target.Process{ServiceInstanceID: fmt.Sprint(n)} }},
	} {
		t.Run(tc.name, func(t *testing.T) { floodBetweenCalls(t, max, tc.flood, tc.sender) })
	}
}

func floodBetweenCalls(t *testing.T, max, flood int, sender func(n int) target.Process) {
	e := mustEngine(t, func(c *Config) { c.MaxSessions = max })
	norm := canon.NewNormalizer(canon.DefaultNormalizerConfig())
	victim := newBuilder("victim")
	var stuck bool
	n := 0
	for call := 0; call < 8 && !stuck; call++ {
		at := time.Duration(call) * 20 * time.Second
		for _, tr := range observeAll(e, []*ToolCall{victim.call(at, "bash", `{"command":"npm test"}`, "1 failing test")}) {
			stuck = stuck || tr.To == StateStuck
		}
		for i := 0; i < flood; i++ {
			n++
			b := &callBuilder{n: norm, sess: fmt.Sprintf("flood-%d", n)}
			c := b.call(at+time.Second+time.Duration(i)*time.Microsecond, "read", fmt.Sprintf(`{"n":%d}`, n), "r")
			c.Target = sender(n)
			observeAll(e, []*ToolCall{c})
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
	if st := e.Stats(); st.EvictedStale.Load() != max || st.EvictedActive.Load() != 0 || st.Evicted.Load() != max {
		t.Fatalf("evicted %d: %d stale, %d active; want %d, all stale", st.Evicted.Load(), st.EvictedStale.Load(), st.EvictedActive.Load(), max)
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

// retouch is what a flooding sender does with its sessions besides
// opening new ones.
type retouch uint8

const (
	// retouchNone: every flood session makes one call.
	retouchNone retouch = iota
	// retouchRound: each of a round's new sessions calls a second time,
	// after the whole round has been opened.
	retouchRound
	// retouchAll: after each round, every flood session ever opened calls
	// again (an evicted one is opened anew).
	retouchAll
)

// floodShape is a flood aimed at a session that starts in its middle.
type floodShape struct {
	name string
	max  int // max_sessions
	// prefill sessions of the flood are open before the victim's first call.
	prefill int
	// perCall new flood sessions arrive between each two of the victim's calls.
	perCall int
	retouch retouch
	// victimOwn is how many other sessions the victim's own sender holds
	// (opened before the flood).
	victimOwn int
}

// TestFloodCannotHideANewLoop: a session whose first call arrives while a
// flood has filled the table, with 1,500 new flood sessions between each
// two of its calls, is killed at its 5th call, as it would be on an empty
// table. Its calls used to be evicted every time (no kill in 14 calls,
// 21,014 evictions; 49,014 when the flood re-touched its sessions): a new
// session was its shard's newest and went to the next one. Now the shard
// gives up a session of the sender that holds the most of it, which is the
// flood's, however often the flood calls its sessions again.
func TestFloodCannotHideANewLoop(t *testing.T) {
	for _, sh := range []floodShape{
		{name: "fresh one-call sessions", max: 10_000, prefill: 10_000, perCall: 1_500, retouch: retouchNone},
		{name: "each round's sessions called again", max: 10_000, prefill: 10_000, perCall: 1_500, retouch: retouchRound},
		{name: "every flood session called again each round", max: 10_000, prefill: 10_000, perCall: 1_500, retouch: retouchAll},
		{name: "flood larger than the table between calls", max: 2_000, prefill: 2_000, perCall: 5_000, retouch: retouchRound},
		{name: "victim's sender holds other sessions", max: 10_000, prefill: 10_000, perCall: 1_500, retouch: retouchRound, victimOwn: 50},
		{name: "one session per shard left to the flood", max: 64, prefill: 64, perCall: 1_500, retouch: retouchRound},
	} {
		t.Run(sh.name, func(t *testing.T) {
			calls, evicted := floodAroundNewVictim(t, sh)
			if calls == 0 {
				t.Fatalf("the victim's loop was not killed in 8 calls (%d evicted)", evicted)
			}
			if calls > 5 {
				t.Fatalf("the victim's loop was killed at call %d, want 5 as on an empty table (%d evicted)", calls, evicted)
			}
			if evicted == 0 {
				t.Fatal("the flood evicted nothing: it did not reach max_sessions")
			}
		})
	}
}

// floodAroundNewVictim runs sh and returns the victim's call that was
// killed (0: none in 8) and the evictions.
func floodAroundNewVictim(t *testing.T, sh floodShape) (killedAt int, evicted int64) {
	t.Helper()
	e := mustEngine(t, func(c *Config) { c.MaxSessions = sh.max })
	attacker := target.Process{ServiceName: "attacker", HostName: "flood-host"}
	victimTarget := target.Process{ServiceName: "agent", ServiceInstanceID: "inst-victim", PID: 4242}
	norm := canon.NewNormalizer(canon.DefaultNormalizerConfig()) // one for all: making one per session dominated the run
	builder := func(key string) *callBuilder { return &callBuilder{n: norm, sess: key} }
	var flood []*callBuilder
	at := time.Duration(0)
	tick := func() time.Duration { at += time.Microsecond; return at }
	send := func(b *callBuilder, tgt target.Process) []Transition {
		c := b.call(tick(), "read", fmt.Sprintf(`{"s":%q}`, b.sess), "r")
		c.Target = tgt
		tr := observeAll(e, []*ToolCall{c})
		if n := e.Stats().Sessions.Load(); n > int64(sh.max) {
			t.Fatalf("%d sessions tracked, max_sessions %d", n, sh.max)
		}
		return tr
	}
	open := func(n int) {
		for range n {
			b := builder(fmt.Sprintf("flood-%d", len(flood)))
			flood = append(flood, b)
			send(b, attacker)
		}
	}
	for i := range sh.victimOwn {
		send(builder(fmt.Sprintf("victim-own-%d", i)), victimTarget)
	}
	open(sh.prefill)
	victim := builder("victim")
	for call := 1; call <= 8; call++ {
		c := victim.call(tick(), "bash", `{"command":"npm test"}`, "1 failing test")
		c.Target = victimTarget
		for _, tr := range observeAll(e, []*ToolCall{c}) {
			if tr.Kill {
				return call, evictedActive(t, e)
			}
		}
		first := len(flood)
		open(sh.perCall)
		switch sh.retouch {
		case retouchRound:
			for _, b := range flood[first:] {
				send(b, attacker)
			}
		case retouchAll:
			for _, b := range flood {
				send(b, attacker)
			}
		}
	}
	return 0, evictedActive(t, e)
}

// evictedActive is e's evictions, which must all have been of active
// sessions: a flood's run takes minutes of the fake clock, so none is stale.
func evictedActive(t *testing.T, e *Engine) int64 {
	t.Helper()
	st := e.Stats()
	if st.EvictedActive.Load() != st.Evicted.Load() || st.EvictedStale.Load() != 0 {
		t.Fatalf("evicted %d: %d stale, %d active; want all active", st.Evicted.Load(), st.EvictedStale.Load(), st.EvictedActive.Load())
	}
	return st.Evicted.Load()
}
