//go:build unix

package scaleout

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// TestGatewayConfigsValidate: config/gateway*.yaml pass
// `otelcol-loop-gateway validate`, and a broken copy does not.
func TestGatewayConfigsValidate(t *testing.T) {
	_, gw, _ := binaries(t)
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "config", "gateway*.yaml"))
	want := map[string]bool{"gateway.yaml": false, "gateway-dns.yaml": false, "gateway-k8s.yaml": false}
	for _, f := range files {
		want[filepath.Base(f)] = true
		t.Run(filepath.Base(f), func(t *testing.T) {
			if out, err := validateGateway(gw, f); err != nil {
				t.Fatalf("otelcol-loop-gateway validate --config %s: %v\n%s", f, err, out)
			}
		})
	}
	for f, ok := range want {
		if !ok {
			t.Errorf("config/%s is missing", f)
		}
	}
	// Validation is real: routing_attributes without routing_key: attributes
	// is refused by the v0.161.0 exporter.
	src, err := os.ReadFile(filepath.Join(root, "config", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "    routing_key: attributes\n", "    routing_key: traceID\n", 1)
	if bad == string(src) {
		t.Fatal("config/gateway.yaml has no `routing_key: attributes` line to break")
	}
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := validateGateway(gw, p); err == nil || !strings.Contains(out, "routing_attributes") {
		t.Errorf("broken gateway config accepted (err %v):\n%s", err, out)
	}
}

// fleet is what the agents of one run are expected to do.
type fleet struct {
	loops, healthy map[string]bool
}

func (f fleet) add(session string, loops bool) {
	if loops {
		f.loops[session] = true
	} else {
		f.healthy[session] = true
	}
}

// scenarios run as separate loopagent processes next to the load generator:
// name -> loops (true) or healthy (false).
var scenarios = []struct {
	name  string
	loops bool
}{
	{"seed000", true}, {"oscillation", true}, {"terminal-reread", true},
	{"pagination", false}, {"healthy-edit-test", false}, {"ratelimit", false}, {"approval", false},
}

