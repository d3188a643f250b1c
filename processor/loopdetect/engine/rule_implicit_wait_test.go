package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Results a polled CI run gives.
const (
	ciPending = `{"conclusion":"","status":"in_progress"}`
	ciSuccess = `{"conclusion":"success","status":"completed"}`
	ciFailure = `{"conclusion":"failure","status":"completed"}`
	ciPoll    = "sleep 30 && gh run view 4242 --json status,conclusion"
	ciReread  = "gh run view 4242 --json status,conclusion"
)

// step is one call (or, with tick, a timer) of a scripted session.
type step struct {
	at             time.Duration
	tool, line     string // a shell tool's command line, or a status tool's job id
	result         string
	failed, isTick bool
	repeat         int // the call this many times, every 30 s
}

// pollSteps expands steps into calls read as the extractor reads them: the
// WaitReader sees the arguments and the result.
func runSteps(t *testing.T, e *Engine, steps []step) []Transition {
	t.Helper()
	b := newBuilder("s")
	r := NewWaitReader(e.cfg.ImplicitWait)
	var out []Transition
	for _, st := range steps {
		if st.isTick {
			out = e.Tick(t0.Add(st.at), out)
			continue
		}
		for i := 0; i < max(st.repeat, 1); i++ {
			at := st.at + time.Duration(i)*30*time.Second
			tool := st.tool
			if tool == "" {
				tool = "Bash"
			}
			var args []byte
			if tool == "Bash" {
				args, _ = json.Marshal(map[string]string{"command": st.line, "description": "Check the CI run"})
			} else {
				args, _ = json.Marshal(map[string]any{"task_id": st.line, "block": true, "timeout": 30000})
			}
			c := b.call(at, tool, string(args), st.result)
			if st.failed {
				c.Failed, c.ErrorClass = true, "error"
			}
			c.Wait = readPoll(r, b.n, tool, string(args), true, st.result, st.result != "", st.failed)
			out = e.Observe(c, c.End, out)
		}
	}
	return out
}

// brief is a transition as the table states it: "to/reason@call", with
// "!kill" when it kills.
func brief(tr []Transition) []string {
	var s []string
	for _, x := range tr {
		b := fmt.Sprintf("%s/%s@%d", x.To, x.Reason, x.CallIndex)
		if x.Kill {
			b += "!kill"
		}
		s = append(s, b)
	}
	return s
}

