//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopsupervisor/internal/webhook"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func call(session, tool, input string) hookQuery {
	return hookQuery{SessionID: session, ToolName: tool, ToolInput: json.RawMessage(input)}
}

func warnBody(session, nudge string, tools ...string) webhook.Body {
	return webhook.Body{Type: webhook.TypeWarn, ID: "ld_" + session + "_1", Nudge: nudge,
		Session: webhookbody.Session{Key: session}, ExpiresAt: t0.Add(time.Minute),
		Transition: webhookbody.Transition{Reason: "frequent_identical", CycleTools: tools}}
}

func killMsg(session string) webhook.Message {
	b := warnBody(session, "")
	b.Type, b.ID = webhook.TypeKill, "ld_"+session+"_1"
	return webhook.Message{WebhookID: b.ID + ".kill", Body: b}
}

// step is one event in a session's life as the hook book sees it.
type step struct {
	warn   bool   // a verified warn for the session arrives
	kill   bool   // a verified kill arrives
	held   bool   // want: the kill was held
	call   string // a Bash call with this command
	block  bool   // want: the call is blocked
	killed bool   // want: the call carried a held kill out
}

func TestHookBookBlocksOnlyRepeatsOfAWarnedSession(t *testing.T) {
	const nudge = "You called Bash with the same arguments 5 times; try a different approach."
	tests := []struct {
		name     string
		patience int
		steps    []step
	}{
		{"a session with no verdict is never blocked", 2, []step{
			{call: "gh issue list"}, {call: "gh issue list"}, {call: "gh issue list"}, {call: "gh issue list"},
		}},
		{"after a warn the repeated call is blocked, a new one is not", 2, []step{
			{call: "gh issue list"}, {call: "gh issue list"}, {warn: true},
			{call: "gh issue list", block: true}, {call: "gh auth status"}, {call: "gh issue list", block: true},
		}},
		{"three calls that are not repeats end the block", 2, []step{
			{call: "ls"}, {call: "ls"}, {warn: true},
			{call: "cat a"}, {call: "cat b"}, {call: "cat c"}, {call: "ls"},
		}},
		{"a held kill is withdrawn when the model changes course", 2, []step{
			{call: "ls"}, {call: "ls"}, {warn: true}, {kill: true, held: true},
			{call: "ls", block: true}, {call: "cat README.md"}, {call: "ls", block: true}, {call: "ls", block: true}, {call: "ls", block: true},
		}},
		{"a held kill is carried out when the model ignores the nudge", 2, []step{
			{call: "ls"}, {call: "ls"}, {warn: true}, {kill: true, held: true},
			{call: "ls", block: true}, {call: "ls", block: true}, {call: "ls", block: true, killed: true},
		}},
		{"patience 0 never holds a kill", 0, []step{
			{call: "ls"}, {warn: true}, {kill: true, held: false},
		}},
		{"a kill without a warn is not held", 2, []step{
			{call: "ls"}, {call: "ls"}, {kill: true, held: false},
		}},
		{"a kill for a session the hook never asked about is not held", 2, []step{
			{warn: true}, {kill: true, held: false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var executed []string
			b := newHookBook(tt.patience, func(m webhook.Message) { executed = append(executed, m.Body.ID) }, func(string, ...any) {})
			now := t0
			for i, st := range tt.steps {
				now = now.Add(100 * time.Millisecond)
				switch {
				case st.warn:
					b.warn("s1", warnBody("s1", nudge, "Bash"), now)
				case st.kill:
					assert.Equal(t, st.held, b.hold(killMsg("s1"), now), "step %d: held", i)
				default:
					before := len(executed)
					a := b.decide(call("s1", "Bash", fmt.Sprintf(`{"command": %q}`, st.call)), now)
					assert.Equal(t, st.block, a.Decision == decisionBlock, "step %d (%s): blocked", i, st.call)
					if st.block {
						assert.Contains(t, a.Reason, nudge)
					}
					assert.Equal(t, st.killed, len(executed) > before, "step %d: kill carried out", i)
				}
			}
		})
	}
}

func TestHookBookKeepsSessionsApart(t *testing.T) {
	b := newHookBook(2, func(webhook.Message) { t.Fatal("no kill") }, func(string, ...any) {})
	for _, s := range []string{"a", "b"} {
		b.decide(call(s, "Read", `{"file_path":"x"}`), t0)
	}
	b.warn("a", warnBody("a", "stop"), t0)
	assert.Equal(t, decisionBlock, b.decide(call("a", "Read", `{"file_path":"x"}`), t0).Decision)
	assert.Equal(t, decisionAllow, b.decide(call("b", "Read", `{"file_path":"x"}`), t0).Decision, "another session's warn blocks nothing here")
}

func TestHookBookOnlyBlocksTheLoopsTools(t *testing.T) {
	b := newHookBook(2, func(webhook.Message) {}, func(string, ...any) {})
	b.decide(call("s", "Read", `{"file_path":"x"}`), t0)
	b.decide(call("s", "Bash", `{"command":"make"}`), t0)
	b.warn("s", warnBody("s", "stop", "Bash"), t0)
	assert.Equal(t, decisionAllow, b.decide(call("s", "Read", `{"file_path":"x"}`), t0).Decision, "Read is not in the loop")
	assert.Equal(t, decisionBlock, b.decide(call("s", "Bash", `{"command":"make"}`), t0).Decision)
}

func TestHookBookSameInputInAnotherLayoutIsARepeat(t *testing.T) {
	b := newHookBook(2, func(webhook.Message) {}, func(string, ...any) {})
	b.decide(call("s", "Bash", `{"command":"ls"}`), t0)
	b.warn("s", warnBody("s", ""), t0)
	assert.Equal(t, decisionBlock, b.decide(call("s", "Bash", "{ \"command\" : \"ls\" }"), t0).Decision)
}

func TestHookBookIsBounded(t *testing.T) {
	b := newHookBook(2, func(webhook.Message) {}, func(string, ...any) {})
	for i := range 3 * hookMaxSessions {
		b.decide(call(fmt.Sprint("s", i), "Bash", `{}`), t0.Add(time.Duration(i)*time.Second))
	}
	assert.Len(t, b.sessions, hookMaxSessions)
	_, newest := b.sessions[fmt.Sprint("s", 3*hookMaxSessions-1)]
	assert.True(t, newest, "the newest session is kept, the oldest forgotten")
}

func TestHookBookDropsAnExpiredHeldKill(t *testing.T) {
	var executed int
	b := newHookBook(1, func(webhook.Message) { executed++ }, func(string, ...any) {})
	b.decide(call("s", "Bash", `{}`), t0)
	b.warn("s", warnBody("s", ""), t0)
	require.True(t, b.hold(killMsg("s"), t0))
	late := t0.Add(2 * time.Minute) // past expires_at
	for range 3 {
		assert.Equal(t, decisionBlock, b.decide(call("s", "Bash", `{}`), late).Decision)
	}
	assert.Zero(t, executed, "a late kill is worse than none")
}

// hookServer serves a hook book over HTTP as the supervisor does.
func hookServer(t *testing.T, b *hookBook, token string) string {
	srv := httptest.NewServer(&hookHandler{token: []byte(token), book: b, now: func() time.Time { return t0 }})
	t.Cleanup(srv.Close)
	return srv.URL + hookPath
}

// claudeInput is the PreToolUse input Claude Code 2.1 writes to a hook's
// stdin (recorded from the real CLI; paths shortened).
func claudeInput(session, command string) string {
	return fmt.Sprintf(`{"session_id":%q,"transcript_path":"/home/u/.claude/projects/-w/%s.jsonl","cwd":"/w","prompt_id":"p1","permission_mode":"default","effort":{"level":"medium"},"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":%q,"description":"list issues"},"tool_use_id":"toolu_01"}`, session, session, command)
}

func runHookWith(t *testing.T, env map[string]string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	for _, k := range []string{envHookURL, envHookToken} {
		t.Setenv(k, env[k])
	}
	var out, errOut bytes.Buffer
	code := runHook(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestHookCommandBlocksInTheCLIsFormat(t *testing.T) {
	b := newHookBook(2, func(webhook.Message) {}, func(string, ...any) {})
	env := map[string]string{envHookURL: hookServer(t, b, "tok"), envHookToken: "tok"}
	const sess = "0229bdc3-7acd-4c92-948e-6bbc4941a3f3"
	code, out, _ := runHookWith(t, env, claudeInput(sess, "gh issue list"))
	require.Zero(t, code)
	assert.Empty(t, out, "an allowed call prints nothing: the CLI's own permission rules still apply")
	b.warn(sess, warnBody(sess, "You ran gh issue list 5 times."), t0)

	code, out, _ = runHookWith(t, env, claudeInput(sess, "gh issue list"))
	require.Zero(t, code)
	var claude struct {
		HookSpecificOutput struct{ HookEventName, PermissionDecision, PermissionDecisionReason string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &claude), out)
	assert.Equal(t, "PreToolUse", claude.HookSpecificOutput.HookEventName)
	assert.Equal(t, "deny", claude.HookSpecificOutput.PermissionDecision)
	assert.Contains(t, claude.HookSpecificOutput.PermissionDecisionReason, "You ran gh issue list 5 times.")

	_, out, _ = runHookWith(t, env, claudeInput(sess, "gh issue list"), "--format", "gemini")
	var gemini map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &gemini), out)
	assert.Equal(t, "deny", gemini["decision"])
	assert.Contains(t, gemini["reason"], "You ran gh issue list 5 times.")
}

func TestHookCommandFailsOpen(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL + hookPath
	down.Close() // nothing listens there any more
	b := newHookBook(2, func(webhook.Message) {}, func(string, ...any) {})
	b.warn("s", warnBody("s", ""), t0)
	live := hookServer(t, b, "tok")
	tests := []struct {
		name  string
		env   map[string]string
		stdin string
	}{
		{"not under a supervisor", nil, claudeInput("s", "ls")},
		{"the supervisor is down", map[string]string{envHookURL: downURL, envHookToken: "tok"}, claudeInput("s", "ls")},
		{"a wrong token", map[string]string{envHookURL: live, envHookToken: "nope"}, claudeInput("s", "ls")},
		{"input that is not JSON", map[string]string{envHookURL: live, envHookToken: "tok"}, "not json"},
		{"input without a session", map[string]string{envHookURL: live, envHookToken: "tok"}, `{"tool_name":"Bash"}`},
		{"input over the size limit", map[string]string{envHookURL: live, envHookToken: "tok"}, strings.Repeat(" ", hookMaxBody+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := runHookWith(t, tt.env, tt.stdin)
			assert.Zero(t, code)
			assert.Empty(t, out, "allowed")
		})
	}
}

func TestHookEndpointRefusesStrangers(t *testing.T) {
	b := newHookBook(2, func(webhook.Message) {}, func(string, ...any) {})
	url := hookServer(t, b, "tok")
	for _, tc := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer wrong", 401}, {"tok", 401}, {"Bearer tok", 200}} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(claudeInput("s", "ls")))
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, tc.want, resp.StatusCode, "Authorization %q", tc.auth)
	}
}

