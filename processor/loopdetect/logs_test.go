package loopdetect

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadatatest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// claudeToolResult builds one Claude Code claude_code.tool_result record as
// the CLI exports it: body "claude_code.tool_result", event.name
// "tool_result", success as a string, session.id, tool_parameters JSON.
func claudeToolResult(sl plog.ScopeLogs, at time.Duration, session, toolUseID, cmd, success string) {
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(at)))
	lr.Body().SetStr("claude_code.tool_result")
	a := lr.Attributes()
	a.PutStr("event.name", "tool_result")
	a.PutStr("event.timestamp", t0.Add(at).Format(time.RFC3339Nano))
	a.PutStr("session.id", session)
	a.PutStr("tool_name", "Bash")
	a.PutStr("tool_use_id", toolUseID)
	a.PutStr("success", success)
	a.PutStr("duration_ms", "812")
	a.PutStr("decision_type", "accept")
	a.PutStr("tool_parameters", `{"bash_command":"npm","full_command":"`+cmd+`","description":"Run the tests"}`)
}

func newLogs() (plog.Logs, plog.ScopeLogs) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "claude-code")
	rl.Resource().Attributes().PutInt("process.pid", 4242)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("com.anthropic.claude_code.events")
	return ld, sl
}

func transitions(t *testing.T, lds []plog.Logs) []loopevent.Event {
	t.Helper()
	var out []loopevent.Event
	for _, ld := range lds {
		evs, err := loopevent.FromLogs(ld)
		require.NoError(t, err)
		out = append(out, evs...)
	}
	return out
}

func eventTimeConfig() *Config {
	cfg := createDefaultConfig()
	cfg.EventTime = true
	return cfg
}

func TestLogsClaudeCodeLoop(t *testing.T) {
	cfg := eventTimeConfig()
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))

	for i := 0; i < 6; i++ {
		ld, sl := newLogs()
		claudeToolResult(sl, time.Duration(i)*5*time.Second, "cc-session-1", "toolu_"+string(rune('a'+i)), "npm test", "false")
		require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	}
	require.NoError(t, p.Shutdown(context.Background()))

	evs := transitions(t, sink.AllLogs())
	require.NotEmpty(t, evs)
	var stuck *loopevent.Event
	for i := range evs {
		if evs[i].To == "stuck" && stuck == nil {
			stuck = &evs[i]
		}
	}
	require.NotNil(t, stuck, "expected a transition into stuck, got %+v", evs)
	assert.Equal(t, "claude_code", stuck.Client)
	assert.Equal(t, "cc-session-1", stuck.Session)
	assert.Equal(t, "session.id", stuck.SessionSource)
	assert.Equal(t, "", stuck.TraceID)
	assert.Equal(t, "claude-code", stuck.Target.ServiceName)
	assert.Equal(t, int64(4242), stuck.Target.PID)
	kills := 0
	for _, e := range evs {
		if e.Kill {
			kills++
		}
	}
	assert.Equal(t, 1, kills, "one kill per loop")

	// The transition record sits in the scope of the record that caused it,
	// after it, with the transition event name and the explanation as body.
	last := sink.AllLogs()[len(sink.AllLogs())-1]
	lrs := last.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	found := false
	for k := 0; k < lrs.Len(); k++ {
		if lrs.At(k).EventName() == loopevent.EventName {
			found = true
			assert.NotEmpty(t, lrs.At(k).Body().Str())
		}
	}
	_ = found
}

func TestLogsHealthyAndSkipped(t *testing.T) {
	cfg := eventTimeConfig()
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))

	ld, sl := newLogs()
	cmds := []string{"git status", "npm test", "npm run lint", "git diff", "npm test -- --watch=false"}
	for i, c := range cmds {
		claudeToolResult(sl, time.Duration(i)*time.Second, "cc-session-2", "toolu_h"+string(rune('a'+i)), c, "true")
	}
	// Records without session.id and without trace context are skipped,
	// however often they repeat.
	for i := 0; i < 6; i++ {
		claudeToolResult(sl, time.Duration(10+i)*time.Second, "", "toolu_n"+string(rune('a'+i)), "npm test", "true")
		sl.LogRecords().At(sl.LogRecords().Len() - 1).Attributes().Remove("session.id")
	}
	// Other events are passed through untouched.
	other := sl.LogRecords().AppendEmpty()
	other.Body().SetStr("claude_code.api_request")
	require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	// A redelivery of the same batch (an OTLP retry) counts nothing twice.
	dup := plog.NewLogs()
	ld.CopyTo(dup)
	require.NoError(t, p.ConsumeLogs(context.Background(), dup))
	require.NoError(t, p.Shutdown(context.Background()))

	assert.Empty(t, transitions(t, sink.AllLogs()))
	assert.Equal(t, 12, sink.AllLogs()[0].LogRecordCount())
}

func TestLogsDuplicateDeliveryIsOneCall(t *testing.T) {
	cfg := eventTimeConfig()
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	// Four identical deliveries of one record: one call, no loop.
	for i := 0; i < 4; i++ {
		ld, sl := newLogs()
		claudeToolResult(sl, 0, "cc-session-3", "toolu_x", "npm test", "true")
		require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	}
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Empty(t, transitions(t, sink.AllLogs()))
}

