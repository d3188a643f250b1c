package loopevent

import (
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

func TestRoundTripThroughSpanEvents(t *testing.T) {
	want := Event{
		ID: "ld_1_2", Sequence: 2, Session: "s", SessionSource: "trace_id", TraceID: "0102",
		From: "stuck", To: "stuck", Reason: "frequent_identical", Trigger: "call", Period: 1, Repetitions: 5,
		Window: 10, CallIndex: 21, CycleTools: []string{"bash"}, Signatures: []string{"ab"}, Fingerprint: "cd",
		FingerprintSource: "result", Confidence: "high", NormalizerVersion: "args-v1", FingerprintVersion: "fp-v1",
		FirstLoopSpanID: "11", SpanID: "22", DelayCalls: 5, DelaySeconds: 36, Kill: true, DryRun: true,
		Explanation: "loop detected: same tool call x5 of last 10", DecidedAt: time.Date(2026, 1, 1, 0, 0, 36, 0, time.UTC),
		Client: "genai_semconv", Agent: "pi", Target: target.Process{ServiceName: "a", ServiceInstanceID: "i", PID: 7, HostName: "h"},
		TokensTotal: 48_000, TokensLoop: 12_500,
	}
	// Every field set, so a field added without its attribute fails below.
	require.Empty(t, webhookbody.ZeroFields(want), "the sample event leaves fields unset")
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	plain := spans.AppendEmpty()
	plain.Events().AppendEmpty().SetName("exception")
	carrier := spans.AppendEmpty()
	carrier.SetName("execute_tool bash")
	ev := carrier.Events().AppendEmpty()
	ev.SetName(EventName)
	want.CopyTo(ev.Attributes())
	broken := carrier.Events().AppendEmpty()
	broken.SetName(EventName)
	broken.Attributes().PutStr(AttrTo, "stuck")
	broken.Attributes().PutStr(AttrDecidedAt, "not a time")

	var names []string
	err := Visit(td, func(e Event, span ptrace.Span) {
		require.Equal(t, want, e)
		names = append(names, span.Name())
	})
	require.Error(t, err, "an undecodable event is reported")
	require.Equal(t, []string{"execute_tool bash"}, names)

	_, err = FromAttributes(plain.Attributes())
	require.ErrorIs(t, err, ErrNotTransition)
}

func TestNudgeNamesWhatIsRepeated(t *testing.T) {
	for _, tc := range []struct {
		reason string
		tools  []string
		reps   int64
		want   string
	}{
		{"frequent_identical", []string{"read_file"}, 5, "You called read_file with the same arguments 5 times and got the same result; try a different approach."},
		{"unchanged_result", []string{"bash"}, 2, "You called bash with the same arguments 2 times and got the same result; try a different approach."},
		{"periodic_loop", []string{"search", "open"}, 3, "You repeated the sequence search → open 3 times without the result changing; try a different approach."},
		{"terminal_reread", []string{"get_status"}, 2, "You read the final result of get_status again; it will not change. Use it, or stop."},
		{"retry_exhausted", []string{"deploy"}, 6, "deploy has failed more often than its retry budget allows; stop retrying it and report the failure."},
		{"backstop", nil, 0, "This session has been running for a very long time; summarise what you have, and finish."},
		{"name_only", nil, 4, "You appear to be repeating the same tool without progress; try a different approach."},
	} {
		assert.Equal(t, tc.want, Nudge(tc.reason, tc.tools, tc.reps), tc.reason)
	}
	e := Event{Reason: "frequent_identical", CycleTools: []string{"ls"}, Repetitions: 7}
	assert.Equal(t, Nudge("frequent_identical", []string{"ls"}, 7), e.Nudge())
}

func TestFromLogsFindsTransitionRecordsOnly(t *testing.T) {
	want := Event{ID: "ld_1_1", Sequence: 1, Session: "s", From: "working", To: "stuck", Reason: "frequent_identical", DecidedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	lrs.AppendEmpty().SetEventName("claude_code.tool_result")
	lr := lrs.AppendEmpty()
	lr.SetEventName(EventName)
	want.CopyTo(lr.Attributes())
	broken := lrs.AppendEmpty()
	broken.SetEventName(EventName)
	broken.Attributes().PutStr(AttrDecidedAt, "not a time")

	got, err := FromLogs(ld)
	require.Error(t, err, "an undecodable record is reported")
	require.Equal(t, []Event{want}, got)
}
