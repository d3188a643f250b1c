package engine

import (
	"encoding/binary"
	"fmt"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// callBuilder makes ToolCalls for one session with a fake clock.
type callBuilder struct {
	n    *canon.Normalizer
	seq  uint64
	sess string
}

func newBuilder(sess string) *callBuilder {
	return &callBuilder{n: canon.NewNormalizer(canon.DefaultNormalizerConfig()), sess: sess}
}

func (b *callBuilder) call(at time.Duration, tool, args, result string) *ToolCall {
	b.seq++
	c := &ToolCall{Session: b.sess, Tool: tool, Start: t0.Add(at), End: t0.Add(at + 100*time.Millisecond)}
	binary.BigEndian.PutUint64(c.SpanID[:], b.seq)
	sig, q := b.n.Signature(tool, args, args != "")
	c.Signature, c.Args = Digest(sig), argsQuality[q]
	if result != "" {
		r := b.n.Result(tool, result)
		c.Fingerprint, c.FingerprintSource, c.Terminal = Digest(r.Digest), FingerprintResult, r.Terminal
	}
	return c
}

// argsQuality is the engine's quality of a signature canon made, as the
// extractor maps it.
var argsQuality = [...]ArgsQuality{
	canon.ArgsJSON: ArgsJSON, canon.ArgsOpaque: ArgsOpaque, canon.ArgsOversized: ArgsOversized, canon.ArgsAbsent: ArgsAbsent,
}

func mustEngine(t *testing.T, mod func(*Config)) *Engine {
	t.Helper()
	cfg := DefaultConfig()
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestConfigValidation changes one setting at a time from the defaults and
// checks that the error names that setting, so a case cannot pass because
// another check failed.
func TestConfigValidation(t *testing.T) {
	runConfigCases(t, []configCase{
		{"defaults", func(*Config) {}, ""},
		{"window over history", func(c *Config) { c.FrequentIdentical.Window = 20 }, "frequent_identical"},
		{"threshold over window", func(c *Config) { c.FrequentIdentical.Threshold = 11 }, "frequent_identical"},
		{"frequent disabled", func(c *Config) { c.FrequentIdentical.Threshold = 0 }, ""},
		{"no sessions", func(c *Config) { c.MaxSessions = 0 }, "max_sessions"},
		{"hysteresis zero", func(c *Config) { c.Hysteresis.Evaluations = 0 }, "hysteresis.evaluations must be ≥ 1, got 0"},
		{"negative idle timeout", func(c *Config) { c.IdleTimeout = -time.Minute }, "idle_timeout must not be negative"},
		{"negative lease renewals", func(c *Config) { c.Lease.MaxRenewals = -1 }, "lease.max_renewals"},
		{"unknown kill reason", func(c *Config) { c.Kill.Reasons = []Reason{ReasonBackstop, Reason(200)} }, `kill.reasons: unknown reason "reason(200)"`},
		{"negative kill after calls", func(c *Config) { c.Kill.AfterLoopCalls = -1 }, "kill.after_loop_calls"},
		{"negative kill tokens", func(c *Config) { c.Kill.MaxLoopTokens = -1 }, "kill.max_loop_tokens"},
	})
}

// configCase changes one setting (mod) from the defaults; wantErr is what
// Validate's error must name, and it alone ("" = valid). The rules' files
// list their own settings' cases.
type configCase struct {
	name    string
	mod     func(*Config)
	wantErr string
}

// runConfigCases runs each case as a subtest: an error must name the
// setting and be the only one, so a case cannot pass because another
// check failed.
func runConfigCases(t *testing.T, cases []configCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.mod(&cfg)
			err := cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error naming %q", err, tt.wantErr)
			case tt.wantErr != "" && strings.Count(err.Error(), "\n") > 0:
				t.Fatalf("Validate() = %v, want only the %q error", err, tt.wantErr)
			}
		})
	}
}

