//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

const (
	testSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherSecret = "whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24tdGVzdHM="
)

// The Standard Webhooks known-answer vector, in the supervisor's code.
func TestKnownAnswerVector(t *testing.T) {
	key, err := stdwebhook.ParseSecret(testSecret)
	require.NoError(t, err)
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		stdwebhook.Sign([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)))
}

// signals counts what the supervisor sent to process groups.
type signals struct {
	mu   sync.Mutex
	sent []string
}

var sigLog signals

func init() {
	orig := signalGroup
	signalGroup = func(pgid int, sig syscall.Signal) error {
		sigLog.mu.Lock()
		sigLog.sent = append(sigLog.sent, fmt.Sprintf("%d:%s", pgid, sig))
		sigLog.mu.Unlock()
		return orig(pgid, sig)
	}
}

func sentTo(pgid int) []string {
	sigLog.mu.Lock()
	defer sigLog.mu.Unlock()
	var out []string
	prefix := strconv.Itoa(pgid) + ":"
	for _, s := range sigLog.sent {
		if strings.HasPrefix(s, prefix) {
			out = append(out, strings.TrimPrefix(s, prefix))
		}
	}
	return out
}

// harness runs the supervisor in-process around a shell agent.
type harness struct {
	t        *testing.T
	dir      string
	url      string
	done     chan int
	agentPID int
	childPID int
	result   string
}

// waitFile polls for a file with content (the agent and the supervisor
// write them; there is no channel across processes).
func waitFile(t *testing.T, path string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within %s", path, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func start(t *testing.T, script string, extra ...string) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), done: make(chan int, 1)}
	secrets := filepath.Join(h.dir, "secrets")
	require.NoError(t, os.WriteFile(secrets, []byte(testSecret+"\n"), 0o600))
	h.result = filepath.Join(h.dir, "result.jsonl")
	args := append([]string{
		"--listen", "127.0.0.1:0", "--addr-file", filepath.Join(h.dir, "addr"),
		"--secret-file", secrets, "--result-file", h.result, "--instance-id-file", idFile(t, "inst-"+strings.ReplaceAll(t.Name(), "/", "-")),
	}, extra...)
	args = append(args, "--", "/bin/sh", "-c", script, "agent", h.dir)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { h.done <- run(ctx, args, io.Discard, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(15 * time.Second):
			t.Error("supervisor did not stop")
		}
	})
	h.url = "http://" + waitFile(t, filepath.Join(h.dir, "addr"), 5*time.Second) + "/kill"
	return h
}

// The agent: ignores SIGTERM, has a child of its own that ignores it too,
// records both pids and its environment.
const stubbornAgent = `trap "" TERM
sleep 300 &
printf '%s|%s|%s\n' "$OTEL_RESOURCE_ATTRIBUTES" "$OTEL_SERVICE_NAME" "$LOOPSUPERVISOR_SESSION_ID" > "$1/env"
echo "$$ $!" > "$1/pids"
wait
wait`

func (h *harness) pids() {
	f := strings.Fields(waitFile(h.t, filepath.Join(h.dir, "pids"), 5*time.Second))
	h.agentPID, _ = strconv.Atoi(f[0])
	h.childPID, _ = strconv.Atoi(f[1])
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	// A zombie is not alive.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err == nil {
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return false
		}
	}
	return true
}

type killSpec struct {
	id, instance string
	pid          int64
	typ          string
	expires      time.Time
	ts           time.Time
	secret       string
	action       string
	nudge        string
}

