//go:build linux

package reliability

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// full says whether RELIABILITY_FULL asks for the full-scale measurements.
func full() bool { return os.Getenv("RELIABILITY_FULL") != "" }

// floodCeiling bounds the collector's peak RSS under the floods below: the
// engine keeps at most max_sessions sessions and 65,536 tool names.
const floodCeiling = 768 << 20

// TestSessionFloodIsBounded: one span per new session, far past
// max_sessions; the tracked sessions never pass the bound.
func TestSessionFloodIsBounded(t *testing.T) {
	sessions, maxSessions := 50_000, 10_000
	if full() {
		sessions, maxSessions = 1_000_000, 100_000
	}
	c := startCollector(t, t.TempDir(), testproc.FreePort(t), testproc.NewSecret(t), maxSessions)
	start := time.Now()
	batch := make([]call, 0, 2000)
	for n := 0; n < sessions; n++ {
		batch = append(batch, call{trace: traceID(5, uint64(n)), seq: uint64(n + 1), resource: map[string]any{"service.name": "flood"}})
		if len(batch) == cap(batch) || n == sessions-1 {
			c.sendRetrying(t, spans(batch...))
			batch = batch[:0]
		}
	}
	tracked := c.metric(t, "otelcol_loopdetect_sessions")
	peak := vmHWM(t, c.Cmd.Process.Pid)
	t.Logf("%d sessions in %s: peak RSS %d MiB, tracked %v (max_sessions %d), evicted %v",
		sessions, time.Since(start).Round(time.Second), peak>>20, tracked, maxSessions, c.metric(t, "otelcol_loopdetect_evictions", `cause="capacity"`))
	if tracked > float64(maxSessions) {
		t.Fatalf("%v sessions tracked, max_sessions %d", tracked, maxSessions)
	}
	if peak > floodCeiling {
		t.Fatalf("peak RSS %d MiB over %d MiB", peak>>20, floodCeiling>>20)
	}
}

// TestToolNameFloodIsBounded: every call a new tool name.
func TestToolNameFloodIsBounded(t *testing.T) {
	names := 100_000
	if full() {
		names = 1_000_000
	}
	c := startCollector(t, t.TempDir(), testproc.FreePort(t), testproc.NewSecret(t), 100_000)
	start := time.Now()
	batch := make([]call, 0, 2000)
	for n := 0; n < names; n++ {
		batch = append(batch, call{trace: traceID(6, uint64(n%1000)), seq: uint64(n + 1), resource: map[string]any{"service.name": "flood"},
			tool: fmt.Sprintf("tool-%07d-%s", n, "padpadpadpadpadpadpadpadpadpadpadpadpadpadpadpadpadpadpadpadpadpad")})
		if len(batch) == cap(batch) || n == names-1 {
			c.sendRetrying(t, spans(batch...))
			batch = batch[:0]
		}
	}
	peak := vmHWM(t, c.Cmd.Process.Pid)
	t.Logf("%d distinct tool names in %s: peak RSS %d MiB", names, time.Since(start).Round(time.Second), peak>>20)
	if peak > floodCeiling {
		t.Fatalf("peak RSS %d MiB over %d MiB", peak>>20, floodCeiling>>20)
	}
}

// TestFloodBetweenCallsDoesNotHideALoop: between each of the victim's
// identical calls, a sender opens more fresh one-span sessions than
// max_sessions holds (102,000 for 100,000 used to evict the victim every
// time: 0 kills). Fresh sessions now evict their own newest members, never
// an older session that is still calling, and the loop ends in a kill.
func TestFloodBetweenCallsDoesNotHideALoop(t *testing.T) {
	maxSessions, flood := 10_000, 20_000
	if full() {
		maxSessions, flood = 100_000, 102_000
	}
	dir := t.TempDir()
	secret := testproc.NewSecret(t)
	inst := instanceID(t)
	sup := startSupervisor(t, dir, secret, inst, sleeper, nil)
	c := startCollector(t, dir, sup.port, secret, maxSessions)
	victim := traceID(9, 1)
	res := map[string]any{"service.name": "agent", "service.instance.id": inst}
	start, sent := time.Now(), 0
	for i := 0; i < 8 && !sup.Exited(); i++ {
		c.send(t, spans(call{trace: victim, seq: uint64(i + 1), resource: res}))
		batch := make([]call, 0, 2000)
		for n := 0; n < flood; n++ {
			sent++
			batch = append(batch, call{trace: traceID(10, uint64(sent)), seq: uint64(1000 + sent), resource: map[string]any{"service.name": "attacker"},
				tool: "read", args: fmt.Sprintf(`{"n":%d}`, sent)})
			if len(batch) == cap(batch) || n == flood-1 {
				c.sendRetrying(t, spans(batch...))
				batch = batch[:0]
			}
		}
		if tracked := c.metric(t, "otelcol_loopdetect_sessions"); tracked > float64(maxSessions) {
			t.Fatalf("%v sessions tracked, max_sessions %d", tracked, maxSessions)
		}
	}
	evicted := c.metric(t, "otelcol_loopdetect_evictions", `cause="capacity"`)
	if code := sup.Wait(t, 30*time.Second); code != 86 {
		t.Fatalf("supervisor exit %d, want 86: the victim's loop was hidden by %d fresh sessions (%v evicted)", code, sent, evicted)
	}
	t.Logf("%d fresh sessions, %d between each of the victim's calls (max_sessions %d): %v evicted, the victim's loop killed after %s",
		sent, flood, maxSessions, evicted, time.Since(start).Round(time.Second))
}