// TestImplicitLease: a poll that itself waits, on a job its result reports
// pending, is waiting; the same polls without the wait, with a done or an
// unrecognised result, or past the lease's bounds are read as before.
//
//nolint:funlen // one table of cases, read top to bottom
func TestImplicitLease(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mod   func(*Config)
		steps []step
		want  []string
	}{
		{
			name:  "CI poll with a sleep until success: waiting, then working",
			steps: []step{{line: ciPoll, result: ciPending, repeat: 6}, {at: 180 * time.Second, line: ciPoll, result: ciSuccess}},
			want:  []string{"waiting/implicit_lease@2", "working/progress@7"},
		},
		{
			name:  "CI poll that flips to failure: working",
			steps: []step{{line: ciPoll, result: ciPending, repeat: 3}, {at: 90 * time.Second, line: ciPoll, result: ciFailure}},
			want:  []string{"waiting/implicit_lease@2", "working/progress@4"},
		},
		{
			name: "the agent leaves a running wait for other work: working",
			steps: []step{
				{line: ciPoll, result: ciPending, repeat: 6},
				{at: 200 * time.Second, line: "gh run view 4242 --log", result: "build\tstep 3\tcompiling"},
				{at: 210 * time.Second, line: "git log --oneline -3", result: "a1b2c3 fix the build"},
				{at: 220 * time.Second, line: "git status --short", result: " M main.go"},
			},
			want: []string{"waiting/implicit_lease@2", "working/no_loop@7"},
		},
		{
			name: "after the wait ends in success the polls are no loop",
			steps: []step{
				{line: ciPoll, result: ciPending, repeat: 6},
				{at: 180 * time.Second, line: ciPoll, result: ciSuccess},
				{at: 200 * time.Second, line: "gh pr merge 12 --squash", result: "merged"},
				{at: 210 * time.Second, line: "git pull", result: "Already up to date."},
			},
			want: []string{"waiting/implicit_lease@2", "working/progress@7"},
		},
		{
			name:  "the same polls without the sleep: stuck at the 2nd, killed at the 5th",
			steps: []step{{line: ciReread, result: ciPending, repeat: 6}},
			want:  []string{"stuck/unchanged_result@2", "stuck/frequent_identical@5!kill"},
		},
		{
			name:  "a sleep but a done result re-read: no lease",
			steps: []step{{line: ciPoll, result: ciSuccess, repeat: 3}},
			want:  []string{"stuck/terminal_reread@2"},
		},
		{
			name:  "a sleep but free text: no lease",
			steps: []step{{line: ciPoll, result: "still running, please wait", repeat: 2}},
			want:  []string{"stuck/unchanged_result@2"},
		},
		{
			name:  "a sleep but no result recorded: no lease",
			steps: []step{{line: ciPoll, repeat: 5}},
			want:  []string{"uncertain/missing_fingerprint@2", "stuck/frequent_identical@5!kill"},
		},
		{
			name:  "a failed poll: no lease",
			steps: []step{{line: ciPoll, result: ciPending, failed: true, repeat: 3}},
			want:  []string{"stuck/non_retryable_error@2"},
		},
		{
			name:  "runs out by poll count: stuck and killed at the first poll past it",
			mod:   func(c *Config) { c.ImplicitWait.MaxPolls = 4 },
			steps: []step{{line: ciPoll, result: ciPending, repeat: 6}},
			want:  []string{"waiting/implicit_lease@2", "stuck/frequent_identical@5!kill"},
		},
		{
			name:  "runs out by time at a poll",
			mod:   func(c *Config) { c.ImplicitWait.MaxDuration = 100 * time.Second },
			steps: []step{{line: ciPoll, result: ciPending, repeat: 5}},
			want:  []string{"waiting/implicit_lease@2", "stuck/frequent_identical@5!kill"},
		},
		{
			name:  "runs out by time on a tick",
			mod:   func(c *Config) { c.ImplicitWait.MaxDuration = 100 * time.Second },
			steps: []step{{line: ciPoll, result: ciPending, repeat: 3}, {at: 101 * time.Second, isTick: true}},
			want:  []string{"waiting/implicit_lease@2", "stuck/unchanged_result@3"},
		},
		{
			name:  "a run-out job is not covered again",
			mod:   func(c *Config) { c.ImplicitWait.MaxPolls = 2 },
			steps: []step{{line: ciPoll, result: ciPending, repeat: 3}, {at: 200 * time.Second, line: "sleep 60 && gh run view 4242 --json status,conclusion", result: ciPending, repeat: 2}},
			want:  []string{"waiting/implicit_lease@2", "stuck/unchanged_result@3"},
		},
		{
			name: "a re-read without the sleep between polls is not covered",
			steps: []step{
				{line: ciPoll, result: ciPending, repeat: 2},
				{at: 60 * time.Second, line: ciReread, result: ciPending},
				{at: 61 * time.Second, line: ciReread, result: ciPending},
			},
			// The first re-read is a new action; the second repeats it.
			want: []string{"waiting/implicit_lease@2", "working/no_loop@3", "stuck/unchanged_result@4"},
		},
		{
			name:  "implicit waits off",
			mod:   func(c *Config) { c.ImplicitWait.Enabled = false },
			steps: []step{{line: ciPoll, result: ciPending, repeat: 2}},
			want:  []string{"stuck/unchanged_result@2"},
		},
		{
			name: "a tool override turns the shell's polls off",
			mod: func(c *Config) {
				off := false
				c.ImplicitWait.Tools = map[string]ImplicitWaitOverride{"Bash": {Enabled: &off}}
			},
			steps: []step{{line: ciPoll, result: ciPending, repeat: 2}},
			want:  []string{"stuck/unchanged_result@2"},
		},
		{
			name:  "a tool override's poll count",
			mod:   func(c *Config) { c.ImplicitWait.Tools = map[string]ImplicitWaitOverride{"Bash": {MaxPolls: 2}} },
			steps: []step{{line: ciPoll, result: ciPending, repeat: 3}},
			want:  []string{"waiting/implicit_lease@2", "stuck/unchanged_result@3"},
		},
		{
			name: "a background job polled with its status tool until done",
			steps: []step{
				{tool: "TaskOutput", line: "bq1x9", result: "<retrieval_status>timeout</retrieval_status>\n<task_id>bq1x9</task_id>\n<status>running</status>", repeat: 4},
				{at: 120 * time.Second, tool: "TaskOutput", line: "bq1x9", result: "<retrieval_status>success</retrieval_status>\n<task_id>bq1x9</task_id>\n<status>completed</status>\n<exit_code>0</exit_code>"},
			},
			want: []string{"waiting/implicit_lease@2", "working/progress@5"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, tc.mod)
			got := brief(runSteps(t, e, tc.steps))
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("transitions %v, want %v", got, tc.want)
			}
		})
	}
}