func (h *harness) send(k killSpec) (int, string) {
	h.t.Helper()
	if k.typ == "" {
		k.typ = "loop.kill"
	}
	if k.expires.IsZero() {
		k.expires = time.Now().Add(time.Minute)
	}
	if k.ts.IsZero() {
		k.ts = time.Now()
	}
	if k.secret == "" {
		k.secret = testSecret
	}
	fields := map[string]any{
		"schema_version": "1", "type": k.typ, "id": k.id, "sequence": 2,
		"decided_at": time.Now().UTC().Format(time.RFC3339Nano), "expires_at": k.expires.UTC().Format(time.RFC3339Nano),
		"session":    map[string]any{"key": "sess-9"},
		"target":     map[string]any{"service_instance_id": k.instance, "pid": k.pid},
		"transition": map[string]any{"from": "working", "to": "stuck", "reason": "frequent_identical", "explanation": "loop detected: same tool call x5 of last 10", "kill": true},
	}
	if k.action != "" {
		fields["action"] = k.action
	}
	if k.nudge != "" {
		fields["nudge"] = k.nudge
	}
	body, _ := json.Marshal(fields)
	key, err := stdwebhook.ParseSecret(k.secret)
	require.NoError(h.t, err)
	wid := k.id + "." + strings.TrimPrefix(k.typ, "loop.")
	req, _ := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(body))
	req.Header.Set(stdwebhook.HeaderID, wid)
	req.Header.Set(stdwebhook.HeaderTimestamp, strconv.FormatInt(k.ts.Unix(), 10))
	req.Header.Set(stdwebhook.HeaderSignature, stdwebhook.Sign([][]byte{key}, wid, k.ts.Unix(), body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	var r reply
	_ = json.NewDecoder(resp.Body).Decode(&r)
	return resp.StatusCode, r.Result
}

func TestKillStubbornAgent(t *testing.T) {
	const grace = time.Second
	hookOut := filepath.Join(t.TempDir(), "hook.out")
	h := start(t, stubbornAgent, "--grace", grace.String(), "--on-kill", `printf '%s\n' "$LOOPSUPERVISOR_RESULT" > '`+hookOut+`'`)
	h.pids()
	inst := "inst-" + t.Name()

	// The agent got the environment that makes kills matchable.
	env := strings.Split(waitFile(t, filepath.Join(h.dir, "env"), 5*time.Second), "|")
	assert.Contains(t, env[0], "service.instance.id="+inst)
	assert.Equal(t, os.Getenv("OTEL_SERVICE_NAME"), env[1], "without --service-name the agent's service name is left alone")
	assert.Equal(t, inst, env[2])

	// Forged signature: 401, nothing signalled.
	code, res := h.send(killSpec{id: "ld_k_1", instance: inst, secret: otherSecret})
	assert.Equal(t, 401, code)
	assert.Equal(t, "rejected", res)
	// Stale timestamp: 401.
	code, _ = h.send(killSpec{id: "ld_k_1", instance: inst, ts: time.Now().Add(-6 * time.Minute)})
	assert.Equal(t, 401, code)
	// Someone else's agent: not_running (never 410).
	code, res = h.send(killSpec{id: "ld_k_2", instance: "other-instance"})
	assert.Equal(t, 200, code)
	assert.Equal(t, "not_running", res)
	// Expired kill: not acted on.
	code, res = h.send(killSpec{id: "ld_k_3", instance: inst, expires: time.Now().Add(-time.Second)})
	assert.Equal(t, 200, code)
	assert.Equal(t, "expired", res)
	// A transition is only acknowledged.
	code, res = h.send(killSpec{id: "ld_k_4", instance: inst, typ: "loop.transition"})
	assert.Equal(t, 200, code)
	assert.Equal(t, "ignored", res)
	assert.Empty(t, sentTo(h.agentPID), "nothing may be signalled before a valid kill")
	assert.True(t, alive(h.agentPID) && alive(h.childPID))

	// The real kill.
	killedAt := time.Now()
	code, res = h.send(killSpec{id: "ld_k_5", instance: inst})
	require.Equal(t, 200, code)
	require.Equal(t, "killed", res)
	// Replay inside the window: already_handled, no further signal.
	code, res = h.send(killSpec{id: "ld_k_5", instance: inst})
	assert.Equal(t, 200, code)
	assert.Equal(t, "already_handled", res)

	var exit int
	select {
	case exit = <-h.done:
	case <-time.After(grace + 5*time.Second):
		t.Fatal("supervisor did not finish")
	}
	h.done <- exit // for Cleanup
	assert.Equal(t, exitKilled, exit)
	assert.False(t, alive(h.agentPID), "agent still alive")
	assert.False(t, alive(h.childPID), "agent's child still alive")
	assert.Less(t, time.Since(killedAt), grace+time.Second+500*time.Millisecond)
	assert.Equal(t, []string{"terminated", "killed"}, sentTo(h.agentPID), "exactly SIGTERM then SIGKILL to the group")

	lines := strings.Split(strings.TrimSpace(waitFile(t, h.result, time.Second)), "\n")
	require.Len(t, lines, 1)
	var r result
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &r))
	assert.Equal(t, "error", r.Status)
	assert.Equal(t, "loop_kill", r.Kind)
	assert.Equal(t, "frequent_identical", r.Reason)
	assert.Equal(t, "loop detected: same tool call x5 of last 10", r.Explanation)
	assert.Equal(t, inst, r.Session)
	assert.Equal(t, "ld_k_5", r.EventID)
	assert.Equal(t, "SIGKILL", r.Signal)
	assert.Equal(t, exitKilled, r.ExitCode)
	// The clean-up hook ran after the line was written, and got it.
	assert.Equal(t, lines[0], waitFile(t, hookOut, time.Second))
}

