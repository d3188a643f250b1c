//go:build unix

package scaleout

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// seen is what the tier-2 instances received, per session.id, read from
// their file/seen exporters.
type seen struct {
	records map[string]map[int]int // session -> instance -> Claude Code records
	spans   map[string]map[int]int // session -> instance -> claude_code.* spans
	seqs    map[string]map[string]bool
}

// readSeen parses every instance's OTLP JSON lines.
func readSeen(t *testing.T, ins []*tier2) seen {
	t.Helper()
	s := seen{records: map[string]map[int]int{}, spans: map[string]map[int]int{}, seqs: map[string]map[string]bool{}}
	add := func(m map[string]map[int]int, sess string, idx int) {
		if m[sess] == nil {
			m[sess] = map[int]int{}
		}
		m[sess][idx]++
	}
	for _, in := range ins {
		f, err := os.Open(in.seen)
		if err != nil {
			t.Fatalf("instance %d wrote no %s: %v", in.idx, in.seen, err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		for sc.Scan() {
			line := sc.Bytes()
			switch {
			case bytes.HasPrefix(line, []byte(`{"resourceLogs"`)):
				ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(line)
				if err != nil {
					t.Fatalf("instance %d: %v", in.idx, err)
				}
				for i := 0; i < ld.ResourceLogs().Len(); i++ {
					sls := ld.ResourceLogs().At(i).ScopeLogs()
					for j := 0; j < sls.Len(); j++ {
						lrs := sls.At(j).LogRecords()
						for k := 0; k < lrs.Len(); k++ {
							lr := lrs.At(k)
							sess, ok := lr.Attributes().Get("session.id")
							if !ok || !strings.HasPrefix(lr.Body().AsString(), "claude_code.") {
								continue // loop_detect's own transition records
							}
							add(s.records, sess.Str(), in.idx)
							if s.seqs[sess.Str()] == nil {
								s.seqs[sess.Str()] = map[string]bool{}
							}
							seq, _ := lr.Attributes().Get("event.sequence")
							s.seqs[sess.Str()][seq.AsString()] = true
						}
					}
				}
			case bytes.HasPrefix(line, []byte(`{"resourceSpans"`)):
				td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
				if err != nil {
					t.Fatalf("instance %d: %v", in.idx, err)
				}
				for i := 0; i < td.ResourceSpans().Len(); i++ {
					sss := td.ResourceSpans().At(i).ScopeSpans()
					for j := 0; j < sss.Len(); j++ {
						sps := sss.At(j).Spans()
						for k := 0; k < sps.Len(); k++ {
							if sess, ok := sps.At(k).Attributes().Get("session.id"); ok && strings.HasPrefix(sps.At(k).Name(), "claude_code.") {
								add(s.spans, sess.Str(), in.idx)
							}
						}
					}
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("instance %d: %v", in.idx, err)
		}
	}
	return s
}

func keys[V any](m map[int]V) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func instances(m map[int]int) []int {
	var out []int
	for i := range m {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// ccFleet makes n log-only sessions (the first nLoop of them looping) and
// nMixed sessions that also send spans (the first nMixedLoop looping).
func ccFleet(prefix string, n, nLoop, nMixed, nMixedLoop, warmup int) (all []*ccSession, names map[*ccSession]string) {
	names = map[*ccSession]string{}
	for i := range n + nMixed {
		mixed := i >= n
		loops := i < nLoop || (mixed && i-n < nMixedLoop)
		name := fmt.Sprintf("%s-%03d", prefix, i)
		s := newCCSession(name, i, loops, mixed, warmup)
		s.rereads = i%2 == 1
		all = append(all, s)
		names[s] = name
	}
	return all, names
}

// TestLogsThreeInstances: one gateway, three otelcol-loop instances, 96
// Claude Code sessions reporting tool calls as log records only (no trace
// ids; session.id on each record), 6 of them with the traces beta on (each
// call also a span, under trace ids of its own); a third of the sessions
// loop. Records of three sessions share a request, as a node collector's
// batch would. Each loop is detected and killed exactly once, no healthy
// session is flagged, every session's records (and spans) were received by
// exactly one instance, the one that decided about it, and none was lost.
//
//nolint:funlen // One end-to-end scenario read top to bottom: its steps share the collectors, agents and receivers it starts.
func TestLogsThreeInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four collectors; skipped with -short")
	}
	began := time.Now()
	c := startCluster(t, true)
	rcv, ins, gw := c.rcv, c.ins, c.gw
	t.Logf("4 collectors healthy after %s", time.Since(began).Round(time.Millisecond))

	const calls = 15
	prefix := fmt.Sprintf("cc-%d", time.Now().UnixNano()%1e6)
	sessions, names := ccFleet(prefix, 90, 30, 6, 3, 3)
	f := fleet{loops: map[string]bool{}, healthy: map[string]bool{}}
	for _, s := range sessions {
		f.add(s.id, s.loops)
	}
	em := &ccEmitter{url: fmt.Sprintf("http://127.0.0.1:%d", gw.http), client: &http.Client{Timeout: 10 * time.Second},
		sessions: sessions, group: 3}
	runStart := time.Now()
	em.run(context.Background(), calls, 250*time.Millisecond)
	requests, records, spans, fails, lastErr := em.stats()
	if fails > 0 {
		t.Fatalf("%d requests to the gateway failed, last: %s", fails, lastErr)
	}
	t.Logf("sent %d sessions x %d calls in %s: %d requests, %d records, %d spans",
		len(sessions), calls, time.Since(runStart).Round(time.Millisecond), requests, records, spans)

	done := func(s snapshot) bool {
		stuck, kills := s.stuck(), s.killsBySession()
		for sess := range f.loops {
			if len(stuck[sess]) == 0 || len(kills[sess]) == 0 {
				return false
			}
		}
		return true
	}
	if !testproc.Eventually(30*time.Second, func() bool { return done(rcv.snapshot()) }) {
		s := rcv.snapshot()
		var missing []string
		for _, cs := range sessions {
			if cs.loops && (len(s.stuck()[cs.id]) == 0 || len(s.killsBySession()[cs.id]) == 0) {
				missing = append(missing, names[cs])
			}
		}
		// Go on: where the records went tells why.
		t.Errorf("%d of %d loops not detected+killed within 30 s of the last call: %v", len(missing), len(f.loops), missing)
	}
	settle(rcv, 1500*time.Millisecond, 15*time.Second)
	detected := time.Since(runStart)
	s := rcv.snapshot()
	if len(s.bad) > 0 {
		t.Errorf("%d webhooks refused (signature/shape): %v", len(s.bad), s.bad)
	}
	stuck, kills := s.stuck(), s.killsBySession()
	decidedBy := map[string]int{}
	for _, h := range s.alerts {
		if prev, ok := decidedBy[h.body.Session.Key]; ok && prev != h.instance {
			t.Errorf("session %s has transitions from instances %d and %d", h.body.Session.Key, prev, h.instance)
		}
		decidedBy[h.body.Session.Key] = h.instance
	}
	killIDs := map[string]string{}
	reasons := map[string]int{}
	// shape (re-read or failing test) -> call index of the kill -> sessions
	killAt := map[bool]map[int][]string{false: {}, true: {}}
	for _, cs := range sessions {
		if !cs.loops {
			if len(stuck[cs.id]) > 0 || len(kills[cs.id]) > 0 {
				t.Errorf("healthy session %s flagged: stuck %v, kills %v", names[cs], describe(stuck[cs.id]), describe(kills[cs.id]))
			}
			continue
		}
		entries := 0
		for _, h := range stuck[cs.id] {
			if h.body.Transition.From != "stuck" {
				entries++
			}
			if h.body.Session.Source != "session.id" {
				t.Errorf("loop %s: session source %q, want session.id", names[cs], h.body.Session.Source)
			}
		}
		if entries != 1 {
			t.Errorf("loop %s: %d transitions into stuck, want exactly 1: %v", names[cs], entries, describe(stuck[cs.id]))
		}
		ids := map[string]bool{}
		for _, k := range kills[cs.id] {
			if !ids[k.webhookID] {
				reasons[k.body.Transition.Reason]++
				tag := names[cs]
				if cs.spans {
					tag += "(mixed)"
				}
				killAt[cs.rereads][k.body.Transition.CallIndex] = append(killAt[cs.rereads][k.body.Transition.CallIndex], tag)
			}
			ids[k.webhookID] = true
		}
		if len(ids) != 1 {
			t.Errorf("loop %s: %d distinct kill ids, want 1: %v", names[cs], len(ids), describe(kills[cs.id]))
		}
		for id := range ids {
			if other, ok := killIDs[id]; ok {
				t.Errorf("kill id %s shared by loops %s and %s", id, other, names[cs])
			}
			killIDs[id] = names[cs]
		}
	}
	for sess := range stuck {
		if !f.loops[sess] && !f.healthy[sess] {
			t.Errorf("stuck transition for unknown session %q", sess)
		}
	}
	// A call reported twice (a claude_code.tool span and its tool_result
	// record, one tool_use_id) counts once: loops of one shape are killed
	// at the same call whether they send spans too or not — counted twice,
	// a mixed loop's call index would be about double. A span that arrives
	// before its record is a call without arguments until the record's
	// replace them, and a call without arguments may be a new one, so a
	// mixed loop may be killed one call later, never earlier.
	for rereads, at := range killAt {
		first := -1
		for idx, tags := range at {
			for _, tag := range tags {
				if !strings.HasSuffix(tag, "(mixed)") && first >= 0 && int(idx) != first {
					t.Errorf("log-only loops of one shape (rereads %v) killed at different calls: %v", rereads, at)
				}
				if !strings.HasSuffix(tag, "(mixed)") {
					first = int(idx)
				}
			}
		}
		for idx, tags := range at {
			for _, tag := range tags {
				if strings.HasSuffix(tag, "(mixed)") && first >= 0 && (int(idx) < first || int(idx) > first+1) {
					t.Errorf("mixed loop %s killed at call %d, log-only loops of its shape at %d", tag, idx, first)
				}
			}
		}
	}

	// Where the records went: one instance per session, the deciding one,
	// nothing lost; a mixed session's spans on its records' instance.
	got := readSeen(t, ins)
	perInstance := map[int]int{}
	recvRecords, recvSpans := 0, 0
	for _, cs := range sessions {
		at := instances(got.records[cs.id])
		if len(at) != 1 {
			t.Errorf("session %s: records received by instances %v (counts %v), want exactly one", names[cs], at, got.records[cs.id])
			continue
		}
		perInstance[at[0]]++
		for _, n := range got.records[cs.id] {
			recvRecords += n
		}
		if n := len(got.seqs[cs.id]); n != 2*calls {
			t.Errorf("session %s: %d distinct records received, sent %d", names[cs], n, 2*calls)
		}
		if d, ok := decidedBy[cs.id]; ok && d != at[0] {
			t.Errorf("session %s: records on instance %d, transitions from instance %d", names[cs], at[0], d)
		}
		if cs.spans {
			sp := instances(got.spans[cs.id])
			if len(sp) != 1 || sp[0] != at[0] {
				t.Errorf("mixed session %s: spans received by instances %v, records by %d: the signals were split", names[cs], sp, at[0])
			}
			for _, n := range got.spans[cs.id] {
				recvSpans += n
			}
		} else if len(got.spans[cs.id]) > 0 {
			t.Errorf("session %s sent no spans, yet instances %v received some", names[cs], instances(got.spans[cs.id]))
		}
	}
	for i := range 3 {
		if perInstance[i] == 0 {
			t.Errorf("instance %d received no session: the gateway did not spread them (%v)", i, perInstance)
		}
	}
	t.Logf("kill at call index per loop shape: failing test %v, re-read %v", keys(killAt[false]), keys(killAt[true]))
	t.Logf("loops %d detected and killed once each (kill reasons %v), healthy %d unflagged, mixed %d with spans and records on one instance; sessions per instance %v; received %d records (sent %d), %d spans (sent %d); kills %d deliveries / %d ids; detection complete %s after the first call; whole test %s",
		len(f.loops), reasons, len(f.healthy), 6, perInstance, recvRecords, records, recvSpans, spans, len(s.kills), len(killIDs),
		detected.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// TestLogsRebalance is TestRebalance with Claude Code log sessions: 45
// sessions (a third looping from their first call) report 2 tool calls/s
// as log records; one of three instances is stopped while they run and the
// gateway is re-pointed (SIGHUP). The stopped instance's loops are detected
// again on their new instances, those of the others are not, no healthy
// session is flagged, and the second kill of a moved loop repeats the
// first's webhook-id, so the supervisor's replay cache makes it a no-op.
func TestLogsRebalance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four collectors; skipped with -short")
	}
	began := time.Now()
	c := startCluster(t, false)
	rcv, ins, gw := c.rcv, c.ins, c.gw

	prefix := fmt.Sprintf("ccrebal-%d", time.Now().UnixNano()%1e6)
	sessions, names := ccFleet(prefix, 45, 15, 0, 0, 0)
	f := fleet{loops: map[string]bool{}, healthy: map[string]bool{}}
	for _, s := range sessions {
		f.add(s.id, s.loops)
	}
	em := &ccEmitter{url: fmt.Sprintf("http://127.0.0.1:%d", gw.http), client: &http.Client{Timeout: 10 * time.Second},
		sessions: sessions, group: 3}
	ctx, cancel := context.WithCancel(context.Background())
	emitted := make(chan struct{})
	go func() { defer close(emitted); em.run(ctx, 0, 500*time.Millisecond) }()
	stopEmitter := func() { cancel(); <-emitted }
	defer stopEmitter()

	// Phase 1: every loop detected once, somewhere.
	first := map[string]hook{}
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
		_, _, _, fails, lastErr := em.stats()
		t.Fatalf("not every loop detected before the rebalance (%d failed requests, last %q)", fails, lastErr)
	}
	r := stopBusiestAndRedetect(t, began, gw, ins, rcv, first)
	victim, moved, stoppedAt := r.victim, r.moved, r.stoppedAt
	redetected := time.Since(stoppedAt)
	stopEmitter()
	settle(rcv, time.Second, 10*time.Second)
	s := rcv.snapshot()
	if len(s.bad) > 0 {
		t.Errorf("%d webhooks refused: %v", len(s.bad), s.bad)
	}
	if gw.Exited() {
		t.Fatalf("gateway exited after SIGHUP; log:\n%s", testproc.Tail(gw.LogText(), 3000))
	}
	requests, records, _, fails, lastErr := em.stats()

	stuck, kills := s.stuck(), s.killsBySession()
	movedSet, sameID, newID, sample := compareMovedKills(t, s, r, first)
	for _, cs := range sessions {
		switch {
		case !cs.loops:
			if len(stuck[cs.id]) > 0 || len(kills[cs.id]) > 0 {
				t.Errorf("healthy session %s flagged: %v %v", names[cs], describe(stuck[cs.id]), describe(kills[cs.id]))
			}
		case !movedSet[cs.id]:
			entries := 0
			for _, h := range stuck[cs.id] {
				if h.body.Transition.From != "stuck" {
					entries++
				}
			}
			if entries != 1 {
				t.Errorf("loop %s on a remaining instance: %d transitions into stuck, want 1: %v", names[cs], entries, describe(stuck[cs.id]))
			}
		}
	}
	t.Logf("logs rebalance: %d loops moved from #%d, all detected again %s after the stop; second kill with the first's webhook-id for %d, a new one for %d; receiver replay-cache hits %d; e.g. %s; emitter %d requests, %d records, %d failed (last %q); whole test %s",
		len(moved), victim, redetected.Round(time.Millisecond), sameID, newID, len(s.replayed), sample,
		requests, records, fails, lastErr, time.Since(began).Round(time.Millisecond))
	if sameID != len(moved) || len(s.replayed) != len(moved) {
		t.Errorf("second kills: %d with the first's webhook-id, %d new, %d replay-cache hits; want all %d repeated (docs/scaling.md)",
			sameID, newID, len(s.replayed), len(moved))
	}
}
