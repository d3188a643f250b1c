//go:build linux

package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// loopFor is six identical tool calls of one session naming inst as the
// agent's service.instance.id: enough for the suite's collector to kill.
func loopFor(inst string, trace byte, seq uint64) []call {
	res := map[string]any{"service.name": "agent", "service.instance.id": inst}
	var calls []call
	for i := 0; i < 6; i++ {
		calls = append(calls, call{trace: traceID(trace, seq), seq: seq*100 + uint64(i), resource: res})
	}
	return calls
}

// TestProbingTheSupervisorYieldsNoKill: an unauthenticated caller asks the
// supervisor's port whatever it can (GET /, an unsigned POST, a forged
// signature) and sends a loop naming every id it found in the answers. The
// answers name nothing of the agent, so the collector's kill names someone
// else and the agent keeps running.
func TestProbingTheSupervisorYieldsNoKill(t *testing.T) {
	dir := t.TempDir()
	secret := testproc.NewSecret(t)
	inst := instanceID(t)
	sup := startSupervisor(t, dir, secret, inst, sleeper, nil)
	c := startCollector(t, dir, sup.port, secret, 1000)

	base := fmt.Sprintf("http://127.0.0.1:%d", sup.port)
	var learned []string
	for _, probe := range []struct{ method, path string }{{"GET", "/"}, {"POST", "/"}, {"POST", "/kill"}, {"PUT", "/kill"}} {
		req, err := http.NewRequest(probe.method, base+probe.path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("webhook-id", "probe")
		req.Header.Set("webhook-timestamp", fmt.Sprint(time.Now().Unix()))
		req.Header.Set("webhook-signature", "v1,AAAA")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var hdr strings.Builder
		_ = resp.Header.Write(&hdr)
		if strings.Contains(string(b)+hdr.String(), inst) {
			t.Fatalf("%s %s answered %d with the agent's instance id: %s", probe.method, probe.path, resp.StatusCode, b)
		}
		var r map[string]any
		if json.Unmarshal(b, &r) == nil {
			for _, v := range r {
				if s, ok := v.(string); ok {
					learned = append(learned, s)
				}
			}
		}
	}
	for i, id := range learned {
		c.send(t, spans(loopFor(id, 7, uint64(i+1))...))
	}
	c.send(t, spans(loopFor("inst-guessed-by-the-attacker", 7, 99)...))
	waitKillsDelivered(t, c, 1)
	if sup.Exited() {
		t.Fatalf("the agent was killed from what the supervisor told a stranger; log:\n%s", sup.LogText())
	}
}

// TestSquattersGoneDoesNotSwitchKillsOff: a local process holds the kill
// port between supervisor runs and answers the collector's kill with 410
// Gone. The answer is not signed with the kill secret, so alert_sink
// retries instead of switching the destination off; the supervisor that
// takes the port next still gets its agent's kill.
func TestSquattersGoneDoesNotSwitchKillsOff(t *testing.T) {
	dir := t.TempDir()
	secret := testproc.NewSecret(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	var gone atomic.Int64
	squatter := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		gone.Add(1)
		w.WriteHeader(http.StatusGone)
	})}
	go func() { _ = squatter.Serve(ln) }()
	c := startCollector(t, dir, port, secret, 1000)

	// Any loop gives the squatter a kill to answer.
	c.send(t, spans(loopFor("inst-of-a-finished-run-0123456789", 8, 1)...))
	if !testproc.Eventually(20*time.Second, func() bool { return gone.Load() > 0 }) {
		t.Fatalf("no kill reached the squatter; collector log:\n%s", testproc.Tail(c.LogText(), 3000))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = squatter.Shutdown(ctx)
	cancel()
	if d := c.metric(t, "otelcol_alertsink_endpoints_disabled"); d != 0 {
		t.Fatalf("an unsigned 410 disabled the kill destination (%v)", d)
	}

	inst := instanceID(t)
	sup := startSupervisorOn(t, dir, port, secret, inst, sleeper, nil)
	c.send(t, spans(loopFor(inst, 8, 2)...))
	if code := sup.Wait(t, 30*time.Second); code != 86 {
		t.Fatalf("supervisor exit %d, want 86: kills stayed switched off after the squatter's 410 (%v answered); collector log:\n%s",
			code, gone.Load(), testproc.Tail(c.LogText(), 3000))
	}
	if d := c.metric(t, "otelcol_alertsink_endpoints_disabled"); d != 0 {
		t.Fatalf("kill destination disabled (%v)", d)
	}
	t.Logf("squatter answered %d webhook(s) with 410; destination still enabled; the agent's kill delivered", gone.Load())
}