// The ladder's warn step: a verified warn runs --on-warn with the verdict
// in its environment and leaves the agent running; the kill that follows
// still stops it.
func TestWarnRunsOnWarnAndLeavesTheAgentRunning(t *testing.T) {
	warnOut := filepath.Join(t.TempDir(), "warn.out")
	h := start(t, `echo "$$ 0" > "$1/pids"; exec sleep 300`, "--grace", "5s",
		"--on-warn", `printf '%s|%s|%s\n' "$LOOPSUPERVISOR_NUDGE" "$LOOPSUPERVISOR_REASON" "$LOOPSUPERVISOR_VERDICT" > '`+warnOut+`'`)
	h.pids()
	inst := "inst-" + t.Name()
	const nudge = "You called read_file with the same arguments 5 times and got the same result; try a different approach."

	code, res := h.send(killSpec{id: "ld_w_1", instance: inst, typ: "loop.warn", action: "kill"})
	assert.Equal(t, 400, code, "a warn must say action warn")
	assert.Equal(t, "rejected", res)
	code, res = h.send(killSpec{id: "ld_w_2", instance: "someone-else", typ: "loop.warn", action: "warn", nudge: nudge})
	assert.Equal(t, 200, code)
	assert.Equal(t, "not_running", res)
	code, res = h.send(killSpec{id: "ld_w_3", instance: inst, typ: "loop.warn", action: "warn", nudge: nudge, expires: time.Now().Add(-time.Second)})
	assert.Equal(t, 200, code)
	assert.Equal(t, "expired", res)

	code, res = h.send(killSpec{id: "ld_w_4", instance: inst, typ: "loop.warn", action: "warn", nudge: nudge})
	require.Equal(t, 200, code)
	require.Equal(t, "warned", res)
	got := strings.SplitN(waitFile(t, warnOut, 5*time.Second), "|", 3)
	require.Len(t, got, 3)
	assert.Equal(t, nudge, got[0])
	assert.Equal(t, "frequent_identical", got[1])
	var verdict map[string]any
	require.NoError(t, json.Unmarshal([]byte(got[2]), &verdict), "the verdict is the verified JSON body")
	assert.Equal(t, "ld_w_4", verdict["id"])
	assert.Empty(t, sentTo(h.agentPID), "a warn signals nothing")
	assert.True(t, alive(h.agentPID))

	code, res = h.send(killSpec{id: "ld_w_5", instance: inst, action: "kill"})
	require.Equal(t, 200, code)
	require.Equal(t, "killed", res)
	exit := <-h.done
	h.done <- exit
	assert.Equal(t, exitKilled, exit)
}

