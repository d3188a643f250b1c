//go:build unix

package main

import (
	"bytes"
	"context"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopsupervisor/internal/webhook"
	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink"
	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

// TestRepliesCarryNothingAboutTheAgent: whoever asks — without a
// signature, with a forged one, with the wrong method, or with a genuine
// kill for another agent — learns nothing about the supervised agent from
// the answer: not its instance id (the kill capability), not its pid.
func TestRepliesCarryNothingAboutTheAgent(t *testing.T) {
	h := start(t, `echo "$$ 0" > "$1/pids"; exec sleep 300`, "--grace", "2s")
	h.pids()
	inst := "inst-" + t.Name()
	secretFree := func(resp *http.Response) string {
		t.Helper()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		_ = resp.Body.Close()
		var all bytes.Buffer
		_ = resp.Header.Write(&all)
		all.Write(b)
		assert.NotContains(t, all.String(), inst, "the instance id leaked in a %d answer", resp.StatusCode)
		assert.NotContains(t, all.String(), strconv.Itoa(h.agentPID), "the agent's pid leaked in a %d answer", resp.StatusCode)
		return string(b)
	}
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      map[string]string
		want                     int
	}{
		{"GET /kill", http.MethodGet, "/kill", "", nil, 405},
		{"POST to another path", http.MethodPost, "/", "{}", nil, 404},
		{"POST /hook without its token", http.MethodPost, "/hook", "{}", nil, 401},
		{"POST no headers", http.MethodPost, "/kill", "{}", nil, 400},
		{"POST forged", http.MethodPost, "/kill", "{}", map[string]string{
			stdwebhook.HeaderID: "x.kill", stdwebhook.HeaderTimestamp: strconv.FormatInt(time.Now().Unix(), 10),
			stdwebhook.HeaderSignature: "v1,AAAA"}, 401},
		{"POST stale", http.MethodPost, "/kill", "{}", map[string]string{
			stdwebhook.HeaderID: "x.kill", stdwebhook.HeaderTimestamp: "1000"}, 401},
	} {
		req, err := http.NewRequest(tc.method, strings.TrimSuffix(h.url, "/kill")+tc.path, strings.NewReader(tc.body))
		require.NoError(t, err)
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		assert.Equal(t, tc.want, resp.StatusCode, tc.name)
		body := secretFree(resp)
		assert.NotContains(t, body, "session", tc.name)
	}
	// Signed, but for someone else: not_running, and still nothing about ours.
	code, res := h.send(killSpec{id: "ld_r_1", instance: "inst-someone-else-entirely"})
	assert.Equal(t, 200, code)
	assert.Equal(t, "not_running", res)
	assert.True(t, alive(h.agentPID))
}

// TestGoneAnswerIsSigned: were the supervisor to answer 410, the answer
// carries the signature alert_sink requires before it switches the
// destination off, bound to the request's webhook-id and the kill secret.
func TestGoneAnswerIsSigned(t *testing.T) {
	key, err := stdwebhook.ParseSecret(testSecret)
	require.NoError(t, err)
	other, err := stdwebhook.ParseSecret(otherSecret)
	require.NoError(t, err)
	s := &supervisor{verifier: webhook.Verifier{Keys: [][]byte{key}, Tolerance: time.Minute}}
	rec := httptest.NewRecorder()
	s.answer(rec, http.StatusGone, reply{Result: "gone", webhookID: "ld_g_1.kill"})
	require.Equal(t, http.StatusGone, rec.Code)
	now := time.Now()
	assert.True(t, stdwebhook.VerifyGone([][]byte{key}, "ld_g_1.kill", rec.Header(), now, time.Minute))
	assert.False(t, stdwebhook.VerifyGone([][]byte{other}, "ld_g_1.kill", rec.Header(), now, time.Minute), "another key")
	assert.False(t, stdwebhook.VerifyGone([][]byte{key}, "ld_g_2.kill", rec.Header(), now, time.Minute), "another webhook")
	assert.False(t, stdwebhook.VerifyGone([][]byte{key}, "ld_g_1.kill", rec.Header(), now.Add(10*time.Minute), 5*time.Minute), "stale")
}

// TestSquattersGoneDoesNotSwitchKillsOff: a process binds the kill port
// before the supervisor and answers the collector's kill with 410. The
// answer is not signed, so alert_sink retries instead of switching the
// destination off, and once the real supervisor listens there the kill
// reaches it and stops the agent.
func TestSquattersGoneDoesNotSwitchKillsOff(t *testing.T) {
	squat, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := squat.Addr().String()
	var hits atomic.Int64
	hit := make(chan struct{}, 1)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusGone)
		select {
		case hit <- struct{}{}:
		default:
		}
	})}
	go func() { _ = srv.Serve(squat) }()

	f := alertsink.NewFactory()
	cfg := f.CreateDefaultConfig().(*alertsink.Config)
	cfg.Kill.Endpoint = "http://" + addr + "/kill"
	cfg.Kill.Secrets = []configopaque.String{testSecret}
	cfg.Kill.WarnOn = nil
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.InitialInterval = 20 * time.Millisecond
	cfg.RetryConfig.MaxInterval = 100 * time.Millisecond
	cfg.RetryConfig.MaxElapsedTime = 30 * time.Second
	require.NoError(t, cfg.Validate())
	exp, err := f.CreateTraces(context.Background(), exportertest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, exp.Shutdown(context.Background())) }()

	inst := "inst-" + t.Name()
	ev := loopevent.Event{
		ID: "ld_sq_1", Sequence: 1, Session: "sess-sq", From: "working", To: "stuck",
		Reason: "frequent_identical", Kill: true, Explanation: "loop detected",
		DecidedAt: time.Now(), Target: target.Process{ServiceInstanceID: inst},
	}
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("execute_tool read_file")
	e := sp.Events().AppendEmpty()
	e.SetName(loopevent.EventName)
	ev.CopyTo(e.Attributes())
	delivered := make(chan error, 1)
	go func() { delivered <- exp.ConsumeTraces(context.Background(), td) }()

	select {
	case <-hit:
	case <-time.After(10 * time.Second):
		t.Fatal("the kill never reached the squatter")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = srv.Shutdown(ctx)
	cancel()
	// The squatter is gone; the real supervisor takes the port.
	// The retried kill may arrive before the agent has done anything: no
	// waiting for it here.
	h := start(t, `exec sleep 300`, "--grace", "2s", "--listen", addr)
	require.NoError(t, <-delivered, "the kill was retried until the supervisor took it")
	exit := <-h.done
	h.done <- exit
	assert.Equal(t, exitKilled, exit, "the squatter's 410 switched kills off")
	assert.GreaterOrEqual(t, hits.Load(), int64(1))
}

