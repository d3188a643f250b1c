package engine

import (
	"fmt"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"maps"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
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
			e := mustEngine(t, func(c *Config) { c.IdleTimeout = tc.idle; c.Backstop.MaxDuration = 0 })
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

// checkSenders fails t unless every shard's sender counts are its
// sessions' senders counted afresh, its largest count is the largest of
// them, each count's list holds exactly the senders with that count, and
// the heaviest sender is one of those holding the most.
func checkSenders(t *testing.T, e *Engine) {
	t.Helper()
	for i := range e.shards {
		tab := &e.shards[i].tab
		want := map[uint64]int32{}
		tab.each(func(_ uint32, s *session) { want[s.desc.sender]++ })
		c := &tab.senders
		got := map[uint64]int32{}
		for sender, j := range c.index {
			got[sender] = c.entries[j].count
		}
		if !maps.Equal(got, want) {
			t.Fatalf("shard %d: counted %v, sessions %v", i, got, want)
		}
		most := int32(0)
		for _, n := range want {
			most = max(most, n)
		}
		if c.most != most {
			t.Fatalf("shard %d: largest count %d, want %d", i, c.most, most)
		}
		listed := 0
		for cnt := range c.heads {
			prev := int32(0)
			for j := c.heads[cnt]; j != 0; prev, j = j, c.entries[j].next {
				if e := c.entries[j]; int(e.count) != cnt || e.prev != prev || want[e.sender] != e.count {
					t.Fatalf("shard %d: entry %d (%+v) in the list of count %d after %d", i, j, e, cnt, prev)
				}
				listed++
			}
			if c.tails[cnt] != prev {
				t.Fatalf("shard %d: the list of count %d ends at %d, its tail is %d", i, cnt, prev, c.tails[cnt])
			}
		}
		if listed != len(want) {
			t.Fatalf("shard %d: %d senders listed, %d hold sessions", i, listed, len(want))
		}
		if h, ok := c.heaviest(); ok != (most > 0) || (ok && want[h] != most) {
			t.Fatalf("shard %d: heaviest %x (%v) holds %d, most %d", i, h, ok, want[h], most)
		}
	}
}

// TestSenderCountsFollowTheSessions: sessions of a few senders come, change
// their description (a target field filled in later), are evicted at the
// bound and expire; after every step each shard's sender counts are its
// sessions' counted afresh, compaction and the counts' own shrinking
// included.
func TestSenderCountsFollowTheSessions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	e := mustEngine(t, func(c *Config) { c.MaxSessions = 300; c.IdleTimeout = 20 * time.Second })
	norm := canon.NewNormalizer(canon.DefaultNormalizerConfig())
	builders := map[string]*callBuilder{}
	targets := []target.Process{{}, {ServiceName: "a"}, {ServiceName: "a", ServiceInstanceID: "i1"}, {ServiceName: "b", PID: 7}, {HostName: "h"}}
	at := time.Duration(0)
	for step := range 20_000 {
		at += time.Duration(rng.IntN(40)) * time.Millisecond
		if step%2500 == 2499 {
			e.Tick(t0.Add(at), nil)
			checkSenders(t, e)
			continue
		}
		// Half the time many sessions (evictions at the bound), half the
		// time a few (the others go idle and expire at the next Tick).
		// Mostly sessions of the first senders; now and then one of a
		// sender of its own, as a flood naming a new sender each would.
		keys := 2000
		if step%2500 >= 1250 {
			keys = 100
		}
		k := fmt.Sprintf("s-%d", rng.IntN(keys))
		tgt := targets[rng.IntN(len(targets))]
		if rng.IntN(10) == 0 {
			tgt = target.Process{ServiceInstanceID: fmt.Sprintf("own-%d", rng.IntN(5000))}
		}
		b := builders[k]
		if b == nil {
			b = &callBuilder{n: norm, sess: k}
			builders[k] = b
		}
		c := b.call(at, "t", `{}`, "r")
		c.Target = tgt
		observeAll(e, []*ToolCall{c})
		checkSenders(t, e)
	}
	if e.Stats().Evicted.Load() == 0 || e.Stats().Expired.Load() == 0 {
		t.Fatalf("the run neither evicted (%d) nor expired (%d): it checked less than it says", e.Stats().Evicted.Load(), e.Stats().Expired.Load())
	}
}

