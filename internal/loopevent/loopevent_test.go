package loopevent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestRoundTripThroughSpanEvents(t *testing.T) {
	want := Event{
		ID: "ld_1_2", Sequence: 2, Session: "s", SessionSource: "trace_id", TraceID: "0102",
		From: "stuck", To: "stuck", Reason: "frequent_identical", Trigger: "call", Period: 1, Repetitions: 5,
		Window: 10, CallIndex: 21, CycleTools: []string{"bash"}, Signatures: []string{"ab"}, Fingerprint: "cd",
		FingerprintSource: "result", Confidence: "high", NormalizerVersion: "args-v1", FingerprintVersion: "fp-v1",
		FirstLoopSpanID: "11", SpanID: "22", DelayCalls: 5, DelaySeconds: 36, Kill: true,
		Explanation: "loop detected: same tool call x5 of last 10", DecidedAt: time.Date(2026, 1, 1, 0, 0, 36, 0, time.UTC),
		Client: "genai_semconv", Agent: "pi", Target: Target{ServiceName: "a", ServiceInstanceID: "i", PID: 7, HostName: "h"},
		TokensTotal: 48_000, TokensLoop: 12_500,
	}
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