// idFile writes id to a private file for --instance-id-file.
func idFile(t *testing.T, id string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "instance-id")
	require.NoError(t, os.WriteFile(p, []byte(id+"\n"), 0o600))
	return p
}

// TestInstanceIDOnlyFromAFileOrGenerated: an id on the command line is
// readable by every local user (ps), so --instance-id is refused; an id
// from a file must be private and must not be patterned.
func TestInstanceIDOnlyFromAFileOrGenerated(t *testing.T) {
	secrets := filepath.Join(t.TempDir(), "secrets")
	require.NoError(t, os.WriteFile(secrets, []byte(testSecret+"\n"), 0o600))
	runWith := func(args ...string) (int, string) {
		var stderr bytes.Buffer
		args = append([]string{"--secret-file", secrets, "--listen", "127.0.0.1:0"}, args...)
		code := run(context.Background(), append(args, "--", "true"), io.Discard, &stderr)
		return code, stderr.String()
	}
	code, msg := runWith("--instance-id", "6f1c2a9e-0b7d-4c51-9a1e-3d2f8b7c6a50")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, msg, "--instance-id-file")

	for _, bad := range []string{
		"aaaaaaaaaaaaaaaa", "0123456789abcdef", "abababababababab", "abcdabcdabcdabcd",
		"agent-1-agent-1-agent-1", "agentagentagent1", "inst,1f2e3d4c5b6a7988", "inst=1f2e3d4c5b6a7988", "inst 1f2e3d4c5b6a7988",
	} {
		code, msg := runWith("--instance-id-file", idFile(t, bad))
		assert.Equal(t, exitUsage, code, bad)
		assert.Contains(t, msg, "instance id", bad)
	}
	for _, good := range []string{newInstanceID(), "inst-3f9a0c1d7e2b4a6f8c0d1e2f3a4b5c6d", "k3Jq9xZ2pW7mN4vB"} {
		assert.NoError(t, checkInstanceID(good), good)
	}
	for i := 0; i < 1000; i++ {
		require.NoError(t, checkInstanceID(newInstanceID()))
	}

	p := idFile(t, newInstanceID())
	require.NoError(t, os.Chmod(p, 0o644))
	code, msg = runWith("--instance-id-file", p)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, msg, "0600")
}

// TestSecretsFileOwnedByAnotherUserIsRefused: the owner of a file can
// chmod and read it, so a 0600 secrets file owned by the agent's user (or
// anyone but the supervisor's user and root) is refused.
func TestSecretsFileOwnedByAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	t.Setenv(envSecrets, "")
	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(nobody.Uid)
	p := filepath.Join(t.TempDir(), "secrets")
	require.NoError(t, os.WriteFile(p, []byte(testSecret+"\n"), 0o600))
	require.NoError(t, os.Chown(p, uid, -1))
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--secrets-file", p, "--agent-user", "nobody", "--listen", "127.0.0.1:0", "--", "true"}, io.Discard, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), "owned by uid "+nobody.Uid)
	require.NoError(t, os.Chown(p, 0, -1))
	assert.Equal(t, 0, run(context.Background(), []string{"--secrets-file", p, "--agent-user", "nobody", "--listen", "127.0.0.1:0", "--", "true"}, io.Discard, io.Discard))
}

// TestAgentInheritsNoSecret: the shell that starts the supervisor may hold
// the collector's secrets (the README's setup exported the kill secret);
// none of them reaches the agent or the hooks.
func TestAgentInheritsNoSecret(t *testing.T) {
	var base []string
	for k := range secretEnv {
		base = append(base, k+"=whsec_secret-of-"+k)
	}
	base = append(base, "PATH=/bin", "LOOP_OTLP_TOKEN=agents-own-token")
	env := agentEnv(base, "id-0123456789abcdef", "")
	for _, kv := range env {
		assert.NotContains(t, kv, "whsec_secret-of-", "a secret reached the agent: %s", kv)
	}
	assert.Contains(t, env, "LOOP_OTLP_TOKEN=agents-own-token", "the agent's own OTLP credential stays")
	for _, k := range []string{"LOOPDETECT_WEBHOOK_SECRET", "LOOPDETECT_DIGEST_KEY", "LOOPDETECT_ALERTS_SECRET", "LOOPSUPERVISOR_SECRETS"} {
		assert.True(t, secretEnv[k], k)
	}
}

// TestResultFileIsPrivate: the result line holds the instance id.
func TestResultFileIsPrivate(t *testing.T) {
	h := start(t, `echo "$$ 0" > "$1/pids"; exec sleep 300`, "--backstop", "200ms", "--grace", "2s")
	h.pids()
	exit := <-h.done
	h.done <- exit
	require.Equal(t, exitBackstop, exit)
	fi, err := os.Stat(h.result)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}
