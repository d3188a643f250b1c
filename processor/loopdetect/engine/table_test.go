package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// sessions is every tracked session, for tests (no lock: the engine must
// be idle).
func (e *Engine) sessions() []*session {
	var all []*session
	for i := range e.shards {
		e.shards[i].tab.each(func(_ uint32, s *session) { all = append(all, s) })
	}
	return all
}

func TestSessionIsFourCacheLines(t *testing.T) {
	if got := unsafe.Sizeof(session{}); got != 256 {
		t.Fatalf("session is %d bytes, the layout assumes 256", got)
	}
}

// sameShardKeys returns n session keys that e places in one shard (the
// placement is keyed per engine, so they are picked by trying): eviction
// is decided shard by shard, and a test that means to see one decision
// puts its sessions in one.
func sameShardKeys(e *Engine, prefix string, n int) []string {
	var keys []string
	want := e.shardOf(prefix + "-0")
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Sprintf("%s-%d", prefix, i); e.shardOf(k) == want {
			keys = append(keys, k)
		}
	}
	return keys
}

// tableFeed drives an engine with one call per step, each session's
// calls numbered by its own builder, on the fake clock.
type tableFeed struct {
	e        *Engine
	builders map[string]*callBuilder
}

func (f *tableFeed) call(key string, at time.Duration) []Transition {
	b := f.builders[key]
	if b == nil {
		b = newBuilder(key)
		f.builders[key] = b
	}
	return observeAll(f.e, []*ToolCall{b.call(at, "bash", `{"c":"ls"}`, "same")})
}

func (f *tableFeed) tracked(key string) bool {
	_, _, ok := f.e.Session(key)
	return ok
}

// TestEvictionHonoursTheCap: however many sessions arrive, and however they
// fall into shards, the count never passes max_sessions, every session
// over it is counted as evicted, and the count is the table's.
func TestEvictionHonoursTheCap(t *testing.T) {
	for _, tc := range []struct {
		name      string
		max       int
		sameShard bool
	}{
		{"one session", 1, false},
		{"seven over all shards", 7, false},
		{"seven in one shard", 7, true},
		{"sixty-four over all shards", 64, false},
		{"two hundred in one shard", 200, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, func(c *Config) { c.MaxSessions = tc.max })
			f := &tableFeed{e: e, builders: map[string]*callBuilder{}}
			n := 10 * tc.max
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("s-%d", i)
			}
			if tc.sameShard {
				keys = sameShardKeys(e, "s", n)
			}
			for i, k := range keys {
				f.call(k, time.Duration(i)*time.Millisecond)
				if got := e.Stats().Sessions.Load(); got > int64(tc.max) {
					t.Fatalf("after %d sessions: %d tracked, max_sessions %d", i+1, got, tc.max)
				}
			}
			if got, want := e.Stats().Evicted.Load(), int64(n-tc.max); got != want {
				t.Fatalf("evicted %d, want %d", got, want)
			}
			if got := len(e.sessions()); int64(got) != e.Stats().Sessions.Load() || got != tc.max {
				t.Fatalf("%d sessions in the tables, count %d, want %d", got, e.Stats().Sessions.Load(), tc.max)
			}
		})
	}
}

