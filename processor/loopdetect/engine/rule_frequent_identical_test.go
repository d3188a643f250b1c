package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestFrequentIdenticalCountsACycleFromItsFirstCall: the first pass of a
// cycle (the first B of A-B-A-B) does not split the run of identical calls
// it belongs to, so an alternation without results is stuck and killed at
// its 9th call, as Gemini CLI flags it; a new action that never comes again
// (a fix-and-test edit) and a new result still end the run.
func TestFrequentIdenticalCountsACycleFromItsFirstCall(t *testing.T) {
	type step struct{ tool, args, result string }
	seq := func(n int, f func(i int) step) []step {
		var s []step
		for i := 0; i < n; i++ {
			s = append(s, f(i))
		}
		return s
	}
	a := step{"read_file", `{"p":"config.go"}`, ""}
	b := step{"grep", `{"q":"LoadConfig"}`, ""}
	c := step{"open_page", `{"u":"/a"}`, ""}
	tests := []struct {
		name       string
		steps      []step
		stuckAt    int64 // first stuck call, 0: never stuck
		reason     Reason
		killedAtIt bool
	}{
		{"A-B without results: stuck and killed at the 9th call", seq(12, func(i int) step { return [...]step{a, b}[i%2] }),
			9, ReasonFrequentIdentical, true},
		{"A-B without results after varied calls: the 9th call of the cycle", append(
			seq(4, func(i int) step { return step{"read_file", fmt.Sprintf(`{"p":"f%d.go"}`, i), ""} }),
			seq(12, func(i int) step { return [...]step{a, b}[i%2] })...),
			13, ReasonFrequentIdentical, true},
		{"A-B-C without results: five A never fit in ten calls, the cycle rule decides", seq(16, func(i int) step { return [...]step{a, b, c}[i%3] }),
			15, ReasonCycleWithoutResults, true},
		{"fix-and-test without results: a new edit never comes again", seq(16, func(i int) step {
			if i%2 == 0 {
				return step{"edit", fmt.Sprintf(`{"patch":"attempt %d"}`, i), ""}
			}
			return step{"run_tests", `{"t":"./..."}`, ""}
		}), 0, ReasonNone, false},
		{"A-B where B brings a new result each time", seq(16, func(i int) step {
			if i%2 == 0 {
				return step{"run_tests", `{"t":"./..."}`, `{"failed":1}`}
			}
			return step{"tail_log", `{"f":"job.log"}`, fmt.Sprintf(`{"lines":%d}`, i)}
		}), 0, ReasonNone, false},
		{"a new result then repeated: the run counts from the new result", append(
			[]step{a, {"status", `{"j":1}`, `{"s":"queued"}`}},
			seq(10, func(i int) step { return [...]step{a, {"status", `{"j":1}`, `{"s":"running"}`}}[i%2] })...),
			12, ReasonFrequentIdentical, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustEngine(t, nil)
			bl := newBuilder("s")
			var calls []*ToolCall
			for i, s := range tt.steps {
				calls = append(calls, bl.call(time.Duration(i)*time.Second, s.tool, s.args, s.result))
			}
			var stuck *Transition
			tr := observeAll(e, calls)
			for i := range tr {
				if tr[i].To == StateStuck {
					stuck = &tr[i]
					break
				}
			}
			switch {
			case tt.stuckAt == 0 && stuck != nil:
				t.Fatalf("stuck at call %d (%v), want never stuck", stuck.CallIndex, stuck.Reason)
			case tt.stuckAt == 0:
			case stuck == nil:
				t.Fatalf("never stuck, want stuck at call %d (%v)", tt.stuckAt, tt.reason)
			case stuck.CallIndex != tt.stuckAt || stuck.Reason != tt.reason || stuck.Kill != tt.killedAtIt:
				t.Fatalf("stuck at call %d (%v, kill %v), want call %d (%v, kill %v)", stuck.CallIndex, stuck.Reason, stuck.Kill, tt.stuckAt, tt.reason, tt.killedAtIt)
			}
		})
	}
}