// TestReasonTextRoundTrips: kill.reasons is read and written as reason
// codes, and an unknown code is an error naming it.
func TestReasonTextRoundTrips(t *testing.T) {
	for _, d := range ReasonDocs() {
		text, err := d.Reason.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var r Reason
		if err := r.UnmarshalText(text); err != nil || r != d.Reason {
			t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", text, r, err, d.Reason)
		}
	}
	var r Reason
	if err := r.UnmarshalText([]byte("bored")); err == nil || !strings.Contains(err.Error(), `unknown reason "bored"`) {
		t.Fatalf("UnmarshalText(bored) = %v, want an error naming it", err)
	}
}

func observeAll(e *Engine, calls []*ToolCall) []Transition {
	var out []Transition
	for _, c := range calls {
		out = e.Observe(c, c.End, out)
	}
	return out
}

// nCalls is f(0)..f(n-1): a session's calls, one a step.
func nCalls(n int, f func(i int) *ToolCall) []*ToolCall {
	calls := make([]*ToolCall, n)
	for i := range calls {
		calls[i] = f(i)
	}
	return calls
}

// failing marks c failed with an error class and text.
func failing(c *ToolCall, class, text string) *ToolCall {
	c.Failed, c.ErrorClass, c.ErrorText = true, class, text
	return c
}

// firstTransitionTo is the first of tr that enters state to, nil when none does.
func firstTransitionTo(tr []Transition, to State) *Transition {
	for i := range tr {
		if tr[i].To == to && tr[i].From != to {
			return &tr[i]
		}
	}
	return nil
}

// checkFirstTransition fails t unless the first transition of tr into
// state to is at call at with reason and, unless explain is "", that
// explanation (at 0: no transition enters to).
func checkFirstTransition(t *testing.T, tr []Transition, to State, at int64, reason Reason, explain string) {
	t.Helper()
	got := firstTransitionTo(tr, to)
	switch {
	case at == 0 && got != nil:
		t.Fatalf("%v at call %d (%v), want never %v", to, got.CallIndex, got.Reason, to)
	case at == 0:
	case got == nil:
		t.Fatalf("never %v, want %v at call %d (%v); transitions %+v", to, to, at, reason, tr)
	case got.CallIndex != at || got.Reason != reason:
		t.Fatalf("%v at call %d (%v), want call %d (%v)", to, got.CallIndex, got.Reason, at, reason)
	case explain != "" && got.Explanation != explain:
		t.Fatalf("explanation %q, want %q", got.Explanation, explain)
	}
}

// checkKillAt fails t unless the first kill of tr is at call at (0: none).
func checkKillAt(t *testing.T, tr []Transition, at int64) {
	t.Helper()
	for _, x := range tr {
		if x.Kill {
			if x.CallIndex != at {
				t.Fatalf("killed at call %d (%v), want %d", x.CallIndex, x.Reason, at)
			}
			return
		}
	}
	if at != 0 {
		t.Fatalf("never killed, want a kill at call %d", at)
	}
}

// stuckCase is a row of a rule's table: a session's calls under one
// setting changed from the defaults, and when it is first stuck.
type stuckCase struct {
	name    string
	mod     func(*Config) // nil: the defaults
	calls   func(b *callBuilder) []*ToolCall
	stuckAt int64 // the first stuck call, 0: never stuck
	reason  Reason
	killAt  int64  // the first kill, 0: none
	explain string // the stuck transition's explanation, "" unchecked
}

// runStuckCases feeds each case's calls to a new engine, as one session on
// the fake clock, and checks its first stuck transition and first kill.
func runStuckCases(t *testing.T, cases []stuckCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			tr := observeAll(mustEngine(t, tt.mod), tt.calls(newBuilder("s")))
			checkFirstTransition(t, tr, StateStuck, tt.stuckAt, tt.reason, tt.explain)
			checkKillAt(t, tr, tt.killAt)
		})
	}
}

func TestLRUEvictionIsCounted(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.MaxSessions = 16 })
	for i := 0; i < 100; i++ {
		b := newBuilder(fmt.Sprintf("s%d", i))
		observeAll(e, []*ToolCall{b.call(0, "t", `{}`, "r")})
	}
	if got := e.Stats().Sessions.Load(); got > 16 {
		t.Fatalf("tracked %d sessions, cap 16", got)
	}
	if e.Stats().Evicted.Load() == 0 {
		t.Fatal("evictions not counted")
	}
}

