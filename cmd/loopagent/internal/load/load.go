// Package load generates a benchmark span stream: N concurrent agent
// sessions, each its own trace and conversation id, emitting a realistic mix
// of GenAI spans at a target total rate. About 20 % of the spans are
// execute_tool spans with ~200-byte JSON arguments and ~500-byte results; the
// rest are chat spans and nested invoke_agent (sub-agent) spans. A fraction
// of the sessions loop: after a short warm-up they repeat one tool call with
// an identical result.
package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopagent/internal/scenario"
)

// Options configure a load run.
type Options struct {
	Sessions     int           // concurrent sessions (traces)
	Rate         float64       // target spans per second, all sessions together
	Duration     time.Duration // how long to emit
	LoopFraction float64       // fraction of sessions that loop (0..1)
	ToolFraction float64       // fraction of spans that are execute_tool (default 0.2)
	Seed         uint64        // PRNG seed, for reproducible mixes
	// SessionPrefix prefixes gen_ai.conversation.id ("load" if empty).
	SessionPrefix string
}

// Stats is what a load run achieved.
type Stats struct {
	Sessions        int     `json:"sessions"`
	LoopingSessions int     `json:"looping_sessions"`
	Spans           int64   `json:"spans"`
	ToolSpans       int64   `json:"tool_spans"`
	ChatSpans       int64   `json:"chat_spans"`
	AgentSpans      int64   `json:"agent_spans"`
	TargetRate      float64 `json:"target_rate"`
	AchievedRate    float64 `json:"achieved_rate"`
	ElapsedSeconds  float64 `json:"elapsed_seconds"`
}

type counters struct{ spans, tools, chats, agents atomic.Int64 }

// Run emits spans until opts.Duration has passed or ctx is cancelled. Spans
// end at once (their timestamps span a plausible duration in the past), so
// the rate is bounded by the exporter, not by sleeping.
func Run(ctx context.Context, tp trace.TracerProvider, o Options) (Stats, error) {
	if o.Sessions <= 0 || o.Rate <= 0 || o.Duration <= 0 {
		return Stats{}, fmt.Errorf("load needs sessions, rate and duration > 0 (got %d, %g, %v)", o.Sessions, o.Rate, o.Duration)
	}
	if o.ToolFraction <= 0 {
		o.ToolFraction = 0.2
	}
	if o.SessionPrefix == "" {
		o.SessionPrefix = "load"
	}
	tracer := tp.Tracer(scenario.TracerName)
	perSession := o.Rate / float64(o.Sessions)
	looping := int(float64(o.Sessions)*o.LoopFraction + 0.5)
	var c counters
	start := time.Now()
	deadline := start.Add(o.Duration)
	var wg sync.WaitGroup
	for s := 0; s < o.Sessions; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			sess := &session{
				id:     fmt.Sprintf("%s-%04d", o.SessionPrefix, s),
				loops:  s < looping,
				rng:    rand.New(rand.NewPCG(o.Seed, uint64(s))),
				tracer: tracer,
				c:      &c,
				tool:   o.ToolFraction,
			}
			sess.run(ctx, start, deadline, perSession)
		}(s)
	}
	wg.Wait()
	elapsed := time.Since(start)
	st := Stats{
		Sessions: o.Sessions, LoopingSessions: looping,
		Spans: c.spans.Load(), ToolSpans: c.tools.Load(), ChatSpans: c.chats.Load(), AgentSpans: c.agents.Load(),
		TargetRate: o.Rate, ElapsedSeconds: elapsed.Seconds(),
	}
	st.AchievedRate = float64(st.Spans) / elapsed.Seconds()
	return st, nil
}

type session struct {
	id     string
	loops  bool
	rng    *rand.Rand
	tracer trace.Tracer
	c      *counters
	tool   float64
	calls  int
}

const warmupCalls = 6