// TestSenderCountsShrinkAfterAFlood: once a flood has expired, the sender
// counts it grew (an entry per sender, a list per count) are rebuilt to
// the size of what is left, whether the flood named a sender per session
// or one for all, and still count the survivors right.
func TestSenderCountsShrinkAfterAFlood(t *testing.T) {
	const flood, every = 20_000, 500 // every 500th session survives
	for _, tc := range []struct {
		name   string
		sender func(i int) target.Process
	}{
		{"a sender per session", func(i int) target.Process { return target.Process{ServiceInstanceID: fmt.Sprint(i)} }},
		{"one sender", func(int) target.Process { return target.Process{ServiceName: "flood"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, func(c *Config) { c.MaxSessions = flood; c.IdleTimeout = time.Minute })
			norm := canon.NewNormalizer(canon.DefaultNormalizerConfig())
			builders := make([]*callBuilder, flood)
			call := func(i int, at time.Duration) {
				if builders[i] == nil {
					builders[i] = &callBuilder{n: norm, sess: fmt.Sprintf("s-%d", i)}
				}
				c := builders[i].call(at, "t", `{}`, "r")
				c.Target = tc.sender(i)
				observeAll(e, []*ToolCall{c})
			}
			for i := range flood {
				call(i, 0)
			}
			grown := 0
			for i := range e.shards {
				c := &e.shards[i].tab.senders
				grown = max(grown, len(c.entries), len(c.heads))
			}
			for i := 0; i < flood; i += every {
				call(i, 30*time.Second)
			}
			e.Tick(t0.Add(61*time.Second), nil)
			if got := e.Stats().Sessions.Load(); got != flood/every {
				t.Fatalf("%d sessions after expiry, want %d", got, flood/every)
			}
			small := func() {
				t.Helper()
				checkSenders(t, e)
				for i := range e.shards {
					c := &e.shards[i].tab.senders
					if len(c.entries) > 2*len(c.index)+65 || len(c.heads) > 2*int(c.most)+65 {
						t.Fatalf("shard %d keeps %d sender entries and %d count lists for %d senders holding at most %d (grown to %d)",
							i, len(c.entries), len(c.heads), len(c.index), c.most, grown)
					}
				}
			}
			small()
			if grown < flood/numShards/2 {
				t.Fatalf("the counts grew to %d only: the flood did not test their shrinking", grown)
			}
			e.Tick(t0.Add(time.Hour), nil) // the survivors go too
			small()
		})
	}
}

// TestHeaviestSenderGivesUpASession: at the bound, with nothing stale, the
// shard's session that goes is the newest of the sender holding the most
// sessions; between senders holding as many, the newest session goes.
func TestHeaviestSenderGivesUpASession(t *testing.T) {
	flood, agent, other := target.Process{ServiceName: "flood"}, target.Process{ServiceName: "agent", ServiceInstanceID: "i"}, target.Process{ServiceName: "other"}
	type step struct {
		session int
		target  target.Process
		gone    []int // sessions no longer tracked after the step
		kept    []int // sessions still tracked after the step
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"the flood's newest goes, not the newcomer", 4, []step{
			{session: 0, target: agent}, {session: 1, target: flood}, {session: 2, target: flood}, {session: 3, target: flood},
			{session: 4, target: other, gone: []int{3}, kept: []int{0, 1, 2, 4}},
			{session: 5, target: flood, gone: []int{2}, kept: []int{0, 1, 4, 5}},
			// The flood calls its sessions again: it still holds the most.
			{session: 1, target: flood}, {session: 5, target: flood},
			{session: 6, target: flood, gone: []int{5}, kept: []int{0, 1, 4, 6}},
		}},
		{"one sender each: the newest goes", 3, []step{
			{session: 0, target: agent}, {session: 1, target: flood}, {session: 2, target: other},
			{session: 3, target: target.Process{ServiceName: "x"}, gone: []int{2}, kept: []int{0, 1, 3}},
		}},
		{"a sender's sessions go newest first", 3, []step{
			{session: 0, target: agent}, {session: 1, target: agent}, {session: 2, target: agent},
			{session: 3, target: agent, gone: []int{2}, kept: []int{0, 1, 3}},
			{session: 4, target: other, gone: []int{3}, kept: []int{0, 1, 4}},
		}},
		{"a target named late moves the session to its sender", 4, []step{
			{session: 0, target: agent}, {session: 1}, {session: 2}, {session: 3, target: flood},
			// Sessions 1 and 2 name the flood's target at their second
			// call: the flood now holds three, the newest being 3.
			{session: 1, target: flood}, {session: 2, target: flood},
			{session: 4, target: other, gone: []int{3}, kept: []int{0, 1, 2, 4}},
			{session: 5, target: target.Process{ServiceName: "x"}, gone: []int{2}, kept: []int{0, 1, 4, 5}},
		}},
		{"a flood that stopped still pays for newcomers", 4, []step{
			{session: 0, target: flood}, {session: 1, target: flood}, {session: 2, target: flood}, {session: 3, target: flood},
			{session: 4, target: agent, gone: []int{3}},
			{session: 5, target: other, gone: []int{2}, kept: []int{0, 1, 4, 5}},
			{session: 6, target: target.Process{ServiceName: "x"}, gone: []int{1}, kept: []int{0, 4, 5, 6}},
			// Each sender holds one now: the newest (6) goes.
			{session: 7, target: target.Process{ServiceName: "y"}, gone: []int{6}, kept: []int{0, 4, 5, 7}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, func(c *Config) { c.MaxSessions = tc.max })
			keys := sameShardKeys(e, "s", 8)
			f := &tableFeed{e: e, builders: map[string]*callBuilder{}}
			for i, st := range tc.steps {
				b := f.builders[keys[st.session]]
				if b == nil {
					b = newBuilder(keys[st.session])
					f.builders[keys[st.session]] = b
				}
				c := b.call(time.Duration(i)*time.Second, "bash", `{"c":"ls"}`, "same")
				c.Target = st.target
				observeAll(e, []*ToolCall{c})
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
				checkSenders(t, e)
			}
		})
	}
}

