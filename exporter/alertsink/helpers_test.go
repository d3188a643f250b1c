package alertsink

import (
	"context"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/metadata"
	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// Test secrets. testSecret is the Standard Webhooks published vector's key.
const (
	testSecret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testSecret2 = "whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24tdGVzdHM="
)

// killEvent builds a kill transition decided at decided.
func killEvent(id string, decided time.Time) loopevent.Event {
	return loopevent.Event{
		ID: id, Sequence: 2, Session: "sess-1", SessionSource: "trace_id", TraceID: "0102030405060708090a0b0c0d0e0f10",
		From: "working", To: "stuck", Reason: "frequent_identical", Trigger: "call",
		Period: 1, Repetitions: 5, Window: 10, CallIndex: 7,
		CycleTools: []string{"read_file"}, Signatures: []string{"sig1"}, Fingerprint: "fp1",
		FingerprintSource: "result", Confidence: "high", NormalizerVersion: "n1", FingerprintVersion: "f1",
		SpanID: "0102030405060708", Kill: true, Explanation: "loop detected: same tool call x5 of last 10",
		DecidedAt: decided, Agent: "coder",
		Target: target.Process{ServiceName: "agent", ServiceInstanceID: "inst-1", PID: 4242, HostName: "h1"},
	}
}

// tracesWith puts each event as a span event on its own tool span.
func tracesWith(evs ...loopevent.Event) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "agent")
	ss := rs.ScopeSpans().AppendEmpty()
	for i := range evs {
		sp := ss.Spans().AppendEmpty()
		sp.SetName("execute_tool read_file")
		sp.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
		sp.Attributes().PutStr("gen_ai.tool.call.arguments", `{"path":"/secret/arguments"}`)
		e := sp.Events().AppendEmpty()
		e.SetName(loopevent.EventName)
		evs[i].CopyTo(e.Attributes())
	}
	return td
}

// testConfig is a config with tiny backoff and no queue, so ConsumeTraces
// returns when delivery is done.
func testConfig(killURL string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Kill.Endpoint = killURL
	cfg.Kill.Secrets = []configopaque.String{testSecret}
	// Most tests count kill deliveries; the warn step has tests of its own.
	cfg.Kill.WarnOn = nil
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.InitialInterval = time.Millisecond
	cfg.RetryConfig.MaxInterval = 5 * time.Millisecond
	cfg.RetryConfig.RandomizationFactor = 0
	cfg.RetryConfig.MaxElapsedTime = 2 * time.Second
	cfg.TimeoutConfig.Timeout = 2 * time.Second
	return cfg
}

// startTraces creates and starts a traces exporter, stopped at test end.
func startTraces(t *testing.T, cfg *Config, set exporter.Settings) exporter.Traces {
	t.Helper()
	require.NoError(t, cfg.Validate())
	exp, err := NewFactory().CreateTraces(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	return exp
}

func nopSettings() exporter.Settings {
	return exportertest.NewNopSettings(metadata.Type)
}

// serve starts an HTTP server on a free loopback port.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// closedURL returns a loopback URL where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr + "/kill"
}

// hit is one request a test receiver saw.
type hit struct {
	at        time.Time
	id, ts    string
	signature string
	body      []byte
}

type recorder struct {
	mu   sync.Mutex
	hits []hit
}

func (r *recorder) add(h hit) {
	r.mu.Lock()
	r.hits = append(r.hits, h)
	r.mu.Unlock()
}

func (r *recorder) all() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// sumCounter adds up a counter's data points whose attributes include want.
func sumCounter(t *testing.T, tel *componenttest.Telemetry, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	var n int64
	for _, dp := range sum.DataPoints {
		match := true
		for _, kv := range want {
			v, ok := dp.Attributes.Value(kv.Key)
			if !ok || v != kv.Value {
				match = false
				break
			}
		}
		if match {
			n += dp.Value
		}
	}
	return n
}

var _ = pcommon.NewMap
var _ component.ID

// instanceNamed is the candidate instance id a body's target names under
// the test secret's key ("" for none): bodies carry only its digest.
func instanceNamed(t *testing.T, target webhookbody.Target, candidates ...string) string {
	t.Helper()
	k, err := stdwebhook.ParseSecret(testSecret)
	require.NoError(t, err)
	assert.Empty(t, target.ServiceInstanceID, "the raw instance id never leaves for the kill destination")
	for _, c := range candidates {
		if target.Names(c, [][]byte{k}) {
			return c
		}
	}
	return ""
}