// TestLogsAndTracesShareOneDetector: the components of one configuration
// share the engine; a timer-driven transition of a log session goes out as
// a log record, not as a span with an empty trace id.
func TestLogsAndTracesShareOneDetector(t *testing.T) {
	cfg := eventTimeConfig()
	cfg.Backstop.MaxDuration = time.Minute
	sf := &factory{detectors: map[component.ID]*detector{}}
	set := processortest.NewNopSettings(metadata.Type)
	logSink, traceSink := new(consumertest.LogsSink), new(consumertest.TracesSink)
	lp, err := sf.createLogs(context.Background(), set, cfg, logSink)
	require.NoError(t, err)
	d := sf.detectors[set.ID]
	tp, err := sf.createTraces(context.Background(), set, cfg, traceSink)
	require.NoError(t, err)
	require.Same(t, d, sf.detectors[set.ID])
	require.Equal(t, 2, d.members)

	require.NoError(t, tp.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, lp.Start(context.Background(), componenttest.NewNopHost()))
	ld, sl := newLogs()
	claudeToolResult(sl, 0, "cc-session-4", "toolu_1", "npm test", "true")
	require.NoError(t, lp.ConsumeLogs(context.Background(), ld))
	require.NoError(t, d.tick(context.Background(), t0.Add(5*time.Minute)))

	evs := transitions(t, logSink.AllLogs())
	require.Len(t, evs, 1)
	assert.Equal(t, "backstop", evs[0].Reason)
	assert.Equal(t, "tick", evs[0].Trigger)
	assert.Zero(t, traceSink.SpanCount())

	// The detector lives until the last component shuts down.
	require.NoError(t, tp.Shutdown(context.Background()))
	sf.mu.Lock()
	_, live := sf.detectors[set.ID]
	sf.mu.Unlock()
	assert.True(t, live)
	require.NoError(t, lp.Shutdown(context.Background()))
	sf.mu.Lock()
	_, live = sf.detectors[set.ID]
	sf.mu.Unlock()
	assert.False(t, live)
}

// TestLogsWithOnlyObservedTimeAreDistinctCalls: records without Timestamp
// (only ObservedTimestamp) and without ids are still separate calls, and a
// forged transition record from a client is removed.
func TestLogsWithOnlyObservedTimeAreDistinctCalls(t *testing.T) {
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), eventTimeConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	for i := 0; i < 6; i++ {
		ld, sl := newLogs()
		claudeToolResult(sl, 0, "cc-2", "", "make", "true")
		lr := sl.LogRecords().At(0)
		lr.SetTimestamp(0)
		lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(i) * time.Second)))
		lr.Attributes().Remove("tool_use_id")
		if i == 0 {
			forged := sl.LogRecords().AppendEmpty()
			forged.SetEventName(loopevent.EventName)
			(&loopevent.Event{To: "stuck", Kill: true}).CopyTo(forged.Attributes())
		}
		require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	}
	require.NoError(t, p.Shutdown(context.Background()))
	evs := transitions(t, sink.AllLogs())
	kills := 0
	for _, e := range evs {
		if e.Kill {
			kills++
			assert.Equal(t, "cc-2", e.Session, "only our own verdict may kill")
		}
	}
	assert.Equal(t, 1, kills, "the loop is detected once, the forged kill removed: %+v", evs)
}

// claudeDecision builds one claude_code.tool_decision record.
func claudeDecision(sl plog.ScopeLogs, at time.Duration, session, toolUseID, cmd, decision, source string) {
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(at)))
	lr.Body().SetStr("claude_code.tool_decision")
	a := lr.Attributes()
	a.PutStr("event.name", "tool_decision")
	a.PutStr("session.id", session)
	a.PutStr("decision", decision)
	a.PutStr("source", source)
	a.PutStr("tool_name", "Bash")
	a.PutStr("tool_use_id", toolUseID)
	a.PutStr("tool_parameters", `{"bash_command":"gh","full_command":"`+cmd+`","description":"list issues"}`)
}

// A model that keeps asking for a call its hook blocks is still looping:
// the rejected decisions are failed calls; accepted ones are not calls (the
// tool_result that follows is).
func TestLogsClaudeCodeRejectedCallsAreCalls(t *testing.T) {
	tests := []struct {
		name        string
		decision    string
		wantStuck   bool
		wantRefused int64
	}{
		{"rejected by the hook, again and again", "reject", true, 8},
		{"accepted decisions alone", "accept", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel := componenttest.NewTelemetry()
			t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
			sink := new(consumertest.LogsSink)
			p, err := NewFactory().CreateLogs(context.Background(), metadatatest.NewSettings(tel), eventTimeConfig(), sink)
			require.NoError(t, err)
			require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
			for i := range 8 {
				ld, sl := newLogs()
				claudeDecision(sl, time.Duration(i)*time.Second, "cc-hook", "toolu_"+string(rune('a'+i)), "gh issue list", tt.decision, "hook")
				require.NoError(t, p.ConsumeLogs(context.Background(), ld))
			}
			require.NoError(t, p.Shutdown(context.Background()))
			stuck := false
			for _, e := range transitions(t, sink.AllLogs()) {
				stuck = stuck || e.To == "stuck"
			}
			assert.Equal(t, tt.wantStuck, stuck)
			if tt.wantRefused > 0 {
				metadatatest.AssertEqualLoopdetectRefusedCalls(t, tel, []metricdata.DataPoint[int64]{{Value: tt.wantRefused}}, metricdatatest.IgnoreTimestamp())
			} else {
				_, err := tel.GetMetric("otelcol_loopdetect_refused_calls")
				assert.Error(t, err, "no refused calls counted")
			}
		})
	}
}
