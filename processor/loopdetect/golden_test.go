package loopdetect_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/replay"
	"github.com/otelcol-loop/otelcol-loop/internal/scenario"
)

var update = flag.Bool("update", false, "rewrite input.jsonl and transitions.golden.jsonl from the code")

const scenarioRoot = "../../testdata/scenarios"

// TestGoldenScenarios expands each scenario.yaml into OTLP (input.jsonl),
// runs it through the processor factory in event-time mode, and compares
// the transitions with the golden file and the scenario's own expectations.
func TestGoldenScenarios(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(scenarioRoot, "*", "scenario.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, path := range dirs {
		dir := filepath.Dir(path)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			sc, err := scenario.Load(path)
			require.NoError(t, err)
			batches, err := sc.Batches()
			require.NoError(t, err)
			var input bytes.Buffer
			var m ptrace.JSONMarshaler
			for _, b := range batches {
				line, err := m.MarshalTraces(b)
				require.NoError(t, err)
				input.Write(line)
				input.WriteByte('\n')
			}
			checkFile(t, filepath.Join(dir, "input.jsonl"), input.Bytes())
			if len(sc.Config) > 0 {
				// loopreplay --config reads the same settings.
				y, err := yaml.Marshal(map[string]any{"loop_detect": sc.Config})
				require.NoError(t, err)
				checkFile(t, filepath.Join(dir, "config.yaml"), y)
			}

			f, err := os.Open(filepath.Join(dir, "input.jsonl"))
			require.NoError(t, err)
			defer f.Close()
			recorded, err := replay.ReadOTLPJSON(f, "input.jsonl")
			require.NoError(t, err)
			cfg, err := replay.Config(sc.ConfMap())
			require.NoError(t, err)
			res, err := replay.Run(context.Background(), cfg, recorded)
			require.NoError(t, err)

			var got bytes.Buffer
			require.NoError(t, replay.WriteLines(&got, res.Events))
			checkFile(t, filepath.Join(dir, "transitions.golden.jsonl"), got.Bytes())
			checkExpectations(t, sc, res.Events)
			checkUnchangedExceptEvents(t, dir, res.Output)
		})
	}
}

func checkFile(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run: go test ./processor/loopdetect/ -run Golden -update, then read the diff")
	require.Equal(t, string(want), string(got), "%s differs from what the code produces", path)
}

func checkExpectations(t *testing.T, sc *scenario.Scenario, events []loopevent.Event) {
	t.Helper()
	traceOf := func(e *loopevent.Event) int {
		for n := 1; n <= 64; n++ {
			id := scenario.TraceID(n)
			if e.TraceID == fmt.Sprintf("%x", id[:]) {
				return n
			}
		}
		return 0
	}
	final := map[int]string{}
	kills := 0
	for i := range events {
		e := &events[i]
		final[traceOf(e)] = e.To
		if e.Kill {
			kills++
		}
		require.NotContains(t, sc.Expect.NoState, e.To, "entered a forbidden state: %+v", e)
	}
	for trace, want := range sc.Expect.Final {
		got := final[trace]
		if got == "" {
			got = "working"
		}
		require.Equal(t, want, got, "final state of trace %d", trace)
	}
	if sc.Expect.Kills != nil {
		require.Equal(t, *sc.Expect.Kills, kills, "kill requests")
	}
	next := 0
	for _, w := range sc.Expect.Transitions {
		found := false
		for ; next < len(events); next++ {
			e := &events[next]
			if (w.Trace == 0 || traceOf(e) == w.Trace) && e.To == w.To &&
				(w.Reason == "" || e.Reason == w.Reason) &&
				(w.Period == nil || int64(*w.Period) == e.Period) &&
				(w.CallIndex == nil || int64(*w.CallIndex) == e.CallIndex) &&
				(w.Kill == nil || *w.Kill == e.Kill) &&
				(w.DelaySeconds == nil || *w.DelaySeconds == e.DelaySeconds) {
				found = true
				next++
				break
			}
		}
		require.True(t, found, "expected transition %+v not found (in order) among:\n%s", w, describe(events))
	}
}

func describe(events []loopevent.Event) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "  %s→%s %s period=%d call=%d kill=%v\n", e.From, e.To, e.Reason, e.Period, e.CallIndex, e.Kill)
	}
	return b.String()
}

// checkUnchangedExceptEvents: the processor forwards every span as it came,
// adding only transition events (and synthetic spans of its own).
func checkUnchangedExceptEvents(t *testing.T, dir string, output []ptrace.Traces) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "input.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	inputs, err := replay.ReadOTLPJSON(f, "input.jsonl")
	require.NoError(t, err)
	var forwarded []ptrace.Traces
	for _, td := range output {
		if isSynthetic(td) {
			continue
		}
		td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
			rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
				ss.Spans().RemoveIf(func(s ptrace.Span) bool {
					s.Events().RemoveIf(func(e ptrace.SpanEvent) bool { return e.Name() == loopevent.EventName })
					return false
				})
				return false
			})
			return false
		})
		forwarded = append(forwarded, td)
	}
	require.Len(t, forwarded, len(inputs))
	for i := range inputs {
		require.NoError(t, ptracetest.CompareTraces(inputs[i].Traces, forwarded[i]), "batch %d", i)
	}
}

func isSynthetic(td ptrace.Traces) bool {
	synthetic := td.SpanCount() > 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			for k := 0; k < sss.At(j).Spans().Len(); k++ {
				_, ok := sss.At(j).Spans().At(k).Attributes().Get(loopevent.AttrSynthetic)
				synthetic = synthetic && ok
			}
		}
	}
	return synthetic
}
