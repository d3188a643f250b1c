//go:build unix

package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// TestKillLatency measures (never asserts) the time from the arrival at the
// collector of the span that completes the loop pattern to the receipt of the
// kill webhook. It runs only with LOOP_E2E_LATENCY_RUNS=N:
//
//	LOOP_E2E_LATENCY_RUNS=20 go test -run TestKillLatency -v ./internal/e2e/
//
// Set-up: the real collector with config/demo.yaml; loopagent --scenario
// seed000 sends OTLP/HTTP through a pass-through proxy in this process that
// stamps each request just before it forwards it to the collector (the
// "arrival"); a minimal HTTP receiver in this process stands in for the
// supervisor and stamps each kill webhook once its body is read (where
// loopsupervisor stamps it, before verification). The span that completes
// the pattern is the kill's transition.trigger_span_id; its arrival is the
// stamp of the first proxied request that carried it. Both stamps come from
// one process's monotonic clock. The webhook's decided_at (the collector's
// wall clock when loop_detect decided) splits the interval in two.
// LOOP_E2E_LATENCY_SPEED (default 40) compresses the agent's time.
//
//nolint:funlen // One measurement read top to bottom: its steps share the processes and the clock it starts.
func TestKillLatency(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("LOOP_E2E_LATENCY_RUNS"))
	if runs <= 0 {
		t.Skip("set LOOP_E2E_LATENCY_RUNS=N to measure the kill latency over N runs")
	}
	speed := 40.0
	if s := os.Getenv("LOOP_E2E_LATENCY_SPEED"); s != "" {
		var err error
		if speed, err = strconv.ParseFloat(s, 64); err != nil || speed <= 0 {
			t.Fatalf("LOOP_E2E_LATENCY_SPEED=%q", s)
		}
	}
	_, _, agentBin := binaries(t)
	dir := t.TempDir()
	secret := testproc.NewSecret(t)

	// The kill receiver (in place of the supervisor); its listener is ours
	// from the start, so its port cannot be taken.
	kills := make(chan killReceipt, 16)
	rln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rsrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		at := time.Now()
		if err != nil {
			http.Error(w, "unreadable", http.StatusBadRequest)
			return
		}
		var b struct {
			Type       string               `json:"type"`
			ID         string               `json:"id"`
			DecidedAt  time.Time            `json:"decided_at"`
			Session    struct{ Key string } `json:"session"`
			Transition struct {
				Kill          bool   `json:"kill"`
				CallIndex     int64  `json:"call_index"`
				TriggerSpanID string `json:"trigger_span_id"`
			} `json:"transition"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"result":"killed"}` + "\n"))
		if b.Type == "loop.kill" && b.Transition.Kill {
			kills <- killReceipt{at: at, id: b.ID, session: b.Session.Key, decidedAt: b.DecidedAt,
				spanID: b.Transition.TriggerSpanID, call: b.Transition.CallIndex}
		}
	})}
	go func() { _ = rsrv.Serve(rln) }()
	t.Cleanup(func() { _ = rsrv.Close() })

	c := startCollector(t, dir, rln.Addr().(*net.TCPAddr).Port, secret)

	// The stamping OTLP/HTTP proxy in front of the collector.
	px := &stampProxy{target: fmt.Sprintf("http://127.0.0.1:%d", c.otlpHTTP),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	psrv := &http.Server{Handler: px}
	go func() { _ = psrv.Serve(pln) }()
	t.Cleanup(func() { _ = psrv.Close() })

	var total, split1, split2 []time.Duration
	for i := range runs {
		px.reset()
		a := testproc.Start(t, dir, fmt.Sprintf("agent-%02d", i), nil, "", agentBin,
			"--endpoint", pln.Addr().String(), "--scenario", "seed000", "--speed", strconv.FormatFloat(speed, 'g', -1, 64), "-q")
		var k killReceipt
		select {
		case k = <-kills:
		case <-time.After(60 * time.Second):
			t.Fatalf("run %d: no kill within 60 s; agent log:\n%s\ncollector log:\n%s", i, a.LogText(), c.LogText())
		}
		a.Stop(t, 10*time.Second) // the supervisor's job, done here
		arrived, ok := px.arrival(k.spanID)
		if !ok {
			t.Fatalf("run %d: trigger span %s of kill %s never went through the proxy", i, k.spanID, k.id)
		}
		d := k.at.Sub(arrived)
		total = append(total, d)
		split1 = append(split1, k.decidedAt.Sub(arrived))
		split2 = append(split2, k.at.Sub(k.decidedAt))
		t.Logf("run %2d: kill %s (call %d): span arrival -> kill receipt %8.3f ms  (arrival -> decided_at %7.3f ms, decided_at -> receipt %7.3f ms)",
			i+1, k.id, k.call, ms(d), ms(k.decidedAt.Sub(arrived)), ms(k.at.Sub(k.decidedAt)))
	}
	summary := fmt.Sprintf("kill latency over %d runs (span arrival at the collector -> kill webhook received):\n"+
		"  median %.3f ms, p99 %.3f ms, min %.3f ms, max %.3f ms\n"+
		"  of which arrival -> decided_at: median %.3f ms, p99 %.3f ms; decided_at -> receipt: median %.3f ms, p99 %.3f ms",
		runs, ms(pct(total, 50)), ms(pct(total, 99)), ms(slices.Min(total)), ms(slices.Max(total)),
		ms(pct(split1, 50)), ms(pct(split1, 99)), ms(pct(split2, 50)), ms(pct(split2, 99)))
	t.Log(summary)
	if out := os.Getenv("LOOP_E2E_LATENCY_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(summary+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
}

type killReceipt struct {
	at        time.Time
	id        string
	session   string
	decidedAt time.Time
	spanID    string
	call      int64
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the nearest-rank percentile p of ds (p99 of 20 samples is the
// largest).
func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// stampProxy forwards OTLP/HTTP requests to the collector and remembers, per
// span id, when the first request carrying it was forwarded. Bodies are
// decoded after forwarding, so stamping costs the request nothing.
type stampProxy struct {
	target string
	client *http.Client

	mu   sync.Mutex
	reqs []stamped
}

type stamped struct {
	at       time.Time
	body     []byte
	encoding string
}

func (p *stampProxy) reset() {
	p.mu.Lock()
	p.reqs = nil
	p.mu.Unlock()
}

func (p *stampProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := http.NewRequest(r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for _, h := range []string{"Content-Type", "Content-Encoding", "User-Agent"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	at := time.Now()
	resp, err := p.client.Do(req)
	p.mu.Lock()
	p.reqs = append(p.reqs, stamped{at: at, body: body, encoding: r.Header.Get("Content-Encoding")})
	p.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// arrival is when the first request carrying span spanID (hex) was forwarded.
func (p *stampProxy) arrival(spanID string) (time.Time, bool) {
	p.mu.Lock()
	reqs := slices.Clone(p.reqs)
	p.mu.Unlock()
	var first time.Time
	for _, r := range reqs {
		body := r.body
		if r.encoding == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				continue
			}
			if body, err = io.ReadAll(zr); err != nil {
				continue
			}
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			continue
		}
		td := req.Traces()
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					if spans.At(k).SpanID().String() == spanID && (first.IsZero() || r.at.Before(first)) {
						first = r.at
					}
				}
			}
		}
	}
	return first, !first.IsZero()
}
