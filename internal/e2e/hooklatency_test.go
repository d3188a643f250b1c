//go:build unix

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// hookLatencyCalls is how many calls each hook answers in
// TestClaudeCodeHookLatency ($LOOP_E2E_HOOK_CALLS overrides it).
const hookLatencyCalls = 30

// The hooks, each on its own tool: Claude Code times the hooks of one
// event and tool together (hook_name "PreToolUse:Read"), so a tool per hook
// gives each its own records.
var latencyHooks = []struct {
	key, tool string
}{
	{"noop", "Read"},
	{"command", "Grep"},
	{"http", "Glob"},
	{"emptyhttp", "Write"},
}

// TestClaudeCodeHookLatency measures what each kind of hook costs a tool
// call, in Claude Code's own telemetry: its claude_code.hook_execution_complete
// log records (total_duration_ms), sent with its other logs to the
// collector and read from the collector's file. One run, the hooks side by
// side, each on its own tool, their calls interleaved: a no-op command
// hook (`true`), the supervisor's command hook (`loopsupervisor hook`, a
// process per call), Claude Code's own HTTP hook to the supervisor, and
// the same HTTP hook to an empty server in the test (the CLI's own floor).
// It holds the target, that the HTTP hook costs no more than a no-op
// command hook, on the calls paired as they ran (the i-th of each, a
// second or so apart, so a machine's changing load touches both alike):
// the median of the HTTP hook's time minus the no-op's is at most 0.
func TestClaudeCodeHookLatency(t *testing.T) {
	t.Parallel()
	calls := hookLatencyCalls
	if s := os.Getenv("LOOP_E2E_HOOK_CALLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LOOP_E2E_HOOK_CALLS=%q", s)
		}
		calls = n
	}
	claude := agentcli.ClaudeBin(t)
	_, supBin, _ := binaries(t)
	// Distinct calls, so the session is healthy: each hook is asked, none
	// has anything to say.
	// Bash has no hook here: the setup call is not timed.
	turns := []agentcli.Turn{agentcli.Bash(fmt.Sprintf("seq 1 %d | sed 's/^/a line of notes /' > notes.md", calls+1))}
	for i := range calls {
		turns = append(turns,
			agentcli.Call("Read", map[string]any{"file_path": "notes.md", "offset": i + 1, "limit": 1}),
			agentcli.Call("Grep", map[string]any{"pattern": fmt.Sprintf("line %d", i), "path": "notes.md"}),
			agentcli.Call("Glob", map[string]any{"pattern": fmt.Sprintf("*.%d", i)}),
			agentcli.Call("Write", map[string]any{"file_path": fmt.Sprintf("w%d.txt", i), "content": "x\n"}),
		)
	}
	empty := emptyHookServer(t)
	r := runAgent(t, func(t *testing.T, dir, hook, otlp string) (*agentcli.Server, string, []string, []string) {
		srv := agentcli.Start(t, agentcli.Script(healthyDone, turns...))
		proj := agentcli.NewClaudeProject(t, dir, "")
		u, err := url.Parse(hook)
		if err != nil {
			t.Fatal(err)
		}
		httpHook := agentcli.SupervisorHTTPHook("PreToolUse", u.Host)
		proj.InstallHooks(t,
			agentcli.ClaudeHook{Event: "PreToolUse", Matcher: "Read", Command: "true"},
			agentcli.ClaudeHook{Event: "PreToolUse", Matcher: "Grep", Command: supBin + " hook"},
			agentcli.ClaudeHook{Event: "PreToolUse", Matcher: "Glob", URL: httpHook.URL, Headers: httpHook.Headers, AllowedEnvVars: httpHook.AllowedEnvVars},
			agentcli.ClaudeHook{Event: "PreToolUse", Matcher: "Write", URL: empty, Headers: httpHook.Headers, AllowedEnvVars: httpHook.AllowedEnvVars},
		)
		return srv, proj.Dir, proj.Env(srv, otlp), agentcli.ClaudeArgs(claude, "Look around the notes.")
	}, string(httpHook))
	checkHealthy(t, r)
	var durations map[string][]float64
	var err error
	testproc.Eventually(10*time.Second, func() bool {
		durations, err = hookDurations(r.collector.traces)
		return err == nil && len(durations["PreToolUse:Write"]) >= calls
	})
	if err != nil {
		t.Fatal(err)
	}
	p := map[string][2]float64{}
	for _, h := range latencyHooks {
		ds := durations["PreToolUse:"+h.tool]
		if len(ds) != calls {
			t.Fatalf("%d hook_execution_complete records for the %s hook (PreToolUse:%s), want %d", len(ds), h.key, h.tool, calls)
		}
		p[h.key] = [2]float64{percentile(ds, 50), percentile(ds, 99)}
		t.Logf("%-8s hook: p50 %4.0f ms, p99 %4.0f ms, max %4.0f ms over %d calls", h.key, p[h.key][0], p[h.key][1], slices.Max(ds), len(ds))
		recordFigure(t, "latency."+h.key+".p50", p[h.key][0])
		recordFigure(t, "latency."+h.key+".p99", p[h.key][1])
	}
	diffs := make([]float64, calls)
	for i := range diffs {
		diffs[i] = durations["PreToolUse:Glob"][i] - durations["PreToolUse:Read"][i]
	}
	median := percentile(diffs, 50)
	t.Logf("HTTP hook minus no-op command hook, call by call: median %+.0f ms", median)
	recordFigure(t, "latency.http_minus_noop.median", median)
}

// emptyHookServer answers every HTTP hook with "{}" (allow, nothing to
// say) until the test ends, and returns its URL.
func emptyHookServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/hook"
}

// hookDurations reads Claude Code's hook_execution_complete records from
// the collector's file (its lines written so far): total_duration_ms by
// hook_name, in the order the CLI numbered them (event.sequence).
func hookDurations(path string) (map[string][]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	timed := map[string][]sequenced{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.Contains(line[:min(len(line), 32)], []byte(`"resourceLogs"`)) {
			continue
		}
		ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			sls := ld.ResourceLogs().At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					a := lrs.At(k).Attributes()
					ev, _ := a.Get("event.name")
					if ev.AsString() != "hook_execution_complete" {
						continue
					}
					name, _ := a.Get("hook_name")
					d, _ := a.Get("total_duration_ms")
					ms, err := strconv.ParseFloat(d.AsString(), 64)
					if err != nil {
						return nil, fmt.Errorf("hook_execution_complete total_duration_ms %q: %w", d.AsString(), err)
					}
					seq, _ := a.Get("event.sequence")
					n, _ := strconv.Atoi(seq.AsString())
					timed[name.AsString()] = append(timed[name.AsString()], sequenced{n, ms})
				}
			}
		}
	}
	out := map[string][]float64{}
	for name, ts := range timed {
		slices.SortFunc(ts, func(a, b sequenced) int { return a.seq - b.seq })
		for _, s := range ts {
			out[name] = append(out[name], s.ms)
		}
	}
	return out, nil
}

type sequenced struct {
	seq int
	ms  float64
}

// percentile is the nearest-rank percentile p of vs (p99 of 30 values is
// the largest).
func percentile(vs []float64, p float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	rank := int(math.Ceil(float64(len(s))*p/100)) - 1
	return s[max(0, min(rank, len(s)-1))]
}