// TestLoopbackThreeInstances: one gateway, three otelcol-loop instances, 300
// sessions (286 from loopagent --load, 30 % of them looping, plus two
// loopagent processes of each of seven scenarios, three of which loop). Every
// loop is detected exactly once across the three instances, no healthy
// session is flagged, every kill is delivered, and kill ids are unique per
// loop.
//
//nolint:funlen // One end-to-end scenario read top to bottom: its steps share the gateway, instances and agents it starts.
func TestLoopbackThreeInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four collectors; skipped with -short")
	}
	began := time.Now()
	_, _, agent := binaries(t)
	c := startCluster(t, false)
	dir, rcv, ins, gw := c.dir, c.rcv, c.ins, c.gw
	t.Logf("4 collectors healthy after %s", time.Since(began).Round(time.Millisecond))

	const loadSessions = 286
	loopFraction := 0.3
	f := fleet{loops: map[string]bool{}, healthy: map[string]bool{}}
	looping := int(float64(loadSessions)*loopFraction + 0.5)
	prefix := fmt.Sprintf("scale-%d", time.Now().UnixNano()%1e6)
	for i := range loadSessions {
		f.add(fmt.Sprintf("%s-%04d", prefix, i), i < looping)
	}
	endpoint := fmt.Sprintf("127.0.0.1:%d", gw.grpc)
	runStart := time.Now()
	load := start(t, dir, "loopagent-load", []string{"OTEL_SERVICE_NAME=loadagent"}, filepath.Join(dir, "load.json"), agent,
		"--load", "--sessions", strconv.Itoa(loadSessions), "--loop-fraction", fmt.Sprint(loopFraction),
		"--rate", "3000", "--duration", "15s", "--session-id", prefix,
		"--endpoint", endpoint, "--protocol", "grpc", "-q")
	var agents []*testproc.Proc
	for _, sc := range scenarios {
		for k := range 2 {
			sess := fmt.Sprintf("%s-%s-%d", prefix, sc.name, k)
			f.add(sess, sc.loops)
			agents = append(agents, start(t, dir, "loopagent-"+sc.name+"-"+strconv.Itoa(k),
				[]string{"OTEL_SERVICE_NAME=" + sc.name}, "", agent,
				"--scenario", sc.name, "--speed", "20", "--max-calls", "30", "--session-id", sess,
				"--endpoint", endpoint, "--protocol", "grpc", "-q"))
		}
	}
	if n := len(f.loops) + len(f.healthy); n != 300 {
		t.Fatalf("fleet of %d sessions, want 300", n)
	}
	for _, a := range append(agents, load) {
		if code := a.Wait(t, 60*time.Second); code != 0 {
			t.Fatalf("%s exited %d:\n%s", a.Name, code, testproc.Tail(a.LogText(), 2000))
		}
	}
	var st struct {
		Status          string `json:"status"`
		Spans           int64  `json:"spans"`
		LoopingSessions int    `json:"looping_sessions"`
		ExportErrors    int64  `json:"export_errors"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "load.json")); err != nil || json.Unmarshal(b, &st) != nil || st.Status != "ok" {
		t.Fatalf("load result: %s (%v)", b, err)
	}
	if st.LoopingSessions != looping {
		t.Fatalf("load generator looped %d sessions, test expects %d", st.LoopingSessions, looping)
	}
	t.Logf("agents done after %s: load %d spans, %d export errors", time.Since(runStart).Round(time.Millisecond), st.Spans, st.ExportErrors)

	// Every loop detected and killed; then the deliveries settle.
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
		for sess := range f.loops {
			if len(s.stuck()[sess]) == 0 || len(s.killsBySession()[sess]) == 0 {
				missing = append(missing, sess)
			}
		}
		sort.Strings(missing)
		t.Fatalf("%d of %d loops not detected+killed within 30 s of the agents' end: %v", len(missing), len(f.loops), missing)
	}
	settle(rcv, 1500*time.Millisecond, 15*time.Second)
	s := rcv.snapshot()
	t.Logf("detection complete %s after the run started", time.Since(runStart).Round(time.Millisecond))

	if len(s.bad) > 0 {
		t.Errorf("%d webhooks refused (signature/shape): %v", len(s.bad), s.bad)
	}
	stuck, kills := s.stuck(), s.killsBySession()
	perInstance := map[int]int{}
	sessionInstance := map[string]int{}
	for _, h := range s.alerts {
		if prev, ok := sessionInstance[h.body.Session.Key]; ok && prev != h.instance {
			t.Errorf("session %s has transitions from instances %d and %d: its spans were split", h.body.Session.Key, prev, h.instance)
		}
		sessionInstance[h.body.Session.Key] = h.instance
	}
	killIDs := map[string]string{} // webhook id -> session
	for sess := range f.loops {
		hs := stuck[sess]
		entries := 0
		for _, h := range hs {
			if h.body.Transition.From != "stuck" {
				entries++
			}
		}
		if entries != 1 {
			t.Errorf("loop %s: %d transitions into stuck, want exactly 1: %v", sess, entries, describe(hs))
		}
		perInstance[hs[0].instance]++
		ids := map[string]bool{}
		for _, k := range kills[sess] {
			ids[k.webhookID] = true
			if k.body.ID+".kill" != k.webhookID {
				t.Errorf("kill for %s: webhook-id %q is not body id %q + .kill", sess, k.webhookID, k.body.ID)
			}
		}
		if len(ids) != 1 {
			t.Errorf("loop %s: %d distinct kill ids, want 1: %v", sess, len(ids), describe(kills[sess]))
		}
		for id := range ids {
			if other, ok := killIDs[id]; ok {
				t.Errorf("kill id %s shared by loops %s and %s", id, other, sess)
			}
			killIDs[id] = sess
		}
		// Every transition that asked for a kill has its kill delivered.
		for _, h := range s.alerts {
			if h.body.Session.Key == sess && h.body.Transition.Kill && !ids[h.body.ID+".kill"] {
				t.Errorf("loop %s: transition %s asked for a kill that never arrived", sess, h.body.ID)
			}
		}
	}
	for sess := range f.healthy {
		if len(stuck[sess]) > 0 || len(kills[sess]) > 0 {
			t.Errorf("healthy session %s flagged: stuck %v, kills %v", sess, describe(stuck[sess]), describe(kills[sess]))
		}
	}
	for sess := range stuck {
		if !f.loops[sess] && !f.healthy[sess] {
			t.Errorf("stuck transition for unknown session %q", sess)
		}
	}
	for i := range 3 {
		if perInstance[i] == 0 {
			t.Errorf("instance %d detected no loop: the gateway did not spread the sessions (%v)", i, perInstance)
		}
	}
	var spans []string
	for _, in := range ins {
		spans = append(spans, fmt.Sprintf("#%d %.0f spans", in.idx, in.metric("otelcol_loopdetect_spans")))
	}
	t.Logf("loops %d detected once each (per instance %v), healthy %d unflagged, kills %d deliveries / %d ids, alerts %d; %s; whole test %s",
		len(f.loops), perInstance, len(f.healthy), len(s.kills), len(killIDs), len(s.alerts), strings.Join(spans, ", "),
		time.Since(began).Round(time.Millisecond))
}

// settle waits until the receiver has seen no new webhook for quiet (or max
// has passed): deliveries are asynchronous, and this is what "nothing more
// is coming" looks like from outside.
func settle(r *receiver, quiet, max time.Duration) {
	last, n := time.Now(), -1
	deadline := time.Now().Add(max)
	testproc.Eventually(max, func() bool {
		s := r.snapshot()
		if c := len(s.kills) + len(s.alerts); c != n {
			n, last = c, time.Now()
		}
		return time.Since(last) >= quiet || time.Now().After(deadline)
	})
}

func describe(hs []hook) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "[#%d %s %s->%s %s seq %d call %d] ", h.instance, h.webhookID, h.body.Transition.From, h.body.Transition.To,
			h.body.Transition.Reason, h.body.Sequence, h.body.Transition.CallIndex)
	}
	return b.String()
}