// TestEvictionPrefersStaleSessions: at the bound a session without a call
// for staleAfter goes before one that is calling, whichever shards they
// are in; with none stale, the newest session goes, never an older one
// still calling (the flood rule), which a test can only see within one
// shard.
func TestEvictionPrefersStaleSessions(t *testing.T) {
	stale := maxStaleAfter + time.Minute
	type step struct {
		session int // index into the case's keys
		at      time.Duration
		gone    []int // sessions no longer tracked after the step
		kept    []int // sessions still tracked after the step
	}
	for _, tc := range []struct {
		name      string
		sameShard bool
		steps     []step
	}{
		{"stale before hot, one shard", true, []step{
			{session: 0}, {session: 1}, {session: 2}, {session: 3},
			{session: 2, at: stale}, {session: 3, at: stale},
			{session: 4, at: stale, kept: []int{2, 3, 4}},
			{session: 5, at: stale, gone: []int{0, 1}, kept: []int{2, 3, 4, 5}},
			// Nothing is stale now: the newest session (5) makes room.
			{session: 6, at: stale, gone: []int{5}, kept: []int{2, 3, 4, 6}},
			{session: 7, at: stale + time.Second, gone: []int{6}, kept: []int{2, 3, 4, 7}},
		}},
		{"stale before hot, any shards", false, []step{
			{session: 0}, {session: 1}, {session: 2}, {session: 3},
			{session: 2, at: stale}, {session: 3, at: stale},
			{session: 4, at: stale, kept: []int{2, 3, 4}},
			{session: 5, at: stale, gone: []int{0, 1}, kept: []int{2, 3, 4, 5}},
		}},
		{"a session stays fresh by calling", true, []step{
			{session: 0}, {session: 1}, {session: 2}, {session: 3},
			{session: 0, at: stale - time.Second}, {session: 1, at: stale - time.Second},
			{session: 4, at: stale, gone: []int{2}, kept: []int{0, 1, 3, 4}},
			{session: 5, at: stale, gone: []int{3}, kept: []int{0, 1, 4, 5}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, func(c *Config) { c.MaxSessions = 4 })
			keys := make([]string, 8)
			for i := range keys {
				keys[i] = fmt.Sprintf("s-%d", i)
			}
			if tc.sameShard {
				keys = sameShardKeys(e, "s", len(keys))
			}
			f := &tableFeed{e: e, builders: map[string]*callBuilder{}}
			for i, st := range tc.steps {
				f.call(keys[st.session], st.at)
				for _, g := range st.gone {
					if f.tracked(keys[g]) {
						t.Fatalf("step %d: session %d is still tracked", i, g)
					}
				}
				for _, k := range st.kept {
					if !f.tracked(keys[k]) {
						t.Fatalf("step %d: session %d was evicted", i, k)
					}
				}
			}
		})
	}
}

// TestEvictedSessionStartsOver: a session evicted in the middle of a loop
// comes back with nothing of its past: its loop is counted from its new
// first call, and its transitions are numbered from one again.
func TestEvictedSessionStartsOver(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.MaxSessions = 1 })
	f := &tableFeed{e: e, builders: map[string]*callBuilder{}}
	stuckAt := func(from time.Duration) (int, Transition) {
		for i := 1; i <= 20; i++ {
			for _, tr := range f.call("looper", from+time.Duration(i)*time.Second) {
				if tr.To == StateStuck {
					return i, tr
				}
			}
		}
		t.Fatal("the loop was never caught")
		return 0, Transition{}
	}
	first, tr := stuckAt(0)
	if tr.Seq != 1 {
		t.Fatalf("first stuck transition has seq %d", tr.Seq)
	}
	f.call("intruder", time.Minute) // nothing is stale: the newest session, the only one, goes
	if f.tracked("looper") || !f.tracked("intruder") {
		t.Fatal("the loop's session was not the one evicted")
	}
	again, tr := stuckAt(2 * time.Minute)
	if again != first || tr.Seq != 1 || tr.CallIndex != int64(first) {
		t.Fatalf("after eviction the loop was caught at call %d (seq %d, index %d), want call %d as at first", again, tr.Seq, tr.CallIndex, first)
	}
}

// TestIdleExpiry: Tick forgets exactly the sessions whose last call is
// more than idle_timeout old, spares a session waiting on a lease, and
// forgets nothing with idle expiry off.
func TestIdleExpiry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		idle    time.Duration
		lastAt  []time.Duration // each session's last call
		leased  []bool
		tickAt  time.Duration
		expired []bool
	}{
		{"older than the timeout", time.Minute, []time.Duration{0, 30 * time.Second, 50 * time.Second}, nil, 90 * time.Second, []bool{true, false, false}},
		{"exactly the timeout is kept", time.Minute, []time.Duration{30 * time.Second}, nil, 90*time.Second + 100*time.Millisecond, []bool{false}},
		{"all idle", time.Minute, []time.Duration{0, time.Second, 2 * time.Second}, nil, time.Hour, []bool{true, true, true}},
		{"a waiting session is spared", time.Minute, []time.Duration{0, 0}, []bool{true, false}, 30 * time.Minute, []bool{false, true}},
		{"expiry off", 0, []time.Duration{0, time.Second}, nil, 24 * time.Hour, []bool{false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, func(c *Config) { c.IdleTimeout = tc.idle; c.Backstop = 0 })
			for i, at := range tc.lastAt {
				b := newBuilder(fmt.Sprintf("s-%d", i))
				var calls []*ToolCall
				for j := range 2 { // two identical calls: a lease makes them a wait
					c := b.call(at-time.Duration(1-j)*time.Second, "check", `{"j":1}`, `{"ok":false}`)
					if i < len(tc.leased) && tc.leased[i] {
						c.Lease = Lease{Owner: "ci", Deadline: t0.Add(time.Hour)}
					}
					calls = append(calls, c)
				}
				observeAll(e, calls)
			}
			e.Tick(t0.Add(tc.tickAt), nil)
			n := 0
			for i, want := range tc.expired {
				if _, _, ok := e.Session(fmt.Sprintf("s-%d", i)); ok == want {
					t.Errorf("session %d: tracked %v, want expired %v", i, ok, want)
				}
				if want {
					n++
				}
			}
			if got := e.Stats().Expired.Load(); got != int64(n) {
				t.Errorf("expired count %d, want %d", got, n)
			}
			if got := e.Stats().Sessions.Load(); got != int64(len(tc.expired)-n) || len(e.sessions()) != int(got) {
				t.Errorf("sessions count %d (tables %d), want %d", got, len(e.sessions()), len(tc.expired)-n)
			}
		})
	}
}