// TestImplicitLeaseJobs: two jobs polled in turn are both waiting, a third
// at once is not, and once a lease ran out only max_renewals new ones start.
func TestImplicitLeaseJobs(t *testing.T) {
	poll := func(run int) string { return fmt.Sprintf("sleep 30 && gh run view %d --json status,conclusion", run) }
	t.Run("two runs in turn", func(t *testing.T) {
		e := mustEngine(t, nil)
		var steps []step
		for i := 0; i < 8; i++ {
			steps = append(steps, step{at: time.Duration(i) * 30 * time.Second, line: poll(1 + i%2), result: ciPending})
		}
		got := brief(runSteps(t, e, steps))
		if strings.Join(got, " ") != "waiting/implicit_lease@4" || e.Stats().LeasesRejected.Load() != 0 {
			t.Fatalf("transitions %v, %d leases rejected", got, e.Stats().LeasesRejected.Load())
		}
	})
	t.Run("three runs in turn", func(t *testing.T) {
		e := mustEngine(t, nil)
		var steps []step
		for i := 0; i < 6; i++ {
			steps = append(steps, step{at: time.Duration(i) * 30 * time.Second, line: poll(1 + i%3), result: ciPending})
		}
		got := brief(runSteps(t, e, steps))
		if strings.Join(got, " ") != "stuck/periodic_loop@6!kill" || e.Stats().LeasesRejected.Load() != 2 {
			t.Fatalf("transitions %v, %d leases rejected", got, e.Stats().LeasesRejected.Load())
		}
	})
	t.Run("renewals after a run-out", func(t *testing.T) {
		e := mustEngine(t, func(c *Config) {
			c.ImplicitWait.MaxPolls, c.ImplicitWait.MaxRenewals = 1, 1
			c.Kill.Enabled = false
		})
		var steps []step
		for run := 1; run <= 3; run++ {
			steps = append(steps, step{at: time.Duration(run) * time.Minute, line: poll(run), result: ciPending, repeat: 2})
		}
		runSteps(t, e, steps)
		// Run 1's 2nd poll ran its lease out; run 2's lease is the one
		// renewal, its 2nd poll past it again; run 3 gets none.
		if got := e.Stats().LeasesRejected.Load(); got != 4 {
			t.Fatalf("%d leases rejected, want 4", got)
		}
	})
}

