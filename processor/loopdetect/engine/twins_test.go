package engine

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestTwinSpansMergeWhateverTheirDuration: a span processor registered on
// two tracer providers (ADK Go's own and the global one) sees every tool
// call twice, with the same call id. The second copy starts a little after
// the first and ends a little after it; the copies overlap however short
// the tool is, so they must merge into one action even below a millisecond.
func TestTwinSpansMergeWhateverTheirDuration(t *testing.T) {
	// lag is how much later the second provider's span starts and ends:
	// below a microsecond, as when one goroutine starts both in a row.
	const lag = 700 * time.Nanosecond
	tests := []struct {
		name string
		tool time.Duration // how long the tool itself runs
	}{
		{"instant tool", 0},
		{"sub-microsecond tool", 300 * time.Nanosecond},
		{"sub-millisecond tool", 400 * time.Microsecond},
		{"just under a millisecond", 999 * time.Microsecond},
		{"five millisecond tool", 5 * time.Millisecond},
		{"one minute tool", time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustEngine(t, nil)
			b := newBuilder("s")
			var calls []*ToolCall
			const real = 5
			for i := 0; i < real; i++ {
				at := time.Duration(i) * 2 * time.Minute
				first := b.call(at, "bash", `{"c":"gh issue list"}`, "12\n15")
				second := b.call(at, "bash", `{"c":"gh issue list"}`, "12\n15")
				first.End = first.Start.Add(lag + tt.tool)
				second.Start, second.End = first.Start.Add(lag), first.End.Add(lag)
				first.CallID = fmt.Sprintf("adk-%d", i)
				second.CallID = first.CallID
				calls = append(calls, first, second)
			}
			// killedAt lists the real calls (1-based) whose spans made a kill.
			var killedAt []int
			for i, c := range calls {
				for _, tr := range e.Observe(c, c.End, nil) {
					if tr.Kill {
						killedAt = append(killedAt, i/2+1)
					}
				}
			}
			if d := e.Stats().Duplicates.Load(); d != real {
				t.Errorf("duplicates = %d, want %d (one per twin)", d, real)
			}
			if len(killedAt) != 1 || killedAt[0] != real {
				t.Fatalf("killed at real calls %v, want once, at call %d", killedAt, real)
			}
		})
	}
}

// TestCallIDReuseJustAfterTheEndIsNotATwin: spans sharing a call id merge
// only when they overlap; finer time resolution must not merge a call
// that starts right after the previous one with the same id ended.
func TestCallIDReuseJustAfterTheEndIsNotATwin(t *testing.T) {
	e := mustEngine(t, nil)
	b := newBuilder("s")
	first := b.call(0, "bash", `{"c":"ls"}`, "a")
	second := b.call(0, "bash", `{"c":"ls"}`, "a")
	first.End = first.Start.Add(300 * time.Microsecond)
	second.Start = first.End.Add(10 * time.Microsecond)
	second.End = second.Start.Add(300 * time.Microsecond)
	first.CallID, second.CallID = "call_0", "call_0"
	observeAll(e, []*ToolCall{first, second})
	if d := e.Stats().Duplicates.Load(); d != 0 {
		t.Fatalf("duplicates = %d, want 0: the calls do not overlap", d)
	}
}

func TestMicrosRoundsUpAndSaturates(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want uint32
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Nanosecond, 1},
		{time.Microsecond, 1},
		{time.Microsecond + time.Nanosecond, 2},
		{5 * time.Millisecond, 5000},
		{time.Duration(math.MaxUint32) * time.Microsecond, math.MaxUint32},
		{time.Duration(math.MaxInt64), math.MaxUint32},
	}
	for _, tt := range tests {
		if got := micros(tt.d); got != tt.want {
			t.Errorf("micros(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

// TestTwinWithEqualEvidenceKeepsOneDescriptionWhateverTheOrder: a call
// described twice with equally rich evidence (a Claude Code span with the
// command, its log record with the tool input) keeps the same signature
// whichever description arrives first, so a loop's calls stay identical.
func TestTwinWithEqualEvidenceKeepsOneDescriptionWhateverTheOrder(t *testing.T) {
	kept := func(spanFirst bool) Digest {
		e := mustEngine(t, nil)
		b := newBuilder("cc")
		span := b.call(0, "Bash", `"npm test"`, "")
		span.CallID = "toolu_1"
		rec := b.call(0, "Bash", `{"command":"npm test","description":"run the tests"}`, "")
		rec.CallID = "toolu_1"
		first, second := rec, span
		if spanFirst {
			first, second = span, rec
		}
		e.Observe(first, first.End, nil)
		e.Observe(second, second.End, nil)
		s, _ := e.shards[e.shardOf("cc")].tab.find("cc", e.hashKey("cc"))
		if len(s.hist) != 1 {
			t.Fatalf("%d calls kept, want the twins merged into 1", len(s.hist))
		}
		return s.hist[0].sig
	}
	if a, b := kept(true), kept(false); a != b {
		t.Fatalf("signature depends on arrival order: %x vs %x", a, b)
	}
}