// TestStaleSweepIsBounded: a sweep looks at sweepLen positions at most, the
// hand goes on from where it stopped, so the one stale session among many
// fresh ones is found within a turn; and a table whose every session is
// known to be fresh (oldestSeen) is not swept at all.
func TestStaleSweepIsBounded(t *testing.T) {
	const n, stale = 1000, int64(time.Minute)
	var tab sessionTable
	tab.init(12)
	now := int64(10 * time.Minute)
	for i := range n {
		at := now
		if i == n-1 {
			at = 0
		}
		s, _ := tab.add(fmt.Sprint(i), uint64(i)<<32, at)
		s.firstSeen = at
	}
	sweeps := 0
	for {
		sweeps++
		p, ok := tab.staleVictim(now, stale, sweepLen)
		if ok {
			if p != n-1 {
				t.Fatalf("sweep found position %d, not the stale one", p)
			}
			break
		}
		if sweeps > n/sweepLen+1 {
			t.Fatal("the stale session was not found within a turn of the hand")
		}
		if want := uint32(sweeps * sweepLen % n); tab.hand != want {
			t.Fatalf("hand at %d after %d sweeps, want %d", tab.hand, sweeps, want)
		}
	}
	if want := (n-1)/sweepLen + 1; sweeps != want {
		t.Fatalf("found after %d sweeps, want %d", sweeps, want)
	}
	tab.remove(n-1, uint64(n-1)<<32)
	tab.oldestSeen = now // as Tick leaves it
	hand := tab.hand
	if _, ok := tab.staleVictim(now, stale, sweepLen); ok || tab.hand != hand {
		t.Fatalf("a table known to be fresh was swept (hand %d → %d)", hand, tab.hand)
	}
}

// TestSessionTableAgainstAMap: random adds, look-ups, removals and
// compactions agree with a map, with hashes narrowed so that many keys
// share a home slot and the index's probe runs and backward-shift deletion
// are exercised.
func TestSessionTableAgainstAMap(t *testing.T) {
	for _, homes := range []uint64{1, 7, 1 << 20} {
		t.Run(fmt.Sprint(homes), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, homes))
			var tab sessionTable
			tab.init(4)
			hash := func(k string) uint64 { return (uint64(len(k)*31+int(k[len(k)-1])) % homes) << 32 }
			model := map[string]uint32{}
			hashOf := func(s *session) uint64 { return hash(s.keyString()) }
			for step := range 20_000 {
				if step%1000 == 999 {
					tab.compact(hashOf)
					model = map[string]uint32{}
					tab.each(func(p uint32, s *session) { model[s.keyString()] = p })
				}
				k := fmt.Sprint(rng.IntN(600))
				s, p := tab.find(k, hash(k))
				want, ok := model[k]
				if (s != nil) != ok || (ok && p != want) || (s != nil && s.keyString() != k) {
					t.Fatalf("find(%s) = %v at %d, model %v at %d", k, s != nil, p, ok, want)
				}
				switch {
				case !ok:
					_, p = tab.add(k, hash(k), 0)
					model[k] = p
				case rng.IntN(2) == 0:
					tab.remove(p, hash(k))
					delete(model, k)
				}
				if tab.live != len(model) {
					t.Fatalf("table holds %d, model %d", tab.live, len(model))
				}
			}
			var live []string
			tab.each(func(_ uint32, s *session) { live = append(live, s.keyString()) })
			var want []string
			for k := range model {
				want = append(want, k)
			}
			slices.Sort(live)
			slices.Sort(want)
			if !slices.Equal(live, want) {
				t.Fatalf("table holds %d sessions, model %d", len(live), len(want))
			}
		})
	}
}

