package alertsink

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/metadatatest"
	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

const requestsMetric = "otelcol_alertsink_webhook_requests"

// TestStatusMatrix sends one kill per case; the receiver answers the first
// attempt with the case's outcome and every later attempt with 200.
func TestStatusMatrix(t *testing.T) {
	status := func(code int) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
	}
	cases := []statusCase{
		{name: "200", first: status(200), code: "200", result: resultDelivered},
		{name: "202", first: status(202), code: "202", result: resultDelivered},
		{name: "204", first: status(204), code: "204", result: resultDelivered},
		{name: "301", first: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/moved", http.StatusMovedPermanently)
		}, code: "301", result: resultRejected},
		{name: "400", first: status(400), code: "400", result: resultRejected},
		{name: "401", first: status(401), code: "401", result: resultRejected},
		{name: "404", first: status(404), code: "404", result: resultRejected},
		{name: "408", first: status(408), code: "408", retried: true, result: resultRetry},
		// A 410 switches the destination off only when signed with its
		// secret; anything else (a stranger on the port) is retried.
		{name: "410-unsigned", first: status(410), code: "410", retried: true, result: resultRetry},
		{name: "410-signed", first: gone(testSecret, 0), code: "410", result: resultDisabled},
		{name: "410-wrong-key", first: gone(testSecret2, 0), code: "410", retried: true, result: resultRetry},
		{name: "410-stale", first: gone(testSecret, -6*time.Minute), code: "410", retried: true, result: resultRetry},
		{name: "410-other-id", first: func(w http.ResponseWriter, r *http.Request) {
			r.Header.Set(stdwebhook.HeaderID, "ld_someone_else.kill")
			gone(testSecret, 0)(w, r)
		}, code: "410", retried: true, result: resultRetry},
		{name: "410-echoed-request-signature", first: func(w http.ResponseWriter, r *http.Request) {
			for _, h := range []string{stdwebhook.HeaderID, stdwebhook.HeaderTimestamp, stdwebhook.HeaderSignature} {
				w.Header().Set(h, r.Header.Get(h))
			}
			w.WriteHeader(http.StatusGone)
		}, code: "410", retried: true, result: resultRetry},
		{name: "425", first: status(425), code: "425", retried: true, result: resultRetry},
		{name: "429-seconds", first: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
		}, code: "429", retried: true, result: resultRetry, minGap: 900 * time.Millisecond},
		{name: "429-http-date", first: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat))
			w.WriteHeader(429)
		}, code: "429", retried: true, result: resultRetry, minGap: 800 * time.Millisecond},
		{name: "500", first: status(500), code: "500", retried: true, result: resultRetry},
		{name: "502", first: status(502), code: "502", retried: true, result: resultRetry},
		{name: "503", first: status(503), code: "503", retried: true, result: resultRetry},
		{name: "504", first: status(504), code: "504", retried: true, result: resultRetry},
		{name: "timeout", first: func(_ http.ResponseWriter, r *http.Request) {
			// Hang until the client gives up (or the test ends).
			select {
			case <-r.Context().Done():
			case <-r.Context().Value(testDoneKey{}).(chan struct{}):
			}
		}, code: "timeout", retried: true, result: resultRetry, timeout: 200 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runStatusCase(t, c)
		})
	}
	t.Run("connection-refused", func(t *testing.T) {
		t.Parallel()
		tel := componenttest.NewTelemetry()
		t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
		cfg := testConfig(closedURL(t))
		cfg.RetryConfig.MaxElapsedTime = 100 * time.Millisecond
		exp := startTraces(t, cfg, metadatatest.NewSettings(tel))
		err := exp.ConsumeTraces(context.Background(), tracesWith(killEvent("ld_m_refused", time.Now())))
		require.Error(t, err, "retries exhausted: the error goes back to the pipeline")
		assert.GreaterOrEqual(t, sumCounter(t, tel, requestsMetric,
			attribute.String("code", "connection_error"), attribute.String("result", resultRetry)), int64(2))
	})
}

// statusCase is one first answer of the kill receiver and how alert_sink
// must count and treat it.
type statusCase struct {
	name string
	// first answers the first attempt.
	first   func(w http.ResponseWriter, r *http.Request)
	code    string // the code label of the first attempt
	retried bool
	result  string // result label of the first attempt
	minGap  time.Duration
	timeout time.Duration
}