// TestPIDOnlyKillIsRefused: a PID is no secret (anyone who can send spans
// can claim any process.pid), so a kill must name the unguessable instance
// id the supervisor gave its agent; a PID or host may only narrow it.
func TestPIDOnlyKillIsRefused(t *testing.T) {
	h := start(t, `echo "$$ 0" > "$1/pids"; exec sleep 300`, "--grace", "5s")
	h.pids()
	inst := "inst-" + t.Name()
	for i, k := range []killSpec{
		{id: "ld_p_1", pid: int64(h.agentPID)},
		{id: "ld_p_2", pid: int64(h.agentPID), instance: "inst-guessed"},
		{id: "ld_p_3", pid: int64(h.agentPID) + 1, instance: inst},
	} {
		code, res := h.send(k)
		assert.Equal(t, 200, code, "case %d", i)
		assert.Equal(t, "not_running", res, "case %d", i)
	}
	assert.Empty(t, sentTo(h.agentPID), "nothing may be signalled for a PID-only or mismatched target")
	assert.True(t, alive(h.agentPID))

	code, res := h.send(killSpec{id: "ld_p_4", pid: int64(h.agentPID), instance: inst})
	require.Equal(t, 200, code)
	require.Equal(t, "killed", res)
	exit := <-h.done
	h.done <- exit
	assert.Equal(t, exitKilled, exit)
	assert.False(t, alive(h.agentPID))
	var r result
	require.NoError(t, json.Unmarshal([]byte(waitFile(t, h.result, time.Second)), &r))
	assert.Equal(t, "SIGTERM", r.Signal, "sleep honours SIGTERM: no SIGKILL needed")
}

// An agent that relaunches itself (Gemini CLI) reports a child's PID: a
// kill naming any process of the agent's group matches, one naming a
// process outside it does not.
func TestKillNamingAProcessOfTheAgentsGroup(t *testing.T) {
	h := start(t, stubbornAgent, "--grace", "200ms")
	h.pids()
	inst := "inst-" + t.Name()
	code, res := h.send(killSpec{id: "ld_g_1", pid: int64(os.Getpid()), instance: inst})
	assert.Equal(t, 200, code)
	assert.Equal(t, "not_running", res, "the test process is not in the agent's group")
	assert.True(t, alive(h.agentPID))

	code, res = h.send(killSpec{id: "ld_g_2", pid: int64(h.childPID), instance: inst})
	require.Equal(t, 200, code)
	require.Equal(t, "killed", res)
	exit := <-h.done
	h.done <- exit
	assert.Equal(t, exitKilled, exit)
	assert.False(t, alive(h.agentPID))
	assert.False(t, alive(h.childPID))
}

func TestGeneratedInstanceIDsAreUnguessable(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := newInstanceID()
		require.GreaterOrEqual(t, len(id), minInstanceIDLen)
		require.False(t, seen[id], "instance ids repeat")
		seen[id] = true
	}
}

func TestShortInstanceIDIsRefused(t *testing.T) {
	secrets := filepath.Join(t.TempDir(), "secrets")
	require.NoError(t, os.WriteFile(secrets, []byte(testSecret+"\n"), 0o600))
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--secret-file", secrets, "--listen", "127.0.0.1:0", "--instance-id-file", idFile(t, "agent-1"), "--", "true"}, io.Discard, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), "--instance-id-file")
}

func TestAgentExitsByItself(t *testing.T) {
	h := start(t, `exit 3`)
	exit := <-h.done
	h.done <- exit
	assert.Equal(t, 3, exit)
	_, err := os.Stat(h.result)
	assert.True(t, os.IsNotExist(err), "no result line when the agent ended by itself")
}