// TestCompactedTableEvictsAtTheBound: a shard compacted by Tick (its flood
// expired) and then met at the bound gives up a session as before. Its
// ring of newest sessions once still named positions of the released
// chunks, and that eviction panicked.
func TestCompactedTableEvictsAtTheBound(t *testing.T) {
	const max = 300
	e := mustEngine(t, func(c *Config) { c.MaxSessions = max; c.IdleTimeout = time.Minute })
	f := &tableFeed{e: e, builders: map[string]*callBuilder{}}
	keys := sameShardKeys(e, "a", max+1)
	for i, k := range keys[:max] {
		f.call(k, time.Duration(i)*time.Millisecond)
	}
	for _, k := range keys[:10] {
		f.call(k, 2*time.Minute)
	}
	e.Tick(t0.Add(2*time.Minute+time.Second), nil)
	tab := &e.shards[e.shardOf(keys[0])].tab
	if tab.live != 10 || len(tab.chunks) != 1 {
		t.Fatalf("after expiry the shard holds %d sessions in %d chunks, want 10 in 1", tab.live, len(tab.chunks))
	}
	for i := 0; e.Stats().Sessions.Load() < max; i++ { // the other shards fill the table
		if k := fmt.Sprintf("b-%d", i); e.shardOf(k) != e.shardOf(keys[0]) {
			f.call(k, 2*time.Minute+2*time.Second)
		}
	}
	f.call(keys[max], 2*time.Minute+3*time.Second)
	if !f.tracked(keys[max]) || e.Stats().Evicted.Load() != 1 {
		t.Fatalf("the new session tracked %v, %d evicted; want tracked, 1", f.tracked(keys[max]), e.Stats().Evicted.Load())
	}
}

// TestSenderCountsCostPerSender: counting sessions per sender costs at most
// 96 bytes per sender in the costliest case, a sender per session (an
// entry, its map slot and their slack); sessions that share a sender cost
// one entry between them, plus 8 bytes per count up to the largest.
func TestSenderCountsCostPerSender(t *testing.T) {
	const n = 100_000
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	c := new(senderCounts)
	for i := range n {
		c.add(uint64(i)*0x9E3779B97F4A7C15|1, uint32(i), true)
	}
	after := heap()
	runtime.KeepAlive(c)
	per := float64(after-before) / n
	t.Logf("%.1f bytes per sender (%d senders)", per, n)
	if per > 96 {
		t.Fatalf("%.1f bytes per sender, want at most 96", per)
	}
}

// tokensOf is the token count the table keeps for key, found as AddTokens
// finds it, and whether it keeps one.
func tokensOf(e *Engine, key string) (int64, bool) {
	sh, h := e.shardFor(tokenKey(key))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if u := sh.tab.usageOf(h); u != nil {
		return u.tokens, true
	}
	return 0, false
}

// TestTokenCountsFollowTheirSessions: a session's token count, kept apart
// from it, moves with it when Tick compacts its table, goes with it when
// it expires, and a session made again starts from none.
func TestTokenCountsFollowTheirSessions(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.IdleTimeout = time.Minute })
	f := &tableFeed{e: e, builders: map[string]*callBuilder{}}
	const flood = 5000
	survivor := func(i int) bool { return i%250 == 0 }
	key := func(i int) string { return fmt.Sprintf("s-%d", i) }
	for i := range flood {
		f.call(key(i), time.Duration(i)*time.Millisecond)
		e.AddTokens(key(i), int64(i+1), t0, nil)
	}
	for i := range flood {
		if survivor(i) {
			f.call(key(i), 2*time.Minute)
			e.AddTokens(key(i), 1000, t0, nil)
		}
	}
	posOf := func(k string) uint32 {
		sh, h := e.shardFor(k)
		_, p := sh.tab.find(k, h)
		return p
	}
	moved := 0
	before := map[string]uint32{}
	for i := range flood {
		if survivor(i) {
			before[key(i)] = posOf(key(i))
		}
	}
	e.Tick(t0.Add(2*time.Minute+30*time.Second), nil)
	for i := range flood {
		got, ok := tokensOf(e, key(i))
		switch {
		case !survivor(i) && ok:
			t.Fatalf("%s expired and still has a count (%d)", key(i), got)
		case survivor(i) && got != int64(i+1)+1000:
			t.Fatalf("%s has %d tokens after the compaction, want %d", key(i), got, i+1+1000)
		case survivor(i) && posOf(key(i)) != before[key(i)]:
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("the compaction moved no survivor: the test shows nothing")
	}
	f.call(key(1), 3*time.Minute)
	if got, ok := tokensOf(e, key(1)); !ok || got != 0 {
		t.Fatalf("a session made again after it expired has %d tokens (kept: %v), want none", got, ok)
	}
}
