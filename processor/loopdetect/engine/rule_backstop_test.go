package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestBackstopCountsFromTheEnginesFirstSight: a session is stuck, and
// killed (backstop is a kill reason), by the first call at least
// `backstop` after the engine first saw it, whatever its calls look like
// and whatever its spans' clock says; 0 turns the rule off.
func TestBackstopCountsFromTheEnginesFirstSight(t *testing.T) {
	tests := []struct {
		name     string
		backstop time.Duration
		at       []time.Duration // the engine's time of each call
		skew     time.Duration   // how far the spans' clock is behind the engine's
		same     bool            // identical calls under a wait lease, else varied calls
		stuckAt  int64           // 0: never stuck
		explain  string
	}{
		{"a call exactly the limit after the first: stuck and killed", time.Hour,
			[]time.Duration{0, 30 * time.Minute, time.Hour}, 0, false,
			3, "backstop: session active for 1h0m0s (limit 1h0m0s)"},
		{"a nanosecond short of the limit: working", time.Hour,
			[]time.Duration{0, 30 * time.Minute, time.Hour - time.Nanosecond}, 0, false, 0, ""},
		{"backstop 0: a five-hour session stays working", 0,
			[]time.Duration{0, time.Hour, 2 * time.Hour, 3 * time.Hour, 4 * time.Hour, 5 * time.Hour}, 0, false, 0, ""},
		// Counted from the spans' start times, the first call would be
		// 5h20m old at the third and the session stuck.
		{"spans five hours behind the engine's clock: 20 minutes seen, working", time.Hour,
			[]time.Duration{0, 10 * time.Minute, 20 * time.Minute}, 5 * time.Hour, false, 0, ""},
		// The lease rule comes after the backstop in verdictOrder: a lease
		// three hours long cannot stretch the limit.
		{"a repetition under a valid lease: the backstop comes first", time.Hour,
			[]time.Duration{0, time.Hour}, 0, true,
			2, "backstop: session active for 1h0m0s (limit 1h0m0s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustEngine(t, func(c *Config) { c.Backstop.MaxDuration = tt.backstop; c.IdleTimeout = 0 })
			b := newBuilder("s")
			var tr []Transition
			for i, at := range tt.at {
				var c *ToolCall
				if tt.same {
					c = b.call(at-tt.skew, "check", `{"job":1}`, `{"ok":false}`)
					c.Lease = Lease{Owner: "ci", Deadline: t0.Add(3 * time.Hour)}
				} else {
					c = b.call(at-tt.skew, "read_file", fmt.Sprintf(`{"p":"f%d.go"}`, i), fmt.Sprintf(`{"lines":%d}`, i))
				}
				tr = e.Observe(c, t0.Add(at), tr)
			}
			checkFirstTransition(t, tr, StateStuck, tt.stuckAt, ReasonBackstop, tt.explain)
			checkKillAt(t, tr, tt.stuckAt)
		})
	}
}

// TestBackstopOnTickKillsOnce: a session that makes no more calls is stuck
// by the timer once past the limit, and killed once.
func TestBackstopOnTickKillsOnce(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.Backstop.MaxDuration = time.Hour; c.IdleTimeout = 0 })
	b := newBuilder("s")
	var calls []*ToolCall
	for i := 0; i < 5; i++ {
		calls = append(calls, b.call(time.Duration(i)*time.Minute, "t", fmt.Sprintf(`{"i":%d}`, i), fmt.Sprintf("r%d", i)))
	}
	if tr := observeAll(e, calls); len(tr) != 0 {
		t.Fatalf("varied calls made transitions: %+v", tr)
	}
	tr := e.Tick(t0.Add(61*time.Minute), nil)
	if len(tr) != 1 || tr[0].To != StateStuck || tr[0].Reason != ReasonBackstop || !tr[0].Kill || tr[0].Trigger != TriggerTick {
		t.Fatalf("backstop tick: %+v", tr)
	}
	// First seen at the first call's end (100 ms), so 61 min - 100 ms,
	// rounded to the second.
	if want := "backstop: session active for 1h1m0s (limit 1h0m0s)"; tr[0].Explanation != want {
		t.Fatalf("explanation %q, want %q", tr[0].Explanation, want)
	}
	if tr := e.Tick(t0.Add(62*time.Minute), nil); len(tr) != 0 {
		t.Fatalf("backstop fired twice: %+v", tr)
	}
}

// TestBackstopConfigNamesItsKey: backstop is checked under its own key.
func TestBackstopConfigNamesItsKey(t *testing.T) {
	runConfigCases(t, []configCase{
		{"negative backstop", func(c *Config) { c.Backstop.MaxDuration = -time.Second }, "backstop.max_duration must not be negative (0 disables it), got -1s"},
		{"backstop 0 disables", func(c *Config) { c.Backstop.MaxDuration = 0 }, ""},
	})
}