func (s *session) run(ctx context.Context, start, deadline time.Time, rate float64) {
	agent := "load-agent"
	common := []attribute.KeyValue{
		attribute.String(scenario.AttrConversationID, s.id),
		attribute.String(scenario.AttrProviderName, "simulated"),
	}
	rootCtx, root := s.tracer.Start(context.Background(), "invoke_agent "+agent,
		trace.WithAttributes(common...),
		trace.WithAttributes(
			attribute.String(scenario.AttrOperationName, scenario.OperationInvokeAgent),
			attribute.String(scenario.AttrAgentName, agent)))
	s.c.spans.Add(1)
	s.c.agents.Add(1)
	defer root.End()
	emitted := 1
	interval := time.Duration(float64(time.Second) / rate)
	for {
		now := time.Now()
		if !now.Before(deadline) || ctx.Err() != nil {
			return
		}
		due := int(now.Sub(start).Seconds()*rate) + 1
		for ; emitted < due; emitted++ {
			s.emit(rootCtx, common)
		}
		wait := max(interval, 2*time.Millisecond)
		if d := deadline.Sub(now); d < wait {
			wait = d
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (s *session) emit(ctx context.Context, common []attribute.KeyValue) {
	now := time.Now()
	p := s.rng.Float64()
	s.c.spans.Add(1)
	switch {
	case p < s.tool:
		s.c.tools.Add(1)
		s.calls++
		tool, args, result := s.toolCall()
		_, sp := s.tracer.Start(ctx, "execute_tool "+tool,
			trace.WithTimestamp(now.Add(-150*time.Millisecond)),
			trace.WithAttributes(common...),
			trace.WithAttributes(
				attribute.String(scenario.AttrOperationName, scenario.OperationExecuteTool),
				attribute.String(scenario.AttrToolName, tool),
				attribute.String(scenario.AttrToolType, "function"),
				attribute.String(scenario.AttrToolCallID, fmt.Sprintf("%s-call-%06d", s.id, s.calls)),
				attribute.String(scenario.AttrToolCallArgs, args),
				attribute.String(scenario.AttrToolCallResult, result)))
		sp.End(trace.WithTimestamp(now))
	case p < s.tool+(1-s.tool)*0.9:
		s.c.chats.Add(1)
		_, sp := s.tracer.Start(ctx, "chat sim-model-1",
			trace.WithSpanKind(trace.SpanKindClient),
			trace.WithTimestamp(now.Add(-900*time.Millisecond)),
			trace.WithAttributes(common...),
			trace.WithAttributes(
				attribute.String(scenario.AttrOperationName, scenario.OperationChat),
				attribute.String(scenario.AttrRequestModel, "sim-model-1"),
				attribute.Int(scenario.AttrInputTokens, 800+s.rng.IntN(4000)),
				attribute.Int(scenario.AttrOutputTokens, 20+s.rng.IntN(400))))
		sp.End(trace.WithTimestamp(now))
	default:
		s.c.agents.Add(1)
		_, sp := s.tracer.Start(ctx, "invoke_agent sub-agent",
			trace.WithTimestamp(now.Add(-2*time.Second)),
			trace.WithAttributes(common...),
			trace.WithAttributes(
				attribute.String(scenario.AttrOperationName, scenario.OperationInvokeAgent),
				attribute.String(scenario.AttrAgentName, "sub-agent")))
		sp.End(trace.WithTimestamp(now))
	}
}

var tools = []string{"bash", "read_file", "grep", "web_search", "edit_file", "run_tests"}

// toolCall returns ~200-byte JSON arguments and a ~500-byte result. Looping
// sessions repeat one call and result after the warm-up.
func (s *session) toolCall() (tool, args, result string) {
	if s.loops && s.calls > warmupCalls {
		return "bash", padJSON(`{"command":"gh issue list --state open | awk '{print $1}' | sort -n","cwd":"/work/repo"`, 200),
			padText("3\n7\n12\n15\n18\n21\n", 500)
	}
	tool = tools[s.rng.IntN(len(tools))]
	args = padJSON(fmt.Sprintf(`{"tool":%q,"target":"src/module_%d/file_%d.go","step":%d`, tool, s.rng.IntN(50), s.rng.IntN(1000), s.calls), 200)
	result = padText(fmt.Sprintf(`{"ok":true,"step":%d,"lines":%d,"digest":"%016x","output":"`, s.calls, s.rng.IntN(5000), s.rng.Uint64()), 498) + `"}`
	return tool, args, result
}

// padJSON closes an open JSON object after a "note" field that pads it to n bytes.
func padJSON(open string, n int) string {
	pad := n - len(open) - len(`,"note":""}`)
	if pad < 0 {
		pad = 0
	}
	return open + `,"note":"` + strings.Repeat("x", pad) + `"}`
}

func padText(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return s + strings.Repeat(".", n-len(s))
}