func TestIdleExpiryOnTick(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.IdleTimeout = time.Minute })
	b := newBuilder("s")
	observeAll(e, []*ToolCall{b.call(0, "t", `{}`, "r")})
	e.Tick(t0.Add(30*time.Second), nil)
	if _, _, ok := e.Session("s"); !ok {
		t.Fatal("session expired early")
	}
	e.Tick(t0.Add(2*time.Minute), nil)
	if _, _, ok := e.Session("s"); ok || e.Stats().Expired.Load() != 1 {
		t.Fatal("idle session not expired and counted")
	}
}

func TestNestedToolSpansAreOneAction(t *testing.T) {
	e := mustEngine(t, nil)
	b := newBuilder("s")
	// MCP: execute_tool (outer) wraps tools/call (inner); the inner ends and
	// arrives first. Both carry the same call id.
	inner := b.call(0, "search", `{"q":1}`, "r")
	outer := b.call(0, "search", `{"q":1}`, "r")
	inner.ParentSpanID = outer.SpanID
	inner.CallID, outer.CallID = "call_1", "call_1"
	observeAll(e, []*ToolCall{inner, outer})
	if d := e.Stats().Duplicates.Load(); d != 1 {
		t.Fatalf("duplicates = %d, want 1", d)
	}
	// Without a call id, the same tool name nested in its parent is one action.
	in2 := b.call(time.Second, "fetch", `{"u":1}`, "x")
	out2 := b.call(time.Second, "fetch", `{"u":1}`, "x")
	in2.ParentSpanID = out2.SpanID
	if tr := observeAll(e, []*ToolCall{in2, out2}); len(tr) != 0 {
		t.Fatalf("a nested twin counted as a repetition: %+v", tr)
	}
}

func TestDryRunMarksInsteadOfKilling(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.Kill.DryRun = true })
	b := newBuilder("s")
	var calls []*ToolCall
	for i := 0; i < 6; i++ {
		calls = append(calls, b.call(time.Duration(i)*time.Second, "bash", `{"c":"ls"}`, "a"))
	}
	var dry int
	for _, tr := range observeAll(e, calls) {
		if tr.Kill {
			t.Fatalf("dry run killed: %+v", tr)
		}
		if tr.DryRun {
			dry++
		}
	}
	if dry != 1 {
		t.Fatalf("dry-run marks = %d, want 1", dry)
	}
}

func TestKillDisabled(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.Kill.Enabled = false })
	b := newBuilder("s")
	var calls []*ToolCall
	for i := 0; i < 10; i++ {
		calls = append(calls, b.call(time.Duration(i)*time.Second, "bash", `{"c":"ls"}`, "a"))
	}
	tr := observeAll(e, calls)
	if len(tr) != 1 || tr[0].To != StateStuck || tr[0].Kill || tr[0].DryRun {
		t.Fatalf("kill disabled: %+v", tr)
	}
}

func TestEventIDsAreStablePerSessionAndSequence(t *testing.T) {
	run := func() []Transition {
		e := mustEngine(t, nil)
		b := newBuilder("sess-1")
		var calls []*ToolCall
		for i := 0; i < 6; i++ {
			calls = append(calls, b.call(time.Duration(i)*time.Second, "bash", `{"c":"ls"}`, "a"))
		}
		return observeAll(e, calls)
	}
	a, b := run(), run()
	if len(a) != 2 || a[0].ID != b[0].ID || a[1].ID != b[1].ID || a[0].ID == a[1].ID || a[1].Seq != 2 {
		t.Fatalf("ids: %v %v", a, b)
	}
}