// TestLongKeysAreComparedWhole: keys longer than the inline part differ
// only after it and are still two sessions.
func TestLongKeysAreComparedWhole(t *testing.T) {
	e := mustEngine(t, nil)
	f := &tableFeed{e: e, builders: map[string]*callBuilder{}}
	prefix := fmt.Sprintf("%0*d", keyInline, 0)
	a, b := prefix+"-a", prefix+"-b"
	f.call(a, 0)
	if f.tracked(b) {
		t.Fatal("a long key was found as another that shares its first bytes")
	}
	f.call(b, time.Second)
	if e.Stats().Sessions.Load() != 2 || !f.tracked(a) || !f.tracked(b) {
		t.Fatal("two long keys sharing their inline bytes are not two sessions")
	}
}

// TestObserveAllocatesNothingInSteadyState: a call of a known session with
// a full history, usage recorded and a description, allocates nothing.
func TestObserveAllocatesNothingInSteadyState(t *testing.T) {
	e := mustEngine(t, nil)
	b := newBuilder("steady")
	call := func(i int) *ToolCall {
		c := b.call(time.Duration(i)*time.Second, "read", fmt.Sprintf(`{"n":%d}`, i%50), fmt.Sprintf("r%d", i))
		c.SessionSource, c.Agent, c.Target.ServiceInstanceID = "trace_id", "agent", "instance"
		return c
	}
	var calls []*ToolCall
	for i := range 200 {
		calls = append(calls, call(i))
	}
	out := make([]Transition, 0, 4)
	for _, c := range calls[:100] {
		out = e.Observe(c, c.End, out[:0])
	}
	e.AddTokens("steady", 100, t0, nil)
	i := 100
	if allocs := testing.AllocsPerRun(99, func() {
		c := calls[i]
		i++
		out = e.Observe(c, c.End, out[:0])
	}); allocs != 0 {
		t.Fatalf("%v allocations per call", allocs)
	}
}

// TestExpiredFloodReleasesItsChunks: once a flood of sessions has expired,
// Tick moves the survivors down and releases the chunks and index the
// flood took; the survivors go on exactly as in an engine that never saw
// the flood.
func TestExpiredFloodReleasesItsChunks(t *testing.T) {
	idle := func(c *Config) { c.IdleTimeout = time.Minute }
	e, ref := mustEngine(t, idle), mustEngine(t, idle)
	f := &tableFeed{e: e, builders: map[string]*callBuilder{}}
	r := &tableFeed{e: ref, builders: map[string]*callBuilder{}}
	const flood, kept = 5000, 20
	survivor := func(i int) bool { return i%(flood/kept) == 0 }
	for i := range flood {
		k, at := fmt.Sprintf("s-%d", i), time.Duration(i)*time.Millisecond
		f.call(k, at)
		if survivor(i) {
			r.call(k, at)
		}
	}
	// The survivors call on (identical calls: they get stuck) and the rest
	// of the flood goes idle.
	var trs, refTrs []Transition
	step := func(at time.Duration) {
		for i := range flood {
			if k := fmt.Sprintf("s-%d", i); survivor(i) {
				trs, refTrs = append(trs, f.call(k, at)...), append(refTrs, r.call(k, at)...)
			}
		}
	}
	for j := range 3 {
		step(2*time.Minute + time.Duration(j)*time.Second)
	}
	tick := t0.Add(2*time.Minute + 30*time.Second)
	trs, refTrs = append(trs, e.Tick(tick, nil)...), append(refTrs, ref.Tick(tick, nil)...)
	if got := e.Stats().Sessions.Load(); got != kept {
		t.Fatalf("%d sessions after expiry, want %d", got, kept)
	}
	for i := range e.shards {
		tab := &e.shards[i].tab
		if want := (tab.live + chunkLen - 1) / chunkLen; len(tab.chunks) != want || int(tab.next) != tab.live {
			t.Fatalf("shard %d: %d chunks, %d positions for %d sessions", i, len(tab.chunks), tab.next, tab.live)
		}
		if len(tab.index) > 16 {
			t.Fatalf("shard %d: index of %d slots for %d sessions", i, len(tab.index), tab.live)
		}
	}
	for j := range 10 {
		step(3*time.Minute + time.Duration(j)*time.Second)
	}
	if len(trs) == 0 || !reflect.DeepEqual(trs, refTrs) {
		t.Fatalf("the survivors' %d transitions differ from the %d of an engine without the flood", len(trs), len(refTrs))
	}
}