// TestImplicitLeaseExplanations: what the events say of an implicit wait.
func TestImplicitLeaseExplanations(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.ImplicitWait.MaxPolls = 3 })
	tr := runSteps(t, e, []step{{line: ciPoll, result: ciPending, repeat: 4}})
	if len(tr) != 2 {
		t.Fatalf("transitions %v", brief(tr))
	}
	if want := `waiting: polling "gh run view", which reports its job pending (implicit lease: poll 2 of 3, until 2026-01-01T00:30:00Z)`; tr[0].Explanation != want {
		t.Fatalf("waiting explanation %q, want %q", tr[0].Explanation, want)
	}
	if want := `implicit wait on "gh run view" ran out (3 polls covered, 1m30s since its first poll); `; !strings.HasPrefix(tr[1].Explanation, want) {
		t.Fatalf("run-out explanation %q, want the prefix %q", tr[1].Explanation, want)
	}
	e = mustEngine(t, func(c *Config) { c.ImplicitWait.MaxDuration = time.Minute })
	tr = runSteps(t, e, []step{{line: ciPoll, result: ciPending, repeat: 2}, {at: 2 * time.Minute, isTick: true}})
	if len(tr) != 2 || tr[1].Trigger != TriggerTick {
		t.Fatalf("transitions %v", brief(tr))
	}
	if want := `implicit wait on "gh run view" expired (1m after its first poll, 2 polls); `; !strings.HasPrefix(tr[1].Explanation, want) {
		t.Fatalf("expiry explanation %q, want the prefix %q", tr[1].Explanation, want)
	}
}

// TestImplicitLeaseKeepsIdleSessionUntilJudged: a session waiting on an
// implicit lease is not forgotten before the tick that judges its expiry.
func TestImplicitLeaseKeepsIdleSessionUntilJudged(t *testing.T) {
	e := mustEngine(t, func(c *Config) { c.IdleTimeout = time.Minute; c.ImplicitWait.MaxDuration = time.Hour })
	runSteps(t, e, []step{{line: ciPoll, result: ciPending, repeat: 2}})
	e.Tick(t0.Add(30*time.Minute), nil)
	if st, _, ok := e.Session("s"); !ok || st != StateWaiting {
		t.Fatalf("a waiting session was forgotten before its implicit lease ran out (state %v, kept %v)", st, ok)
	}
	tr := e.Tick(t0.Add(61*time.Minute), nil)
	if len(tr) != 1 || tr[0].To != StateStuck {
		t.Fatalf("expiry after a long wait: %v", brief(tr))
	}
}

func TestImplicitWaitConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mod     func(*ImplicitWaitConfig)
		wantErr string
	}{
		{"defaults", func(*ImplicitWaitConfig) {}, ""},
		{"no duration", func(c *ImplicitWaitConfig) { c.MaxDuration = 0 }, "implicit_wait.max_duration"},
		{"no polls", func(c *ImplicitWaitConfig) { c.MaxPolls = 0 }, "implicit_wait.max_polls"},
		{"negative renewals", func(c *ImplicitWaitConfig) { c.MaxRenewals = -1 }, "implicit_wait.max_renewals"},
		{"command tool without a key", func(c *ImplicitWaitConfig) { c.CommandTools = []CommandTool{{Tool: "sh"}} }, "implicit_wait.command_tools[0]"},
		{"status tool without a key", func(c *ImplicitWaitConfig) { c.StatusTools = []StatusTool{{Tool: "jobs"}} }, "implicit_wait.status_tools[0]"},
		{"negative override", func(c *ImplicitWaitConfig) {
			c.Tools = map[string]ImplicitWaitOverride{"Bash": {MaxPolls: -1}}
		}, "implicit_wait.tools.Bash.max_polls"},
		{"off: nothing checked", func(c *ImplicitWaitConfig) { c.Enabled, c.MaxPolls = false, 0 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultImplicitWait()
			tc.mod(&c)
			err := c.check()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
}