func TestConcurrentSessions(t *testing.T) {
	e := mustEngine(t, nil)
	var wg sync.WaitGroup
	kills := make([]int, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for s := 0; s < 50; s++ {
				b := newBuilder(fmt.Sprintf("g%d-s%d", g, s))
				var out []Transition
				for i := 0; i < 7; i++ {
					c := b.call(time.Duration(i)*time.Second, "bash", `{"c":"ls"}`, "same")
					out = e.Observe(c, c.End, out[:0])
					for _, tr := range out {
						if tr.Kill {
							kills[g]++
						}
					}
				}
			}
		}(g)
	}
	wg.Wait()
	for g, k := range kills {
		if k != 50 {
			t.Fatalf("goroutine %d: %d kills, want one per session (50)", g, k)
		}
	}
}

func TestHistoryStaysBoundedOverALongLoop(t *testing.T) {
	e := mustEngine(t, nil)
	b := newBuilder("s")
	var kills int
	var out []Transition
	for i := 0; i < 100_000; i++ {
		c := b.call(time.Duration(i)*time.Second, "bash", `{"c":"ls"}`, "same")
		out = e.Observe(c, c.End, out[:0])
		for _, tr := range out {
			if tr.Kill {
				kills++
			}
		}
	}
	for _, s := range e.sessions() {
		if len(s.hist) > e.cfg.HistorySize || cap(s.hist) > e.cfg.HistorySize {
			t.Fatalf("history grew to %d (cap %d)", len(s.hist), cap(s.hist))
		}
		if s.total != 100_000 {
			t.Fatalf("counted %d calls", s.total)
		}
	}
	if kills != 1 {
		t.Fatalf("kills = %d over one loop, want 1", kills)
	}
}

// TestNestedTwinKeepsTheRicherEvidence: an MCP tools/call span recorded
// without content ends (and arrives) before the agent's execute_tool span
// that wraps it with arguments and result; the action keeps the latter.
func TestNestedTwinKeepsTheRicherEvidence(t *testing.T) {
	e := mustEngine(t, nil)
	b := newBuilder("s")
	var calls []*ToolCall
	for i := 0; i < 2; i++ {
		at := time.Duration(i) * time.Second
		inner := b.call(at, "search", "", "")
		outer := b.call(at, "search", `{"q":"x"}`, `{"hits":1}`)
		inner.ParentSpanID = outer.SpanID
		calls = append(calls, inner, outer)
	}
	tr := observeAll(e, calls)
	if len(tr) != 1 || tr[0].To != StateStuck || tr[0].Reason != ReasonUnchangedResult || tr[0].LowConfidence || tr[0].CallIndex != 2 {
		t.Fatalf("want one high-confidence stuck at call 2, got %+v", tr)
	}
	if got := e.Stats().Duplicates.Load(); got != 2 {
		t.Fatalf("duplicates = %d, want 2", got)
	}
}

func stuckOrKilled(tr []Transition) (stuck, killed bool) {
	for _, t := range tr {
		stuck = stuck || t.To == StateStuck
		killed = killed || t.Kill
	}
	return stuck, killed
}

// TestHealthyShapesAreNotKilled pins the second reading's false-kill
// findings: each sequence is healthy and must never be killed.
func TestHealthyShapesAreNotKilled(t *testing.T) {
	tests := []struct {
		name      string
		calls     func(b *callBuilder) []*ToolCall
		wantStuck bool
	}{
		{"fix-and-test: a new edit before each run of the same failing test", func(b *callBuilder) []*ToolCall {
			var cs []*ToolCall
			for i := 0; i < 12; i++ {
				at := time.Duration(2*i) * time.Second
				cs = append(cs,
					b.call(at, "edit", fmt.Sprintf(`{"p":"main.go","patch":"attempt %d"}`, i), `{"ok":true}`),
					b.call(at+time.Second, "run_tests", `{"t":"./..."}`, `{"failed":1,"first":"TestX"}`))
			}
			return cs
		}, false},
		{"fix-and-test: each edit's result differs too", func(b *callBuilder) []*ToolCall {
			var cs []*ToolCall
			for i := 0; i < 12; i++ {
				at := time.Duration(2*i) * time.Second
				cs = append(cs,
					b.call(at, "edit", fmt.Sprintf(`{"p":"main.go","patch":"attempt %d"}`, i), fmt.Sprintf(`{"lines_changed":%d}`, i+1)),
					b.call(at+time.Second, "run_tests", `{"t":"./..."}`, `{"failed":1,"first":"TestX"}`))
			}
			return cs
		}, false},
		{"fix-and-test without results: the test repeats between new edits", func(b *callBuilder) []*ToolCall {
			var cs []*ToolCall
			for i := 0; i < 12; i++ {
				at := time.Duration(2*i) * time.Second
				cs = append(cs,
					b.call(at, "edit", fmt.Sprintf(`{"p":"main.go","patch":"attempt %d"}`, i), ""),
					b.call(at+time.Second, "run_tests", `{"t":"./..."}`, ""))
			}
			return cs
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustEngine(t, nil)
			stuck, killed := stuckOrKilled(observeAll(e, tt.calls(newBuilder("s"))))
			if killed || stuck != tt.wantStuck {
				t.Fatalf("stuck=%v killed=%v, want stuck=%v and no kill", stuck, killed, tt.wantStuck)
			}
		})
	}
}