func TestBackstop(t *testing.T) {
	h := start(t, `echo "$$ 0" > "$1/pids"; exec sleep 300`, "--backstop", "300ms", "--grace", "2s")
	h.pids()
	exit := <-h.done
	h.done <- exit
	assert.Equal(t, exitBackstop, exit)
	assert.False(t, alive(h.agentPID))
	var r result
	require.NoError(t, json.Unmarshal([]byte(waitFile(t, h.result, time.Second)), &r))
	assert.Equal(t, "error", r.Status)
	assert.Equal(t, "backstop", r.Kind)
	assert.Contains(t, r.Explanation, "backstop")
}

func TestUsageErrors(t *testing.T) {
	t.Setenv(envSecrets, "")
	assert.Equal(t, exitUsage, run(context.Background(), []string{"--listen", "127.0.0.1:0"}, io.Discard, io.Discard))
	assert.Equal(t, exitUsage, run(context.Background(), []string{"--listen", "127.0.0.1:0", "--", "true"}, io.Discard, io.Discard), "no secret")
	t.Setenv(envSecrets, testSecret)
	assert.Equal(t, exitUsage, run(context.Background(), []string{"--allow-env-secrets", "--listen", "0.0.0.0:0", "--", "true"}, io.Discard, io.Discard), "non-loopback")
	t.Setenv(envSecrets, "whsec_short")
	assert.Equal(t, exitUsage, run(context.Background(), []string{"--allow-env-secrets", "--listen", "127.0.0.1:0", "--", "true"}, io.Discard, io.Discard))
}

func TestAgentEnv(t *testing.T) {
	env := agentEnv([]string{"PATH=/bin", envSecrets + "=whsec_x", "OTEL_RESOURCE_ATTRIBUTES=team=a,service.instance.id=old", "OTEL_SERVICE_NAME=mine"}, "new-id", "")
	assert.Contains(t, env, "PATH=/bin")
	assert.Contains(t, env, "OTEL_RESOURCE_ATTRIBUTES=team=a,service.instance.id=new-id")
	assert.Contains(t, env, "OTEL_SERVICE_NAME=mine")
	assert.Contains(t, env, envSessionID+"=new-id")
	for _, kv := range env {
		assert.False(t, strings.HasPrefix(kv, envSecrets), "secrets must not reach the agent")
	}
	env = agentEnv(nil, "x", "")
	assert.Contains(t, env, "OTEL_RESOURCE_ATTRIBUTES=service.instance.id=x")
}

// TestAgentEnvKeepsTheAgentsServiceName: without --service-name the
// supervisor sets no OTEL_SERVICE_NAME, so an agent that names itself in code
// (Claude Code: claude-code) is not renamed after its executable; with the
// flag the given name replaces an inherited one, exactly once.
func TestAgentEnvKeepsTheAgentsServiceName(t *testing.T) {
	serviceNames := func(env []string) []string {
		var names []string
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "OTEL_SERVICE_NAME="); ok {
				names = append(names, v)
			}
		}
		return names
	}
	for _, tt := range []struct {
		name      string
		base      []string
		flag      string
		wantNames []string
	}{
		{name: "no flag, none inherited", base: []string{"PATH=/bin"}, wantNames: nil},
		{name: "no flag, inherited kept", base: []string{"OTEL_SERVICE_NAME=mine"}, wantNames: []string{"mine"}},
		{name: "flag, none inherited", base: []string{"PATH=/bin"}, flag: "agent", wantNames: []string{"agent"}},
		{name: "flag replaces inherited", base: []string{"OTEL_SERVICE_NAME=mine"}, flag: "agent", wantNames: []string{"agent"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantNames, serviceNames(agentEnv(tt.base, "id", tt.flag)))
		})
	}
}

func TestSafeGroup(t *testing.T) {
	assert.False(t, safeGroup(0))
	assert.False(t, safeGroup(1))
	assert.False(t, safeGroup(syscall.Getpgrp()))
	assert.False(t, safeGroup(os.Getpid()))
	assert.True(t, safeGroup(999999))
}
