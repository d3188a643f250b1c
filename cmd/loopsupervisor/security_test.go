//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
		{"GET /", http.MethodGet, "/", "", nil, 405},
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
		DecidedAt: time.Now(), Target: loopevent.Target{ServiceInstanceID: inst},
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
	h := start(t, `echo "$$ 0" > "$1/pids"; exec sleep 300`, "--grace", "2s", "--listen", addr)
	h.pids()
	require.NoError(t, <-delivered, "the kill was retried until the supervisor took it")
	exit := <-h.done
	h.done <- exit
	assert.Equal(t, exitKilled, exit, "the squatter's 410 switched kills off")
	assert.GreaterOrEqual(t, hits.Load(), int64(1))
}
