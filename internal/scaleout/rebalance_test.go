//go:build unix

package scaleout

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// TestRebalance stops one of three tier-2 instances while loops are running
// and tells the gateway (static resolver: rewrite its backend list and
// SIGHUP it, which is what the dns/k8s resolvers do by themselves when an
// instance leaves). The sessions of the stopped instance move to the two
// others; each loop that was running there is detected again, within one
// window of calls, on its new instance; the sessions of the two remaining
// instances stay where they were (consistent hashing) and are not detected
// again; no healthy session is flagged. What the second kill looks like to
// the supervisor is logged and pinned: see docs/scaling.md.
func TestRebalance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four collectors; skipped with -short")
	}
	began := time.Now()
	_, _, agent := binaries(t)
	c := startCluster(t, false)
	dir, rcv, ins, gw := c.dir, c.rcv, c.ins, c.gw

	const sessions = 60
	loopFraction := 0.5
	f := fleet{loops: map[string]bool{}, healthy: map[string]bool{}}
	looping := int(float64(sessions)*loopFraction + 0.5)
	prefix := fmt.Sprintf("rebal-%d", time.Now().UnixNano()%1e6)
	for i := range sessions {
		f.add(fmt.Sprintf("%s-%04d", prefix, i), i < looping)
	}
	// 10 spans/s per session (2 tool calls/s); long enough for the whole
	// story, stopped by the test when it is told.
	load := start(t, dir, "loopagent-load", []string{"OTEL_SERVICE_NAME=loadagent"}, filepath.Join(dir, "load.json"), agent,
		"--load", "--sessions", strconv.Itoa(sessions), "--loop-fraction", fmt.Sprint(loopFraction),
		"--rate", "600", "--duration", "60s", "--session-id", prefix,
		"--endpoint", fmt.Sprintf("127.0.0.1:%d", gw.grpc), "--protocol", "grpc", "-q")

	// Phase 1: every loop detected once, somewhere.
	first := map[string]hook{} // session -> its first stuck transition
	ok := testproc.Eventually(40*time.Second, func() bool {
		s := rcv.snapshot()
		stuck, kills := s.stuck(), s.killsBySession()
		for sess := range f.loops {
			if len(stuck[sess]) == 0 || len(kills[sess]) == 0 {
				return false
			}
		}
		for sess := range f.loops {
			first[sess] = stuck[sess][0]
		}
		return true
	})
	if !ok {
		t.Fatalf("not every loop detected before the rebalance; load log:\n%s", testproc.Tail(load.LogText(), 2000))
	}
	r := stopBusiestAndRedetect(t, began, gw, ins, rcv, first)
	victim, moved, stoppedAt := r.victim, r.moved, r.stoppedAt
	redetected := time.Since(stoppedAt)
	load.Stop(t, 10*time.Second)
	settle(rcv, time.Second, 10*time.Second)
	s := rcv.snapshot()
	if len(s.bad) > 0 {
		t.Errorf("%d webhooks refused: %v", len(s.bad), s.bad)
	}
	if gw.Exited() {
		t.Fatalf("gateway exited after SIGHUP; log:\n%s", testproc.Tail(gw.LogText(), 3000))
	}

	stuck, kills := s.stuck(), s.killsBySession()
	movedSet, sameID, newID, sample := compareMovedKills(t, s, r, first)
	for sess := range f.loops {
		if movedSet[sess] {
			continue
		}
		entries := 0
		for _, h := range stuck[sess] {
			if h.body.Transition.From != "stuck" {
				entries++
			}
		}
		if entries != 1 {
			t.Errorf("loop %s on a remaining instance: %d transitions into stuck, want 1 (it must not have moved): %v", sess, entries, describe(stuck[sess]))
		}
	}
	for sess := range f.healthy {
		if len(stuck[sess]) > 0 || len(kills[sess]) > 0 {
			t.Errorf("healthy session %s flagged: %v %v", sess, describe(stuck[sess]), describe(kills[sess]))
		}
	}
	// The supervisor's replay cache (webhook ids, 15 min) catches the second
	// kill only when its id repeats the first. Ids are ld_<session digest>_<seq>
	// and a fresh instance numbers the session's transitions from 1 again, so
	// the ids repeat when the first instance's stuck transition also had
	// sequence 1.
	t.Logf("rebalance: %d loops moved from #%d, all detected again %s after the stop; second kill has the SAME webhook-id as the first for %d (a supervisor's replay cache answers already_handled), a NEW one for %d; receiver replay-cache hits %d; e.g. %s; whole test %s",
		len(moved), victim, redetected.Round(time.Millisecond), sameID, newID, len(s.replayed), sample, time.Since(began).Round(time.Millisecond))
	// Pinned, as documented in docs/scaling.md: a load-mode loop goes
	// working -> stuck (unchanged_result, seq 1) -> stuck (frequent_identical,
	// kill, seq 2) on both instances, so the second kill repeats the first's
	// webhook-id and the supervisor's replay cache drops it. If this changes,
	// update "What a rebalance costs" in docs/scaling.md.
	if sameID != len(moved) || len(s.replayed) != len(moved) {
		t.Errorf("second kills: %d with the first's webhook-id, %d new, %d replay-cache hits; want all %d repeated (docs/scaling.md)",
			sameID, newID, len(s.replayed), len(moved))
	}
}