// TestLoopsAreNotHidden pins the second reading's missed-loop findings.
func TestLoopsAreNotHidden(t *testing.T) {
	tests := []struct {
		name  string
		calls func(b *callBuilder) []*ToolCall
	}{
		{"a call id reused per turn does not merge separate calls", func(b *callBuilder) []*ToolCall {
			var cs []*ToolCall
			for i := 0; i < 6; i++ {
				c := b.call(time.Duration(i)*time.Second, "bash", `{"c":"gh issue list"}`, "12\n15")
				c.CallID = "call_0"
				cs = append(cs, c)
			}
			return cs
		}},
		{"the same call returning two results in turn is still a loop", func(b *callBuilder) []*ToolCall {
			var cs []*ToolCall
			for i := 0; i < 10; i++ {
				cs = append(cs, b.call(time.Duration(i)*time.Second, "bash", `{"c":"gh issue list"}`, fmt.Sprintf("12\n%d", i%2)))
			}
			return cs
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustEngine(t, nil)
			if stuck, killed := stuckOrKilled(observeAll(e, tt.calls(newBuilder("s")))); !stuck || !killed {
				t.Fatalf("stuck=%v killed=%v, want a detected and killed loop", stuck, killed)
			}
		})
	}
}

func TestHostileStringsAreBounded(t *testing.T) {
	e := mustEngine(t, nil)
	long := strings.Repeat("x", 1<<20)
	b := newBuilder(long)
	c := b.call(0, long, `{}`, "r")
	c.Failed, c.ErrorClass, c.Agent = true, long, long
	c.Target = target.Process{ServiceName: long, ServiceInstanceID: long, HostName: long}
	c.Lease = Lease{Owner: long, Deadline: t0.Add(time.Hour), Reason: long}
	observeAll(e, []*ToolCall{c})
	for _, s := range e.sessions() {
		if len(s.keyString()) > maxKept || len(s.desc.agent) > maxKept || len(s.desc.target.ServiceName) > maxKept || len(s.extra.lease.owner) > maxKept || len(s.extra.errClass) > maxKept {
			t.Fatal("a session kept an unbounded string")
		}
	}
	for i := range e.shards {
		for _, n := range e.shards[i].names.names {
			if len(n) > maxToolName {
				t.Fatal("an interned name is unbounded")
			}
		}
	}
}

func TestRecordStaysSmall(t *testing.T) {
	if got := unsafe.Sizeof(record{}); got != 48 {
		t.Fatalf("record is %d bytes, the memory budget assumes 48", got)
	}
}

func TestEveryReasonIsDocumented(t *testing.T) {
	docs := ReasonDocs()
	seen := map[Reason]bool{}
	for _, d := range docs {
		seen[d.Reason] = true
	}
	for r := ReasonNone + 1; int(r) < len(reasonNames); r++ {
		if !seen[r] {
			t.Errorf("reason %s has no row in reasonDocs", r)
		}
	}
	if len(docs) != len(reasonNames)-1 {
		t.Errorf("%d documented reasons, want %d", len(docs), len(reasonNames)-1)
	}
}
