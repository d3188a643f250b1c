package loopdetect

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
)

// merge moves the spans of all into one batch.
func merge(all ...ptrace.Traces) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, b := range all {
		b.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	return td
}

// decisions keeps what a transition decided, without its clock readings.
type decision struct {
	session, to string
	kill        bool
	tokensTotal int64
	tokensLoop  int64
	service     string
}

func decisions(evs []loopevent.Event) []decision {
	out := make([]decision, len(evs))
	for i, e := range evs {
		out[i] = decision{session: e.Session, to: e.To, kill: e.Kill, tokensTotal: e.TokensTotal, tokensLoop: e.TokensLoop, service: e.Target.ServiceName}
	}
	return out
}

// The batch remembers which traces' sessions are untracked, to skip their
// model spans: a tool call later in the same batch must end that, so the
// model spans after it count exactly as they do in batches of their own.
// Without a token kill a trace's tokens are summed in the batch and added
// at once: the sums must come out the same, in the same order relative to
// the tool calls.
func TestModelSpansCountTheSameInOneBatchAsInSeparateBatches(t *testing.T) {
	for _, tc := range []struct {
		name          string
		maxLoopTokens int64
	}{
		{"token kill: added span by span", 5000},
		{"no token kill: summed per trace and batch", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(together bool) []decision {
				d, sink := newTestDetector(t, nil, func(c *Config) {
					c.Kill.Reasons = nil
					c.Kill.AfterLoopCalls = 0
					c.Kill.MaxLoopTokens = tc.maxLoopTokens
				})
				ctx := context.Background()
				at := base
				for i := uint64(1); i <= 6; i++ {
					// Two sessions interleaved; model calls before and after each
					// tool call, the first ones before the session exists.
					batch := []ptrace.Traces{
						llmTraces(7, 10*i, at, 900, 100),
						llmTraces(8, 10*i, at, 20, 5),
						llmTraces(7, 10*i+1, at.Add(time.Second), 300, 50),
						toolTraces(7, i, at.Add(2*time.Second), "read_file", `{"path":"a"}`, "same", nil),
						llmTraces(7, 10*i+2, at.Add(3*time.Second), 700, 80),
						llmTraces(7, 10*i+3, at.Add(3*time.Second), 70, 8),
						toolTraces(8, i, at.Add(3*time.Second), "grep", `{"q":"x"}`, "same", nil),
						// Another trace's tool call between two model spans of one trace.
						llmTraces(7, 10*i+4, at.Add(4*time.Second), 500, 60),
						llmTraces(8, 10*i+2, at.Add(4*time.Second), 40, 10),
					}
					if together {
						require.NoError(t, d.ConsumeTraces(ctx, merge(batch...)))
					} else {
						for _, td := range batch {
							require.NoError(t, d.ConsumeTraces(ctx, td))
						}
					}
					at = at.Add(5 * time.Second)
				}
				return decisions(events(t, sink.AllTraces()))
			}
			separate := run(false)
			require.NotEmpty(t, separate)
			var killed, counted bool
			for _, e := range separate {
				killed = killed || e.kill
				counted = counted || e.tokensTotal > 0
			}
			require.True(t, counted, "the transitions should carry token sums: %+v", separate)
			require.Equal(t, tc.maxLoopTokens > 0, killed, "a kill only by kill.max_loop_tokens: %+v", separate)
			assert.Equal(t, separate, run(true))
		})
	}
}

// Extract reads a resource once for the spans that share it: spans of
// another resource in the same batch still get their own target.
func TestEachResourceOfABatchKeepsItsOwnTarget(t *testing.T) {
	d, sink := newTestDetector(t, nil, nil)
	ctx := context.Background()
	at := base
	for i := uint64(1); i <= 6; i++ {
		other := toolTraces(8, i, at, "grep", `{"q":"x"}`, "same", nil)
		other.ResourceSpans().At(0).Resource().Attributes().PutStr("service.name", "other")
		require.NoError(t, d.ConsumeTraces(ctx, merge(
			toolTraces(7, i, at, "read_file", `{"path":"a"}`, "same", nil),
			other,
			toolTraces(9, i, at, "bash", `{"c":"ls"}`, "same", nil),
		)))
		at = at.Add(time.Second)
	}
	services := map[string]string{}
	for _, e := range decisions(events(t, sink.AllTraces())) {
		services[e.session] = e.service
	}
	assert.Equal(t, map[string]string{
		"07000000000000000000000000000000": "agent",
		"08000000000000000000000000000000": "other",
		"09000000000000000000000000000000": "agent",
	}, services)
}