// BenchmarkHookAnswer measures the supervisor's answer to the hook over
// loopback HTTP, as `loopsupervisor hook` asks it, in a session with 16
// recent calls and a warn; it reports the p99 of the round trips.
func BenchmarkHookAnswer(b *testing.B) {
	book := newHookBook(2, func(webhook.Message) {}, func(string, ...any) {})
	srv := httptest.NewServer(&hookHandler{token: []byte("tok"), book: book, now: time.Now})
	defer srv.Close()
	const sess = "0229bdc3-7acd-4c92-948e-6bbc4941a3f3"
	for i := range hookRecentCalls {
		book.decide(call(sess, "Bash", fmt.Sprintf(`{"command":"ls %d"}`, i)), time.Now())
	}
	book.warn(sess, warnBody(sess, "stop"), time.Now())
	in := []byte(claudeInput(sess, "cargo test"))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := askSupervisor(srv.URL+hookPath, "tok", in); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// TestSupervisorHoldsAKillWhileTheHookNudges runs the supervisor around an
// agent and plays the agent's hook: with a hook asking, a verified kill is
// held; the model ignoring the nudge has it carried out; the result line
// counts the blocked calls.
func TestSupervisorHoldsAKillWhileTheHookNudges(t *testing.T) {
	h := start(t, `printf '%s|%s|%s|%s\n' "$LOOPSUPERVISOR_HOOK_URL" "$LOOPSUPERVISOR_HOOK_TOKEN" "$OTEL_BLRP_SCHEDULE_DELAY" "$OTEL_BSP_SCHEDULE_DELAY" > "$1/hookenv"; echo "$$ 0" > "$1/pids"; exec sleep 300`, "--grace", "5s")
	h.pids()
	env := strings.Split(waitFile(t, h.dir+"/hookenv", 5*time.Second), "|")
	require.Len(t, env, 4)
	url, token := env[0], env[1]
	assert.Equal(t, []string{"200", "200"}, env[2:], "fast export by default")
	inst := "inst-" + t.Name()
	ask := func() hookDecision {
		a, err := askSupervisor(url, token, []byte(claudeInput("sess-9", "gh issue list")))
		require.NoError(t, err)
		return a.Decision
	}
	for range 3 {
		require.Equal(t, decisionAllow, ask(), "no verdict yet")
	}
	code, res := h.send(killSpec{id: "ld_h_1", instance: inst, typ: "loop.warn", action: "warn", nudge: "You ran gh issue list 5 times."})
	require.Equal(t, 200, code)
	require.Equal(t, "warned", res)
	code, res = h.send(killSpec{id: "ld_h_1", instance: inst, action: "kill"})
	require.Equal(t, 200, code)
	require.Equal(t, "held", res, "the hook gets its chance first")
	assert.True(t, alive(h.agentPID))
	for range 3 {
		require.Equal(t, decisionBlock, ask())
	}
	exit := <-h.done
	h.done <- exit
	assert.Equal(t, exitKilled, exit, "the model ignored the nudge: the held kill is carried out")
	var r result
	require.NoError(t, json.Unmarshal([]byte(waitFile(t, h.result, 5*time.Second)), &r))
	assert.Equal(t, 3, r.BlockedCalls)
	assert.Equal(t, "loop_kill", r.Kind)
}

func TestExportDefaultsLeaveTheUsersSettings(t *testing.T) {
	env := withExportDefaults([]string{"OTEL_BSP_SCHEDULE_DELAY=1000", "PATH=/bin"}, 200*time.Millisecond)
	assert.Equal(t, []string{"OTEL_BSP_SCHEDULE_DELAY=1000", "PATH=/bin", "OTEL_BLRP_SCHEDULE_DELAY=200", "OTEL_LOGS_EXPORT_INTERVAL=200"}, env)
	assert.Equal(t, []string{"PATH=/bin"}, withExportDefaults([]string{"PATH=/bin"}, 0), "0 keeps the SDK's defaults")
}
