package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestUnsafeEvidenceIsUncertainAndWorkingIsTheRest: a loop-shaped
// sequence (periodic within max_period) whose evidence cannot support a
// verdict — a missing fingerprint, a name-only signature — is uncertain
// and never killed; what no rule claims is working, with reason progress
// when it is loop-shaped but its fingerprint moves, no_loop otherwise.
func TestUnsafeEvidenceIsUncertainAndWorkingIsTheRest(t *testing.T) {
	at := func(i int) time.Duration { return time.Duration(i) * time.Second }
	type step struct{ tool, args, result string }
	steps := func(n int, f func(i int) step) []step {
		s := make([]step, n)
		for i := range s {
			s[i] = f(i)
		}
		return s
	}
	ls := step{"bash", `{"c":"ls"}`, ""}
	a, b := step{"read_file", `{"p":"config.go"}`, ""}, step{"grep", `{"q":"Load"}`, ""}
	tests := []struct {
		name             string
		mod              func(*Config)
		steps            []step
		uncertainAt      int64 // first uncertain call, 0: never
		uncertainReason  Reason
		uncertainExplain string
		backToWorkingAt  int64 // first call back to working, 0: never
		workingReason    Reason
		workingExplain   string
		stuckAt          int64 // first stuck call (frequent_identical), 0: never
		endState         State
		endReason        Reason
	}{
		// Uncertain never kills: the 5th identical call is frequent_identical's.
		{"the same call without results: uncertain from the 2nd, stuck at the 5th", nil,
			steps(5, func(int) step { return ls }),
			2, ReasonMissingFingerprint, "loop-shaped (bash x2) but no progress fingerprint recorded: no safe verdict",
			0, ReasonNone, "", 5, StateStuck, ReasonFrequentIdentical},
		{"name-only calls: uncertain name_only, never stuck", nil,
			steps(8, func(int) step { return step{"web_search", "", ""} }),
			2, ReasonNameOnly, "loop-shaped (web_search x2) but arguments not recorded (name-only signature): no safe verdict",
			0, ReasonNone, "", 0, StateUncertain, ReasonNameOnly},
		{"A-B-A-B without results: uncertain at the 4th", nil,
			steps(4, func(i int) step { return [...]step{a, b}[i%2] }),
			4, ReasonMissingFingerprint, "loop-shaped (read_file → grep x2) but no progress fingerprint recorded: no safe verdict",
			0, ReasonNone, "", 0, StateUncertain, ReasonMissingFingerprint},
		{"a repetition where one call lacks the result: uncertain", nil,
			[]step{{"bash", `{"c":"ls"}`, "a.go"}, ls},
			2, ReasonMissingFingerprint, "", 0, ReasonNone, "", 0, StateUncertain, ReasonMissingFingerprint},
		// A name-only signature is too weak to show progress either way
		// (periodicStall counts it as a stall): moving results do not make
		// the repetition working.
		{"name-only calls with a new result each time are still uncertain", nil,
			steps(6, func(i int) step { return step{"web_search", "", fmt.Sprintf(`{"hits":%d}`, i)} }),
			2, ReasonNameOnly, "", 0, ReasonNone, "", 0, StateUncertain, ReasonNameOnly},
		{"a 4-cycle without results is not loop-shaped under max_period 3", nil,
			steps(8, func(i int) step { return step{"t", fmt.Sprintf(`{"k":%d}`, i%4), ""} }),
			0, ReasonNone, "", 0, ReasonNone, "", 0, StateWorking, ReasonNoLoop},
		{"max_period 1: A-B-A-B without results is not loop-shaped", func(c *Config) { c.PeriodicLoop.MaxPeriod = 1 },
			steps(8, func(i int) step { return [...]step{a, b}[i%2] }),
			0, ReasonNone, "", 0, ReasonNone, "", 0, StateWorking, ReasonNoLoop},
		{"a new action after an uncertain repetition: working, no loop", nil,
			[]step{ls, ls, {"read_file", `{"p":"a.go"}`, `{"lines":3}`}},
			2, ReasonMissingFingerprint, "", 3, ReasonNoLoop, "no loop in the last 3 calls", 0, StateWorking, ReasonNoLoop},
		// The 3rd call has a result but the 2nd has none: still missing.
		// The 4th's result differs from the 3rd's: progress.
		{"results that move after an uncertain start: working, progress", nil,
			[]step{ls, ls, {"bash", `{"c":"ls"}`, "a.go"}, {"bash", `{"c":"ls"}`, "a.go\nb.go"}},
			2, ReasonMissingFingerprint, "", 4, ReasonProgress, "progress: the fingerprint changed", 0, StateWorking, ReasonProgress},
		{"the same call with a new result each time: working, progress, no transition", nil,
			steps(6, func(i int) step { return step{"tail_log", `{"f":"job.log"}`, fmt.Sprintf(`{"lines":%d}`, i)} }),
			0, ReasonNone, "", 0, ReasonNone, "", 0, StateWorking, ReasonProgress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustEngine(t, tt.mod)
			bl := newBuilder("s")
			var calls []*ToolCall
			for i, s := range tt.steps {
				calls = append(calls, bl.call(at(i), s.tool, s.args, s.result))
			}
			tr := observeAll(e, calls)
			checkFirstTransition(t, tr, StateUncertain, tt.uncertainAt, tt.uncertainReason, tt.uncertainExplain)
			checkFirstTransition(t, tr, StateWorking, tt.backToWorkingAt, tt.workingReason, tt.workingExplain)
			checkFirstTransition(t, tr, StateStuck, tt.stuckAt, ReasonFrequentIdentical, "")
			for _, x := range tr {
				if x.To == StateUncertain && x.Kill {
					t.Fatalf("an uncertain verdict killed: %+v", x)
				}
			}
			if st, r, _ := e.Session("s"); st != tt.endState || r != tt.endReason {
				t.Fatalf("session ends %v (%v), want %v (%v)", st, r, tt.endState, tt.endReason)
			}
		})
	}
}
