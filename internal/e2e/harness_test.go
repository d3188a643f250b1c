//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// --- binaries ----------------------------------------------------------------

var (
	builds = testproc.Builds{Pattern: "otelcol-loop-e2e-bin-"}
	bins   struct{ collector, supervisor, agent, demowatch string }
)

// binaries builds (once per test process) the supervisor and the agent into
// a temporary directory, and the collector too unless $OTELCOL_LOOP_BIN names
// one (`make test` builds bin/otelcol-loop once and passes it in, so the
// distribution is not compiled twice).
func binaries(t testing.TB) (collector, supervisor, agent string) {
	t.Helper()
	builds.Once(t, func(root, dir string) error {
		bins.supervisor = filepath.Join(dir, "loopsupervisor")
		bins.agent = filepath.Join(dir, "loopagent")
		if err := testproc.GoBuild(nil, root, bins.supervisor, "./cmd/loopsupervisor"); err != nil {
			return err
		}
		if err := testproc.GoBuild(nil, root, bins.agent, "./cmd/loopagent"); err != nil {
			return err
		}
		bins.demowatch = filepath.Join(dir, "demowatch")
		if err := testproc.GoBuild(nil, root, bins.demowatch, "./scripts/demowatch"); err != nil {
			return err
		}
		if p := os.Getenv("OTELCOL_LOOP_BIN"); p != "" {
			bins.collector = p
			return nil
		}
		bins.collector = filepath.Join(dir, "otelcol-loop")
		// The generated distribution is its own module (cmd/otelcol-loop).
		return testproc.GoBuild(nil, filepath.Join(root, "cmd", "otelcol-loop"), bins.collector, ".")
	})
	return bins.collector, bins.supervisor, bins.agent
}

func TestMain(m *testing.M) {
	code := m.Run()
	if *update && code == 0 {
		if err := writeFigures(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	builds.Remove()
	os.Exit(code)
}

// --- the collector -----------------------------------------------------------

type collector struct {
	*testproc.Proc
	otlpHTTP, otlpGRPC, metrics, health int
	traces                              string
}

// startCollector runs the distribution with config/demo.yaml, kill webhooks
// going to 127.0.0.1:killPort signed with secret, and waits until it is
// healthy.
func startCollector(t testing.TB, dir string, killPort int, secret string) *collector {
	t.Helper()
	bin, _, _ := binaries(t)
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{
		otlpHTTP: testproc.FreePort(t), otlpGRPC: testproc.FreePort(t), metrics: testproc.FreePort(t), health: testproc.FreePort(t),
		traces: filepath.Join(dir, "traces.jsonl"),
	}
	env := []string{
		"LOOPDETECT_WEBHOOK_SECRET=" + secret,
		"LOOPSUPERVISOR_PORT=" + strconv.Itoa(killPort),
		"LOOP_OTLP_HTTP_PORT=" + strconv.Itoa(c.otlpHTTP),
		"LOOP_OTLP_GRPC_PORT=" + strconv.Itoa(c.otlpGRPC),
		"LOOP_METRICS_PORT=" + strconv.Itoa(c.metrics),
		"LOOP_HEALTH_PORT=" + strconv.Itoa(c.health),
		"LOOP_TRACES_FILE=" + c.traces,
	}
	c.Proc = testproc.Start(t, dir, "collector", env, "", bin, "--config", filepath.Join(root, "config", "demo.yaml"))
	c.WaitHealthy(t, c.health, 20*time.Second)
	return c
}

// metric returns the sum of the values of the collector's Prometheus series
// named name whose labels contain every one of labels (`k="v"`).
func (c *collector) metric(name string, labels ...string) (float64, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", c.metrics))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		series, val, ok := strings.Cut(line, " ")
		if i := strings.LastIndexByte(line, '}'); i > 0 {
			series, val, ok = line[:i+1], strings.TrimSpace(line[i+1:]), true
		}
		if !ok {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(series, l)
		}
		if !match {
			continue
		}
		f, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", line, err)
		}
		sum += f
	}
	return sum, sc.Err()
}

// --- exported traces ---------------------------------------------------------

type transition struct {
	loopevent.Event
	SpanName string // the span the event sits on
}

type exported struct {
	transitions []transition
	spanNames   map[string]int // span name -> count
}

// readExported parses the file exporter's OTLP JSON lines written so far (a
// trailing line still being written is skipped).
func readExported(path string) (exported, error) {
	x := exported{spanNames: map[string]int{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return x, nil
	}
	if err != nil {
		return x, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		return x, nil
	}
	var u ptrace.JSONUnmarshaler
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if bytes.Contains(line[:min(len(line), 32)], []byte(`"resourceLogs"`)) {
			// The logs pipeline's line (Claude Code's records): its
			// transitions are log records after the record that caused them.
			ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(line)
			if err != nil {
				return x, fmt.Errorf("%s: %w", path, err)
			}
			evs, err := loopevent.FromLogs(ld)
			if err != nil {
				return x, fmt.Errorf("%s: %w", path, err)
			}
			for _, ev := range evs {
				x.transitions = append(x.transitions, transition{Event: ev, SpanName: "(log record)"})
			}
			continue
		}
		td, err := u.UnmarshalTraces(line)
		if err != nil {
			return x, fmt.Errorf("%s: %w", path, err)
		}
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					sp := spans.At(k)
					x.spanNames[sp.Name()]++
					for e := 0; e < sp.Events().Len(); e++ {
						ev := sp.Events().At(e)
						if ev.Name() != loopevent.EventName {
							continue
						}
						le, err := loopevent.FromAttributes(ev.Attributes())
						if err != nil {
							return x, fmt.Errorf("transition event on span %s: %w", sp.SpanID(), err)
						}
						x.transitions = append(x.transitions, transition{Event: le, SpanName: sp.Name()})
					}
				}
			}
		}
	}
	return x, nil
}

func (x exported) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "spans: %v\n", x.spanNames)
	for _, tr := range x.transitions {
		fmt.Fprintf(&sb, "  #%d %s -> %s reason=%s call=%d kill=%v on %q\n", tr.Sequence, tr.From, tr.To, tr.Reason, tr.CallIndex, tr.Kill, tr.SpanName)
	}
	return sb.String()
}

// alive reports whether a process with this pid exists (zombies count as
// gone only once reaped; the supervisor reaps its agent).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// agentPID reads the agent's pid from the supervisor's log line
// "agent pid N (process group N), ...".
func agentPID(log string) int {
	_, rest, ok := strings.Cut(log, "loopsupervisor: agent pid ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}