// TestFloodCannotHideANewLoop: the table is full of a sender's fresh
// one-span sessions when the victim's first call arrives, and 1,500 new
// ones follow each of its calls, each called a second time in the
// re-touching shape. The victim used to be its shard's newest session and
// went to the flood's next one: no kill in 14 calls (21,014 evictions;
// 49,014 re-touching). Now a shard gives up the newest session of the
// sender holding the most of it, the flood's, and the victim is killed at
// its 5th call, as on an empty table.
func TestFloodCannotHideANewLoop(t *testing.T) {
	maxSessions, perCall := 10_000, 1_500
	if full() {
		maxSessions, perCall = 100_000, 15_000
	}
	for _, tc := range []struct {
		name    string
		retouch bool
	}{
		{"fresh one-span sessions", false},
		{"each flood session called again", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			secret := testproc.NewSecret(t)
			inst := instanceID(t)
			sup := startSupervisor(t, dir, secret, inst, sleeper, nil)
			c := startCollector(t, dir, sup.port, secret, maxSessions)
			attacker := map[string]any{"service.name": "attacker"}
			sent, spansSent := 0, 0
			// flood opens n new sessions (and calls each again when the
			// shape re-touches), 2,000 spans a request.
			flood := func(n int) {
				first := sent
				batch := make([]call, 0, 2000)
				send := func(session int) {
					spansSent++
					batch = append(batch, call{trace: traceID(11, uint64(session)), seq: uint64(1_000_000 + spansSent), resource: attacker,
						tool: "read", args: fmt.Sprintf(`{"n":%d}`, session)})
					if len(batch) == cap(batch) {
						c.sendRetrying(t, spans(batch...))
						batch = batch[:0]
					}
				}
				for ; sent < first+n; sent++ {
					send(sent)
				}
				if tc.retouch {
					for s := first; s < sent; s++ {
						send(s)
					}
				}
				if len(batch) > 0 {
					c.sendRetrying(t, spans(batch...))
				}
			}
			flood(maxSessions) // the table is full before the victim's first call
			victim := traceID(12, 1)
			res := map[string]any{"service.name": "agent", "service.instance.id": inst}
			const killedBy = 5
			for i := 1; i <= killedBy; i++ {
				if sup.Exited() {
					t.Fatalf("the supervisor exited before the victim's call %d", i)
				}
				c.send(t, spans(call{trace: victim, seq: uint64(i), resource: res}))
				if i < killedBy {
					flood(perCall)
				}
				if tracked := c.metric(t, "otelcol_loopdetect_sessions"); tracked > float64(maxSessions) {
					t.Fatalf("%v sessions tracked, max_sessions %d", tracked, maxSessions)
				}
			}
			evicted := c.metric(t, "otelcol_loopdetect_evictions", `cause="capacity"`)
			// Written before the verdict, so that a collector that misses
			// the kill is measured too.
			peak := vmHWM(t, c.Cmd.Process.Pid)
			t.Logf("%d flood sessions (%d spans), %d new between each two of the victim's calls (max_sessions %d): %v evicted, peak RSS %d MiB",
				sent, spansSent, perCall, maxSessions, evicted, peak>>20)
			if peak > floodCeiling {
				t.Fatalf("peak RSS %d MiB over %d MiB", peak>>20, floodCeiling>>20)
			}
			if code := sup.Wait(t, 30*time.Second); code != 86 {
				t.Fatalf("supervisor exit %d, want 86: the victim's loop was not killed at its %dth call (%d flood sessions, %d spans, %v evicted)",
					code, killedBy, sent, spansSent, evicted)
			}
			if evicted < float64(killedBy-1) {
				t.Fatalf("%v sessions evicted: the flood did not hold the table at max_sessions", evicted)
			}
			// The operator sees them as sessions cut off while calling:
			// none was stale in a run of seconds.
			if active := c.metric(t, "otelcol_loopdetect_evictions", `cause="capacity"`, `session="active"`); active != evicted {
				t.Fatalf("%v of %v capacity evictions counted as session=\"active\", want all", active, evicted)
			}
		})
	}
}