// runStatusCase sends one kill to a receiver that answers the first
// attempt as c says and every later attempt with 200.
func runStatusCase(t *testing.T, c statusCase) {
	var attempts, moved atomic.Int64
	times := make(chan time.Time, 10)
	mux := http.NewServeMux()
	mux.HandleFunc("/moved", func(w http.ResponseWriter, _ *http.Request) { moved.Add(1); w.WriteHeader(200) })
	mux.HandleFunc("/kill", func(w http.ResponseWriter, r *http.Request) {
		times <- time.Now()
		if attempts.Add(1) == 1 {
			c.first(w, r)
			return
		}
		w.WriteHeader(200)
	})
	done := make(chan struct{})
	base := serve(t, withDone(mux, done))
	t.Cleanup(func() { close(done) })
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	cfg := testConfig(base + "/kill")
	if c.timeout > 0 {
		cfg.TimeoutConfig.Timeout = c.timeout
	}
	exp := startTraces(t, cfg, metadatatest.NewSettings(tel))

	require.NoError(t, exp.ConsumeTraces(context.Background(), tracesWith(killEvent("ld_m_"+c.name, time.Now()))))

	want := int64(1)
	if c.retried {
		want = 2
	}
	assert.Equal(t, want, attempts.Load(), "attempts")
	assert.Zero(t, moved.Load(), "a redirect must not be followed")
	assert.Equal(t, int64(1), sumCounter(t, tel, requestsMetric,
		attribute.String("destination", "kill"), attribute.String("code", c.code), attribute.String("result", c.result)))
	if c.retried {
		assert.Equal(t, int64(1), sumCounter(t, tel, requestsMetric,
			attribute.String("code", "200"), attribute.String("result", resultDelivered)))
		first, second := <-times, <-times
		if c.minGap > 0 {
			assert.GreaterOrEqual(t, second.Sub(first), c.minGap, "Retry-After not honoured")
		}
	}
	switch c.result {
	case resultRejected:
		assert.Equal(t, int64(1), sumCounter(t, tel, "otelcol_alertsink_records_dropped",
			attribute.String("destination", "kill"), attribute.String("reason", "rejected")))
	case resultDisabled:
		assert.Equal(t, int64(1), sumCounter(t, tel, "otelcol_alertsink_endpoints_disabled",
			attribute.String("destination", "kill")))
		// The endpoint is disabled: the next kill is not sent.
		require.NoError(t, exp.ConsumeTraces(context.Background(), tracesWith(killEvent("ld_m_after410", time.Now()))))
		assert.Equal(t, int64(1), attempts.Load())
		assert.Equal(t, int64(2), sumCounter(t, tel, "otelcol_alertsink_records_dropped",
			attribute.String("destination", "kill"), attribute.String("reason", "disabled")))
	}
}

// gone answers 410 signed with secret, its timestamp skew from now.
func gone(secret string, skew time.Duration) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		key, err := stdwebhook.ParseSecret(secret)
		if err != nil {
			panic(err)
		}
		id, ts := r.Header.Get(stdwebhook.HeaderID), time.Now().Add(skew).Unix()
		w.Header().Set(stdwebhook.HeaderID, id)
		w.Header().Set(stdwebhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
		w.Header().Set(stdwebhook.HeaderSignature, stdwebhook.SignGone([][]byte{key}, id, ts))
		w.WriteHeader(http.StatusGone)
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"0":                             0,
		"-5":                            0,
		"7":                             7 * time.Second,
		"999999999":                     maxRetryAfter,
		"Mon, 30 Nov 2026 12:00:30 GMT": 30 * time.Second,
		"Mon, 30 Nov 2026 11:00:00 GMT": 0,
		"garbage":                       0,
		strconv.Itoa(7200):              maxRetryAfter,
	} {
		assert.Equal(t, want, retryAfter(in, now), in)
	}
}

type testDoneKey struct{}

// withDone hands handlers a channel closed when the test ends, so a hanging
// handler never outlives its test.
func withDone(h http.Handler, done chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), testDoneKey{}, done)))
	})
}
